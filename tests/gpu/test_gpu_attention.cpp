// GPU tier: the attention kernels against the CPU reference. Prefill (flash, no cache) and decode
// (split-KV over a cache with per-sequence positions) for T and C in {1, 7, 64, 127, 1000} — none a
// multiple of the 64-key tiles but 64 — causal and not, GQA ratios 1, 4 and 8 (MQA), head_dim 64 and
// 128, bf16 and f16; decode results for different split counts agree within fp32 rounding. Outputs are
// poisoned before each run; inputs are fresh random values.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "codegen/attention_plan.h"
#include "layerjit/text.h"
#include "tests/gpu/group_check.h"

using namespace lj;

namespace {

constexpr int64_t kLens[] = {1, 7, 64, 127, 1000};

Graph parse_one(const std::string& text) {
  Module m = parse_module(text, "<attention test>");
  return std::move(m.graphs.at(0));
}

// The attention line and the return of a test graph: with `lse`, the log-sum-exp result too.
std::string attention_body(const char* operands, bool causal, bool lse) {
  return fmt::format("  %o{0} = attention({1}) {{causal = {2}{3}}}\n  return %o{0}\n}}\n", lse ? ", %lse" : "", operands,
                     causal ? "true" : "false", lse ? ", lse = true" : "");
}

// q [T, Hq, D] against k, v [T, Hq / G, D]: self-attention of T tokens.
Graph prefill_graph(int64_t hq, int64_t g, int64_t d, bool causal, const char* dtype, bool lse = false) {
  return parse_one(fmt::format("graph @prefill(%q: {0}[T, {1}, {3}], %k: {0}[T, {2}, {3}], %v: {0}[T, {2}, {3}]) {{\n", dtype, hq,
                               hq / g, d) +
                   attention_body("%q, %k, %v", causal, lse));
}

// q [B, T, Hq, D] (T new tokens per sequence) over caches [B, C, Hq / G, D] at positions pos[B].
Graph decode_graph(int64_t t, int64_t hq, int64_t g, int64_t d, bool causal, const char* dtype, bool lse = false) {
  return parse_one(fmt::format("graph @decode(%q: {0}[B, {4}, {1}, {3}], %kc: {0}[B, C, {2}, {3}], %vc: {0}[B, C, {2}, {3}], "
                               "%pos: i32[B]) {{\n",
                               dtype, hq, hq / g, d, t) +
                   attention_body("%q, %kc, %vc, %pos", causal, lse));
}

std::map<ValueId, HostTensor> check(const Graph& g, const Bindings& bind, uint64_t seed, const EmitOptions& emit = {}) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  REQUIRE(plan.groups[0].kind == GroupKind::Attention);
  lj_test::GroupCase c;
  c.graph = &g;
  c.bind = bind;
  c.seed = seed;
  c.emit = emit;
  return lj_test::check_group(ctx, *stream, c, plan.groups[0]);
}

}  // namespace

TEST_CASE("flash prefill matches the reference: T in {1, 7, 64, 127, 1000}, GQA 1/4/8, head_dim 64/128, causal or not",
          "[gpu][attention]") {
  uint64_t seed = 1;
  for (int64_t d : {64, 128})
    for (int64_t g : {1, 4, 8})
      for (bool causal : {true, false})
        for (int64_t t : kLens) {
          const char* dtype = (seed % 3 == 0) ? "f16" : "bf16";
          const bool lse = seed % 2 == 1;  // every other case also stores the log-sum-exp
          INFO("T = " << t << ", G = " << g << ", head_dim " << d << (causal ? ", causal " : ", ") << dtype << (lse ? ", lse" : ""));
          Graph gr = prefill_graph(8, g, d, causal, dtype, lse);
          Bindings b;
          b.set("T", t);
          check(gr, b, ++seed);
        }
}

// The Hopper kernel (attention_wgmma.cuh) where the device is an sm_90 part; nullopt elsewhere (the
// cases below then check nothing and say so).
std::optional<EmitOptions> hopper(int bn = 128, int stages = 2) {
  if (lj_test::gpu().info().cc() != 90) {
    WARN("not an sm_90 device: the wgmma attention kernel is not run");
    return std::nullopt;
  }
  EmitOptions e;
  e.sm = 90;
  e.arch_specific = true;
  e.attention = AttentionConfig::hopper();
  e.attention->bn = bn;
  e.attention->stages = stages;
  return e;
}

TEST_CASE("wgmma flash prefill matches the reference: T in {1, 7, 64, 127, 1000}, GQA 1/4/8/16, head_dim 64/128, causal or not",
          "[gpu][attention]") {
  const std::optional<EmitOptions> e = hopper();
  if (!e) return;
  uint64_t seed = 3000;
  for (int64_t d : {64, 128})
    for (int64_t g : {1, 4, 8, 16})
      for (bool causal : {true, false})
        for (int64_t t : kLens) {
          const char* dtype = (seed % 3 == 0) ? "f16" : "bf16";
          const bool lse = seed % 2 == 1;
          INFO("T = " << t << ", G = " << g << ", head_dim " << d << (causal ? ", causal " : ", ") << dtype << (lse ? ", lse" : ""));
          Graph gr = prefill_graph(g == 16 ? 16 : 8, g, d, causal, dtype, lse);
          Bindings b;
          b.set("T", t);
          check(gr, b, ++seed, *e);
        }
}

TEST_CASE("wgmma flash prefill: 64-key tiles and deeper rings match the reference", "[gpu][attention]") {
  uint64_t seed = 3500;
  for (auto [bn, stages] : {std::pair{64, 2}, std::pair{64, 4}, std::pair{128, 3}}) {
    const std::optional<EmitOptions> e = hopper(bn, stages);
    if (!e) return;
    for (int64_t g : {1, 4})
      for (int64_t t : {7, 127, 1000}) {
        INFO("config " << e->attention->str() << ", T = " << t << ", G = " << g);
        Graph gr = prefill_graph(8, g, 128, true, "bf16", g == 4);
        Bindings b;
        b.set("T", t);
        check(gr, b, ++seed, *e);
      }
  }
}

TEST_CASE("prefill into a cache: stale slots past the new tokens (NaN here) never reach the output", "[gpu][attention]") {
  // B = 3 sequences append 40 tokens each (160 rows per KV head: the prefill kernels) to 300-slot
  // caches at positions 0, 17 and 250; every slot from 295 on holds NaN, so a kernel that let a stale
  // V row into P V (even with P = 0) would poison the output.
  Graph gr = decode_graph(40, 8, 4, 128, true, "bf16");
  Bindings b;
  b.set("B", 3);
  b.set("C", 300);
  lj_test::InputFn input = [](const Graph& g, ValueId v, const Bindings& bind, uint64_t seed) {
    HostTensor t = lj_test::random_input(g, v, bind, seed);
    if (g.value(v).name == "pos") {
      t.data = {0, 17, 250};
    } else if (g.value(v).name == "kc" || g.value(v).name == "vc") {
      const size_t row = 2 * 128;  // [B, C, 2, 128]
      for (size_t i = 0; i < t.data.size(); ++i)
        if (i / row % 300 >= 295) t.data[i] = std::nan("");
    }
    return t;
  };
  std::vector<EmitOptions> variants = {EmitOptions{}};
  if (std::optional<EmitOptions> e = hopper()) variants.push_back(*e);
  for (const EmitOptions& e : variants) {
    const std::string what = e.attention ? e.attention->str() : std::string("mma.sync default");
    INFO(what);
    rt::Context& ctx = lj_test::gpu();
    auto stream = rt::Stream::create(ctx);
    LJ_REQUIRE_OK(stream);
    lj_test::GroupCase c;
    c.graph = &gr;
    c.bind = b;
    c.seed = 4000;
    c.emit = e;
    c.input = input;
    auto out = lj_test::check_group(ctx, *stream, c, plan_fusion(gr).groups.at(0));
    REQUIRE(out.size() == 1);
    for (double x : out.begin()->second.data) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("split-KV decode matches the reference: C in {1, 7, 64, 127, 1000}, B = 3, GQA 1/4/8, head_dim 64/128",
          "[gpu][attention]") {
  uint64_t seed = 500;
  for (int64_t d : {64, 128})
    for (int64_t g : {1, 4, 8})
      for (int64_t c : kLens) {
        const bool causal = (seed % 2) == 0;
        const char* dtype = (seed % 3 == 0) ? "f16" : "bf16";
        const bool lse = seed / 2 % 2 == 0;  // with and without, causal or not
        INFO("C = " << c << ", G = " << g << ", head_dim " << d << (causal ? ", causal " : ", ") << dtype << (lse ? ", lse" : ""));
        Graph gr = decode_graph(1, 8, g, d, causal, dtype, lse);
        Bindings b;
        b.set("B", 3);
        b.set("C", c);
        EmitOptions emit;
        emit.hint = b;  // small hints give the most chunks: every C above 64 keys is split
        check(gr, b, ++seed, emit);
      }
}

// head_dims that are not a tile's: zero-padded to 16, 32, 64 or 128 in shared memory, read and
// stored at their own width (copies of 4, 8 and 16 bytes), the scale 1/sqrt of the real head_dim.
TEST_CASE("head_dim 6, 12, 20, 40, 80 and 96 (padded tiles) match the reference in prefill and decode", "[gpu][attention]") {
  uint64_t seed = 5000;
  for (int64_t d : {6, 12, 20, 40, 80, 96})
    for (int64_t g : {1, 3}) {
      const bool causal = seed % 2 == 0;
      const char* dtype = seed % 3 == 0 ? "f16" : "bf16";
      INFO("head_dim " << d << ", G = " << g << (causal ? ", causal " : ", ") << dtype);
      const bool lse = seed % 2 == 1;  // with and without the log-sum-exp
      Bindings b;
      b.set("T", 131);
      check(prefill_graph(6, g, d, causal, dtype, lse), b, ++seed);
      Bindings bd;
      bd.set("B", 2);
      bd.set("C", 333);
      EmitOptions emit;
      emit.hint = bd;  // split into chunks: the merge runs at the real head_dim too
      check(decode_graph(1, 6, g, d, causal, dtype, !lse), bd, ++seed, emit);
    }
}

TEST_CASE("every decode tile set the tuner tries matches the reference (chunks of whole stages, C not a multiple of them)",
          "[gpu][attention]") {
  Graph gr = decode_graph(1, 32, 4, 128, true, "bf16", true);  // the log-sum-exp of every chunk merge too
  uint64_t seed = 1300;
  int ran = 0;
  for (const AttentionConfig& cfg : decode_attention_candidates()) {
    for (int64_t c : {127, 1000, 4099}) {
      Bindings b;
      b.set("B", 3);
      b.set("C", c);
      EmitOptions emit;
      emit.hint = b;
      emit.attention = cfg;
      INFO("config " << cfg.str() << ", C = " << c);
      try {
        (void)emit_group(gr, plan_fusion(gr).groups[0], emit);
      } catch (const UserError& e) {
        CHECK_THAT(e.what(), Catch::Contains("shared memory"));  // the only refusal: rings too deep for the SM
        break;
      }
      check(gr, b, ++seed, emit);
      ++ran;
    }
  }
  CHECK(ran >= 60);
}

TEST_CASE("decode of two new tokens per sequence (16 rows of 8 query heads) masks the second token's future", "[gpu][attention]") {
  Graph gr = decode_graph(2, 16, 8, 128, true, "bf16");
  for (int64_t c : {2, 7, 127, 1000}) {
    Bindings b;
    b.set("B", 2);
    b.set("C", c);
    check(gr, b, 900 + static_cast<uint64_t>(c));
  }
}

TEST_CASE("decode results agree across split counts within fp32 rounding", "[gpu][attention]") {
  Graph gr = decode_graph(1, 32, 4, 128, true, "bf16");
  Bindings b;
  b.set("B", 2);
  b.set("C", 4000);
  EmitOptions many, few;
  many.hint = b;  // 2 x 8 (sequence, KV head) pairs: 8 warps, chunks of 1024 keys, 4 per sequence
  Bindings big = b;
  big.set("B", 512);  // a large batch needs no splitting: chunks of 4096 keys, one per sequence
  few.hint = big;
  REQUIRE(emit_group(gr, plan_fusion(gr).groups[0], many).source != emit_group(gr, plan_fusion(gr).groups[0], few).source);
  auto a = check(gr, b, 77, many);
  auto c = check(gr, b, 77, few);
  REQUIRE(a.size() == 1);
  const HostTensor& x = a.begin()->second;
  const HostTensor& y = c.begin()->second;
  REQUIRE(x.data.size() == y.data.size());
  // The fp32 sums differ only in order, so the stored bf16 values are equal or one rounding step apart
  // — or, for outputs near zero (means of values in [-1, 1) that cancel), a few steps of a tiny value:
  // the fp32 reordering error of a mean over 4000 keys is far below 1/4096 in absolute terms.
  size_t apart = 0, differ = 0;
  double worst = 0;
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double diff = std::fabs(x.data[i] - y.data[i]);
    if (x.data[i] != y.data[i]) ++differ;
    if (diff > std::max(std::fabs(x.data[i]), std::fabs(y.data[i])) / 128 + 1.0 / 4096) ++apart;
    worst = std::max(worst, diff);
  }
  INFO(differ << " of " << x.data.size() << " outputs differ, by at most " << worst);
  CHECK(apart == 0);
  CHECK(differ * 20 < x.data.size());
}

TEST_CASE("every prefill tile config the benchmark sweeps matches the reference", "[gpu][attention]") {
  uint64_t seed = 2000;
  for (AttentionConfig cfg : {AttentionConfig{128, 1, 64, 2}, AttentionConfig{128, 2, 32, 2}, AttentionConfig{128, 2, 32, 3},
                              AttentionConfig{64, 1, 64, 2}, AttentionConfig{64, 1, 64, 3}, AttentionConfig{64, 2, 64, 2},
                              AttentionConfig{64, 2, 32, 3}, AttentionConfig{128, 1, 32, 3}}) {
    EmitOptions emit;
    emit.attention = cfg;
    for (int64_t g : {4, 8})
      for (int64_t t : {7, 127, 1000}) {
        INFO("config " << cfg.str() << ", T = " << t << ", G = " << g);
        Graph gr = prefill_graph(8, g, g == 4 ? 128 : 64, true, "bf16");
        Bindings b;
        b.set("T", t);
        check(gr, b, ++seed, emit);
      }
  }
}

TEST_CASE("paged decode equals decode over the contiguous cache it pages, bit for bit", "[gpu][attention]") {
  // B=3 sequences, caches of 5 pages x 16 positions, the pages scattered over a 17-page pool.
  const Graph contiguous = parse_one(
      "graph @contig(%q: bf16[B, 1, 8, 128], %kc: bf16[B, 80, 2, 128], %vc: bf16[B, 80, 2, 128], %pos: i32[B]) {\n"
      "  %o = attention(%q, %kc, %vc, %pos) {causal = true}\n  return %o\n}\n");
  const Graph paged = parse_one(
      "graph @paged(%q: bf16[B, 1, 8, 128], %kp: bf16[17, 16, 2, 128], %vp: bf16[17, 16, 2, 128], %pos: i32[B], %bt: i32[B, 5]) {\n"
      "  %o = attention(%q, %kp, %vp, %pos, %bt) {causal = true}\n  return %o\n}\n");
  Bindings b;
  b.set("B", 3);
  const std::vector<int64_t> table = {16, 3, 8, 0, 11, 5, 14, 1, 9, 6, 2, 12, 7, 15, 4};  // [3, 5]
  const std::map<std::string, HostTensor> shared = [&] {
    std::map<std::string, HostTensor> m;
    HostTensor q(DType::BF16, {3, 1, 8, 128}), kc(DType::BF16, {3, 80, 2, 128}), vc(DType::BF16, {3, 80, 2, 128});
    fill_uniform(q, 1);
    fill_uniform(kc, 2);
    fill_uniform(vc, 3);
    HostTensor pos(DType::I32, {3});
    pos.data = {79, 30, 5};
    m["q"] = q;
    m["kc"] = kc;
    m["vc"] = vc;
    m["pos"] = pos;
    return m;
  }();
  auto page = [&](const HostTensor& cache) {  // the contiguous cache scattered into pool pages
    HostTensor pool(DType::BF16, {17, 16, 2, 128});
    fill_uniform(pool, 99, 50.0, 60.0);  // unused pages hold values that would show
    for (int64_t s = 0; s < 3; ++s)
      for (int64_t j = 0; j < 80; ++j)
        for (int64_t i = 0; i < 256; ++i)
          pool.data[static_cast<size_t>((table[static_cast<size_t>(s * 5 + j / 16)] * 16 + j % 16) * 256 + i)] =
              cache.data[static_cast<size_t>((s * 80 + j) * 256 + i)];
    return pool;
  };
  lj_test::InputFn contig_in = [&](const Graph& g, ValueId v, const Bindings&, uint64_t) { return shared.at(g.value(v).name); };
  lj_test::InputFn paged_in = [&](const Graph& g, ValueId v, const Bindings&, uint64_t) {
    const std::string& n = g.value(v).name;
    if (n == "kp") return page(shared.at("kc"));
    if (n == "vp") return page(shared.at("vc"));
    if (n == "bt") {
      HostTensor t(DType::I32, {3, 5});
      for (size_t i = 0; i < table.size(); ++i) t.data[i] = static_cast<double>(table[i]);
      return t;
    }
    return shared.at(n);
  };
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  auto run = [&](const Graph& g, const lj_test::InputFn& in) {
    lj_test::GroupCase c;
    c.graph = &g;
    c.bind = b;
    c.input = in;
    c.emit.hint = b;
    return lj_test::check_group(ctx, *stream, c, plan_fusion(g).groups[0]).begin()->second;
  };
  const HostTensor a = run(contiguous, contig_in);
  const HostTensor p = run(paged, paged_in);
  CHECK(a.data == p.data);
}
