// GPU tier: the matmul kernels (tensor-core GEMM and GEMV) against the CPU reference for odd shapes —
// M, N, K in {1, 7, 127, 129, 1000}, none a multiple of any tile — and for every config the pruner
// accepts for a prefill-sized problem, on shapes that exercise both load paths (cp.async for 16-byte
// aligned rows, element loads otherwise) and every edge mask. Outputs are poisoned before each run.
// INT8 W8A8 ([int8], at the end): i8 products against exact integer sums.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "layerjit/host_tensor.h"
#include "layerjit/text.h"
#include "tests/gpu/group_check.h"

using namespace lj;

namespace {

Graph matmul_graph(int64_t n, int64_t k, const char* dtype, const char* out = nullptr) {
  const std::string attrs = out ? fmt::format(" {{out_dtype = {}}}", out) : "";
  Module m = parse_module(fmt::format("graph @mm_{}x{}(%x: {}[M, {}], %w: param {}[{}, {}]) {{\n"
                                      "  %y = matmul(%x, %w){}\n  return %y\n}}\n",
                                      n, k, dtype, k, dtype, n, k, attrs),
                          "<gemm test>");
  return std::move(m.graphs.at(0));
}

void check(const Graph& g, int64_t m, const EmitOptions& emit, uint64_t seed) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  lj_test::GroupCase c;
  c.graph = &g;
  c.bind.set("M", m);
  c.seed = seed;
  c.emit = emit;
  INFO("M = " << m << ", config " << (emit.matmul ? emit.matmul->str() : "default"));
  lj_test::check_group(ctx, *stream, c, plan.groups[0]);
}

constexpr int64_t kOdd[] = {1, 7, 127, 129, 1000};

// Emission for this GPU's sm_90a target (the Hopper GEMM family available).
EmitOptions hopper_options() {
  EmitOptions e;
  e.sm = 90;
  e.arch_specific = true;
  return e;
}

// The Hopper GEMM configs the pruner accepts on this device (none unless it is an sm_90 GPU).
std::vector<MatmulConfig> hopper_configs() {
  rt::Context& ctx = lj_test::gpu();
  std::vector<MatmulConfig> out;
  if (ctx.info().cc() != 90) return out;
  MatmulProblem p;
  p.m = 4096, p.n = 4096, p.k = 4096, p.sm = 90, p.arch_specific = true, p.tma = true;
  p.max_shared_bytes = ctx.info().max_smem_per_block_optin;
  for (const MatmulConfig& c : matmul_candidates(p))
    if (c.family == MatmulConfig::Family::Wgmma) out.push_back(c);
  // The persistent and ping-pong kernels beyond the tuner's candidates, where their epilogue tiles fit.
  for (int bn : {128, 256})
    for (int stages : {2, 3, 4, 5})
      for (const char* kind : {"persistent", "pingpong", "persistent cluster=2"}) {
        MatmulConfig c = *parse_matmul_config(fmt::format("wgmma bm=128 bn={} stages={} gm=8 {}", bn, stages, kind), nullptr);
        if (reject_reason(c, p).empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
  // Split-K (run where the shape has a k tile for every CTA of a tile).
  // The narrow tiles (candidates up to 512 rows), split and not.
  for (const char* split : {"wgmma bm=128 bn=128 stages=4 gm=8 sk=2", "wgmma bm=128 bn=256 stages=3 gm=8 sk=3",
                            "wgmma bm=128 bn=128 stages=4 gm=8 sk=8", "wgmma bm=128 bn=64 stages=8 gm=8",
                            "wgmma bm=128 bn=64 stages=6 gm=8 sk=2", "wgmma bm=128 bn=96 stages=8 gm=8 sk=2"})
    out.push_back(*parse_matmul_config(split, nullptr));
  // 64-row tiles (one consumer warpgroup): two CTAs per SM (bn=64, 6 stages), one (bn=128), split.
  for (const char* bm64 : {"wgmma bm=64 bn=64 stages=6 gm=8", "wgmma bm=64 bn=128 stages=8 gm=8", "wgmma bm=64 bn=96 stages=8 gm=8 sk=2"})
    out.push_back(*parse_matmul_config(bm64, nullptr));
  // Stream-K (persistent: 3 CTAs here, so shares start and end inside tiles and span several).
  for (const char* sk : {"wgmma bm=128 bn=64 stages=6 gm=8 streamk", "wgmma bm=128 bn=128 stages=4 gm=8 streamk"})
    out.push_back(*parse_matmul_config(sk, nullptr));
  return out;
}

// A persistent config runs on 3 CTAs here, so that each walks many tiles (one per SM would give the
// small test shapes one tile per CTA and leave the tile loop, and ping-pong's turns, untested); in
// clusters of two on 4 (two clusters, each walking several pairs of tiles).
EmitOptions hopper_options(const MatmulConfig& c) {
  EmitOptions e = hopper_options();
  e.matmul = c;
  if (c.persistent) e.sm_count = c.cluster > 1 ? 4 : 3;
  return e;
}

// Split-K needs a k tile for each CTA of a tile (`elem_bytes`: the operands', which size the Hopper
// GEMM's k tile).
bool split_fits(const MatmulConfig& c, int64_t k, int elem_bytes = 2) {
  return c.split_k <= (k + c.k_tile(elem_bytes) - 1) / c.k_tile(elem_bytes);
}

// Split-K configs of the mma.sync family (tuner candidates for up to 512 rows), and a 16-wide k tile
// in a two-stage ring (one mma step per k tile, the shallowest pipeline the kernel allows).
std::vector<MatmulConfig> mma_splits() {
  return {*parse_matmul_config("mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8 sk=2", nullptr),
          *parse_matmul_config("mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8 sk=4", nullptr),
          *parse_matmul_config("mma bm=64 bn=64 bk=32 wm=2 wn=2 stages=3 gm=8 sk=3", nullptr),
          *parse_matmul_config("mma bm=64 bn=64 bk=16 wm=2 wn=2 stages=2 gm=8 sk=2", nullptr)};
}

}  // namespace

TEST_CASE("tensor-core GEMM matches the reference for M, N, K in {1, 7, 127, 129, 1000}", "[gpu][gemm]") {
  EmitOptions emit;  // no size hint: the default for an unknown M is the tensor-core GEMM
  uint64_t seed = 100;
  for (int64_t n : kOdd)
    for (int64_t k : kOdd) {
      Graph g = matmul_graph(n, k, "bf16");
      for (int64_t m : kOdd) check(g, m, emit, ++seed);
    }
}

TEST_CASE("split-K mma.sync GEMMs match the reference for M, N, K in {1, 7, 127, 129, 1000}", "[gpu][gemm]") {
  uint64_t seed = 1700;
  for (const MatmulConfig& c : mma_splits())
    for (int64_t n : kOdd)
      for (int64_t k : kOdd) {
        if (!split_fits(c, k)) continue;
        Graph g = matmul_graph(n, k, "bf16");
        for (int64_t m : kOdd) {
          EmitOptions emit;
          emit.matmul = c;
          check(g, m, emit, ++seed);
        }
      }
}

TEST_CASE("the defaults for 2-32 rows (decode) match the reference", "[gpu][gemm]") {
  // 17-32 rows: few column tiles and K >= N: 16-row tiles split 4 ways along K (K = 1000: 16 k
  // tiles); K < N: a 32-row tile split 4 ways; a wide W (397 tiles of 64 columns): one 64-row tile
  // over all rows. 2-16 rows: a 16-row tile split 4 ways, 2 where K < N (N = 3001: 47 column
  // tiles), unsplit with 3 k tiles.
  // Odd N and M throughout.
  uint64_t seed = 2500;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{129, 1000}, {1001, 1032}, {3001, 1032}, {25400, 136}})
    for (int64_t m : {2, 7, 16, 17, 32}) {
      EmitOptions emit;
      emit.hint.set("M", m);
      const Graph g = matmul_graph(n, k, "bf16");
      const MatmulConfig c = default_matmul_config(matmul_problem(g, plan_fusion(g).groups[0], emit));
      INFO("default " << c.str());
      if (m <= 16)
        CHECK((c.bm == 16 && c.split_k == (n > 25000 ? 1 : n == 3001 ? 2 : 4)));
      else
        CHECK((n > 25000 ? c.bm == 64 && c.split_k == 1 : c.bm == (n == 3001 ? 32 : 16) && c.split_k == 4));
      check(g, m, emit, ++seed);
    }
}

TEST_CASE("GEMV matches the reference for M, N, K in {1, 7, 127, 129, 1000}", "[gpu][gemm]") {
  uint64_t seed = 300;
  for (int64_t m : kOdd) {
    EmitOptions emit;
    emit.matmul = MatmulConfig{};
    emit.matmul->family = MatmulConfig::Family::Gemv;
    for (int64_t n : kOdd)
      for (int64_t k : kOdd) check(matmul_graph(n, k, "bf16"), m, emit, ++seed);
  }
}

// fp8 codes decode two at a time in the GEMV's inner product on sm_89+ (lj_dot_acc), one at a time
// in odd-width packs and tails: odd K gives narrow packs, K = 1000 a tail.
TEST_CASE("fp8 GEMV matches the reference for M, N, K in {1, 7, 127, 129, 1000}", "[gpu][gemm][fp8]") {
  uint64_t seed = 3300;
  for (const char* dtype : {"f8e4m3", "f8e5m2"})
    for (int64_t m : {int64_t{1}, int64_t{7}}) {
      EmitOptions emit;
      emit.matmul = MatmulConfig{};
      emit.matmul->family = MatmulConfig::Family::Gemv;
      for (int64_t n : kOdd)
        for (int64_t k : kOdd) check(matmul_graph(n, k, dtype), m, emit, ++seed);
    }
}

// The tensor-core fp8 GEMV ("gemv mma"): 16-byte chunks of K (K a multiple of 16, not of the 64
// elements a warp step takes, nor of a warp's share), N not a multiple of its 16-row tiles or 8-pair
// tiles, M across the 8-row chunks; then every epilogue it has (row scale + residual, SwiGLU, RoPE
// with cache writes) in e4m3, as the FP8 layer's projections have them.
TEST_CASE("the tensor-core fp8 GEMV matches the reference on odd shapes and fused epilogues", "[gpu][gemm][fp8]") {
  std::vector<MatmulConfig> configs;
  for (const char* c : {"gemv mma u=2 warps=4", "gemv mma u=4 warps=8", "gemv mma u=4 warps=16", "gemv mma stages=2 warps=4",
                        "gemv mma stages=4 warps=4", "gemv mma stages=8 warps=8", "gemv mma stages=4 warps=16",
                        "gemv mma bulk=2 warps=4", "gemv mma bulk=4 warps=8", "gemv mma bulk=3 warps=16"})
    configs.push_back(*parse_matmul_config(c, nullptr));
  // The configs the pruner accepts at K = k: it refuses a staged ring deeper than a warp's share, and
  // more bulk stages than a pass has (K = 4112: five stages of 1 KiB per row, the last of 16 bytes).
  int staged = 0, bulk = 0;
  auto at_k = [&](int64_t k) {
    MatmulProblem p;
    p.m = 1, p.n = 64, p.k = k, p.dtype = DType::F8E4M3, p.sm = 90;
    std::vector<MatmulConfig> out;
    for (const MatmulConfig& c : configs)
      if (reject_reason(c, p).empty()) out.push_back(c);
    return out;
  };
  uint64_t seed = 5100;
  for (const char* dtype : {"f8e4m3", "f8e5m2"})
    for (int64_t n : {7, 129, 1000})
      for (int64_t k : {16, 1008, 4112})
        for (const MatmulConfig& c : at_k(k))
          for (int64_t m : {1, 9}) {
            staged += c.code_stages > 0 && m == 1;
            bulk += c.bulk_stages > 0 && m == 1;
            EmitOptions emit;
            emit.matmul = c;
            check(matmul_graph(n, k, dtype), m, emit, ++seed);
          }
  CHECK(staged == 2 * 3 * (1 + 2 + 4));  // K = 16: stages=2; 1008: 2 and 4 (4 warps); 4112: all four
  CHECK(bulk == 2 * 3 * (1 + 1 + 3));     // K = 16 and 1008 (one stage a pass): bulk=2; 4112: all three
  Module mod = parse_module(R"(
graph @row_scaled(%x: f8e4m3[M, 1008], %w: param f8e4m3[130, 1008], %rs: f32[M], %r: bf16[M, 130]) {
  %y = matmul(%x, %w, %rs)
  %h = add(%r, %y)
  return %h
}
graph @row_scaled_swiglu(%x: f8e4m3[M, 144], %w: param f8e4m3[258, 144], %rs: f32[M]) {
  %gu = matmul(%x, %w, %rs)
  %g, %u = split(%gu) {axis = 1, sizes = [129, 129]}
  %s = silu(%g)
  %a = mul(%s, %u)
  return %a
}
)",
                            "<fp8 gemv epilogues>");
  for (const Graph& g : mod.graphs)
    for (const MatmulConfig& c : at_k(g.value(g.inputs()[0]).type.shape.back().value()))
      for (int64_t m : {1, 7, 17}) {
        EmitOptions emit;
        emit.matmul = c;
        check(g, m, emit, ++seed);
      }
  Module rope = parse_module(R"(
graph @rope_decode(%x: f8e4m3[T, 144], %pos: i32[T], %kc: bf16[T, C, 1, 128], %vc: bf16[T, C, 1, 128], %w: param f8e4m3[512, 144],
                   %rs: f32[T]) {
  %qkv = matmul(%x, %w, %rs)
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 128, 128]}
  %qh = reshape(%qf) {shape = [T, 2, 128]}
  %kh = reshape(%kf) {shape = [T, 1, 128]}
  %vh = reshape(%vf) {shape = [T, 1, 128]}
  %c, %s = rope_table(%pos) {dim = 128, theta = 500000.0}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  %kc2 = kv_cache_write(%kc, %k, %pos)
  %vc2 = kv_cache_write(%vc, %vh, %pos)
  return %q, %kc2, %vc2
}
graph @rope_gptj(%x: f8e4m3[T, 128], %pos: i32[T], %w: param f8e4m3[192, 128]) {
  %qk = matmul(%x, %w)
  %qf, %kf = split(%qk) {axis = 1, sizes = [128, 64]}
  %qh = reshape(%qf) {shape = [T, 2, 64]}
  %kh = reshape(%kf) {shape = [T, 1, 64]}
  %c, %s = rope_table(%pos) {dim = 64}
  %q = rope(%qh, %c, %s) {style = "interleaved"}
  %k = rope(%kh, %c, %s) {style = "interleaved"}
  return %q, %k
}
)",
                             "<fp8 gemv rope>");
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  for (const Graph& g : rope.graphs) {
    const FusionPlan plan = plan_fusion(g);
    REQUIRE(plan.groups.size() == 2);
    const FusionGroup& grp = plan.groups[1];
    REQUIRE(grp.kind == GroupKind::Matmul);
    for (const MatmulConfig& c : at_k(g.value(g.inputs()[0]).type.shape.back().value()))
      for (int64_t rows : {1, 7, 9}) {
        lj_test::GroupCase gc;
        gc.graph = &g;
        gc.bind.set("T", rows);
        gc.bind.set("C", 5);
        gc.seed = ++seed;
        gc.emit.matmul = c;
        INFO(g.name() << ", T = " << rows << ", config " << c.str());
        lj_test::check_group(ctx, *stream, gc, grp);
      }
  }
}

TEST_CASE("every config the pruner accepts computes the same product", "[gpu][gemm]") {
  // A prefill-sized problem gives every large tile, a 16-row one the GEMV variants and thin tiles.
  rt::Context& ctx = lj_test::gpu();
  std::vector<MatmulConfig> configs;
  for (int64_t rows : {4096, 16}) {
    MatmulProblem p;
    p.m = rows, p.n = 4096, p.k = 4096;
    p.max_shared_bytes = ctx.info().max_smem_per_block_optin;
    p.sm = ctx.info().cc();
    p.arch_specific = p.sm == 90, p.tma = true;  // the Hopper configs too, on the aligned shape below
    for (const MatmulConfig& c : matmul_candidates(p))
      if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
  }
  REQUIRE(configs.size() >= 40);
  // (N, K): aligned rows with a K tail and N past a tile edge; unaligned rows (element loads).
  const Graph aligned = matmul_graph(129, 1000, "bf16");
  const Graph unaligned = matmul_graph(127, 129, "bf16");
  uint64_t seed = 500;
  for (const MatmulConfig& cfg : configs) {
    EmitOptions emit;
    emit.matmul = cfg;
    if (cfg.family == MatmulConfig::Family::Wgmma) {
      emit.sm = 90, emit.arch_specific = true;
      check(aligned, 300, emit, ++seed);  // rows TMA cannot load never get this family
      continue;
    }
    check(aligned, 300, emit, ++seed);
    if (split_fits(cfg, 129)) check(unaligned, 129, emit, ++seed);
  }
}

TEST_CASE("tensor-core GEMM handles f16, an f32 output, views and rank-3 inputs", "[gpu][gemm]") {
  EmitOptions emit;
  emit.hint.set("M", 1000);
  check(matmul_graph(129, 1000, "f16"), 257, emit, 700);
  check(matmul_graph(127, 1000, "bf16", "f32"), 257, emit, 701);
  check(matmul_graph(8, 4096, "bf16"), 1000, emit, 702);
  // x as views: a split at an aligned offset (cp.async) and at an odd one (element loads), rank 3.
  Module m = parse_module(R"(
graph @split_aligned(%xx: bf16[M, 1128], %w: param bf16[127, 1000]) {
  %a, %b, %c = split(%xx) {axis = 1, sizes = [120, 1000, 8]}
  %y = matmul(%b, %w)
  return %y
}
graph @split_odd(%xx: bf16[M, 1128], %w: param bf16[64, 1000]) {
  %a, %b, %c = split(%xx) {axis = 1, sizes = [121, 1000, 7]}
  %y = matmul(%b, %w)
  return %y
}
graph @rank3(%x: bf16[M, 3, 64], %w: param bf16[129, 64]) {
  %y = matmul(%x, %w)
  return %y
}
)",
                          "<gemm views>");
  uint64_t seed = 710;
  for (const Graph& g : m.graphs) check(g, 131, emit, ++seed);
}

TEST_CASE("fused epilogues match the reference in both kernel families", "[gpu][gemm]") {
  // Each graph must plan as ONE matmul group (the epilogue fused); N and K are odd where the load
  // paths allow it, SwiGLU halves have 129 and 7 columns (not multiples of the 8-column pairing).
  // @row_scaled*: each row's sums times a factor first (a folded RMSNorm's), before the epilogue.
  Module m = parse_module(R"(
graph @bias_gelu(%x: bf16[M, 1000], %w: param bf16[129, 1000], %b: param bf16[129]) {
  %y = matmul(%x, %w)
  %z = add(%y, %b)
  %a = gelu(%z)
  return %a
}
graph @residual(%x: bf16[M, 127], %w: param bf16[130, 127], %r: bf16[M, 130]) {
  %y = matmul(%x, %w)
  %h = add(%r, %y)
  return %h
}
graph @swiglu(%x: bf16[M, 1000], %w: param bf16[258, 1000]) {
  %gu = matmul(%x, %w)
  %g, %u = split(%gu) {axis = 1, sizes = [129, 129]}
  %s = silu(%g)
  %a = mul(%s, %u)
  return %a
}
graph @swiglu_f32(%x: bf16[M, 64], %w: param bf16[14, 64], %r: f32[M, 7]) {
  %gu = matmul(%x, %w)
  %g, %u = split(%gu) {axis = 1, sizes = [7, 7]}
  %s = silu(%g)
  %a = mul(%u, %s)
  %c = cast(%a) {dtype = f32}
  %o = add(%c, %r)
  return %o
}
graph @silu_act(%x: bf16[M, 1000], %w: param bf16[129, 1000]) {
  %y = matmul(%x, %w)
  %a = silu(%y)
  return %a
}
graph @row_scaled(%x: bf16[M, 1000], %w: param bf16[130, 1000], %rs: f32[M], %r: bf16[M, 130]) {
  %y = matmul(%x, %w, %rs)
  %h = add(%r, %y)
  return %h
}
graph @row_scaled_swiglu(%x: bf16[M, 136], %w: param bf16[258, 136], %rs: f32[M]) {
  %gu = matmul(%x, %w, %rs)
  %g, %u = split(%gu) {axis = 1, sizes = [129, 129]}
  %s = silu(%g)
  %a = mul(%s, %u)
  return %a
}
graph @quantized(%x: bf16[M, 256], %w: param bf16[96, 256], %s: f32[96]) {
  %y = matmul(%x, %w)
  %q = quantize(%y, %s) {dtype = f8e4m3, axis = 1}
  return %q
}
)",
                          "<gemm epilogues>");
  uint64_t seed = 900;
  const std::vector<MatmulConfig> hopper = hopper_configs();
  for (const Graph& g : m.graphs) {
    REQUIRE(plan_fusion(g).groups.size() == 1);
    const bool tma = matmul_problem(g, plan_fusion(g).groups[0], hopper_options()).tma;
    for (int64_t rows : {1, 7, 129, 300}) {
      EmitOptions mma;  // no hint: the tensor-core GEMM
      check(g, rows, mma, ++seed);
      EmitOptions gemv;
      gemv.matmul = MatmulConfig{};
      gemv.matmul->family = MatmulConfig::Family::Gemv;
      check(g, rows, gemv, ++seed);
      for (const MatmulConfig& c : mma_splits()) {  // split-K of the mma.sync family, any rows
        EmitOptions split;
        split.matmul = c;
        if (split_fits(c, matmul_problem(g, plan_fusion(g).groups[0], split).k)) check(g, rows, split, ++seed);
      }
      for (const MatmulConfig& c : tma ? hopper : std::vector<MatmulConfig>{})  // rows TMA can load
        if (split_fits(c, matmul_problem(g, plan_fusion(g).groups[0], hopper_options()).k)) check(g, rows, hopper_options(c), ++seed);
    }
  }
}

TEST_CASE("RoPE in the projection's epilogue matches the reference in every kernel family", "[gpu][gemm][rope]") {
  // Each graph plans as the table's kernel and ONE matmul group that rotates q and k (and writes the
  // caches, or stores v in a buffer of its own; @rope_decode scales its rows first, as a folded norm does). Head dims 64, 128 and 256 put both columns of a pair
  // in one tile (tiles of whole heads) or pair them (tiles narrower than a head: BN / 2 pairs); the
  // tables are random inputs here, so any mix-up of cos, sin or the pairing shows.
  Module m = parse_module(R"(
graph @rope_prefill(%x: bf16[T, 200], %pos: i32[T], %w: param bf16[384, 200]) {
  %qkv = matmul(%x, %w)
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 64, 64]}
  %qh = reshape(%qf) {shape = [T, 4, 64]}
  %kh = reshape(%kf) {shape = [T, 1, 64]}
  %v = reshape(%vf) {shape = [T, 1, 64]}
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  return %q, %k, %v
}
graph @rope_decode(%x: bf16[T, 136], %pos: i32[T], %kc: bf16[T, C, 1, 128], %vc: bf16[T, C, 1, 128], %w: param bf16[512, 136],
                   %rs: f32[T]) {
  %qkv = matmul(%x, %w, %rs)
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 128, 128]}
  %qh = reshape(%qf) {shape = [T, 2, 128]}
  %kh = reshape(%kf) {shape = [T, 1, 128]}
  %vh = reshape(%vf) {shape = [T, 1, 128]}
  %c, %s = rope_table(%pos) {dim = 128, theta = 500000.0}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  %kc2 = kv_cache_write(%kc, %k, %pos)
  %vc2 = kv_cache_write(%vc, %vh, %pos)
  return %q, %kc2, %vc2
}
graph @rope_wide(%x: bf16[T, 64], %pos: i32[T], %w: param bf16[768, 64]) {
  %qkv = matmul(%x, %w)
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 256, 256]}
  %qh = reshape(%qf) {shape = [T, 1, 256]}
  %kh = reshape(%kf) {shape = [T, 1, 256]}
  %v = reshape(%vf) {shape = [T, 1, 256]}
  %c, %s = rope_table(%pos) {dim = 256}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  return %q, %k, %v
}
graph @rope_gptj(%x: bf16[T, 127], %pos: i32[T], %w: param bf16[192, 127]) {
  %qk = matmul(%x, %w)
  %qf, %kf = split(%qk) {axis = 1, sizes = [128, 64]}
  %qh = reshape(%qf) {shape = [T, 2, 64]}
  %kh = reshape(%kf) {shape = [T, 1, 64]}
  %c, %s = rope_table(%pos) {dim = 64}
  %q = rope(%qh, %c, %s) {style = "interleaved"}
  %k = rope(%kh, %c, %s) {style = "interleaved"}
  return %q, %k
}
)",
                          "<rope epilogues>");
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  std::vector<MatmulConfig> configs;
  for (const char* c : {"mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8", "mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8",
                        "mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6 gm=8", "mma bm=64 bn=32 bk=32 wm=2 wn=1 stages=3 gm=8",
                        "gemv mt=4 u=4 warps=8", "gemv mt=2 u=2 warps=3"})
    configs.push_back(*parse_matmul_config(c, nullptr));
  for (const MatmulConfig& c : mma_splits()) configs.push_back(c);
  // Hopper: the default's 128 x 256 tiles, split-K, and the two consumer schedules (each an epilogue
  // path of its own); the full list runs in the test above for plain epilogues.
  std::vector<MatmulConfig> hopper;
  if (ctx.info().cc() == 90)
    for (const char* c : {"wgmma bm=128 bn=256 stages=4 gm=8", "wgmma bm=128 bn=128 stages=4 gm=8 sk=2",
                          "wgmma bm=128 bn=128 stages=4 gm=8 pingpong", "wgmma bm=128 bn=256 stages=3 gm=8 persistent",
                          "wgmma bm=128 bn=128 stages=6 gm=8 pingpong",  // the epilogue a 64-row half at a time
                          "wgmma bm=128 bn=128 stages=4 gm=8 pingpong cluster=2", "wgmma bm=128 bn=128 stages=3 gm=8 persistent cluster=2",
                          "wgmma bm=128 bn=256 stages=4 gm=8 cluster=2",
                          "wgmma bm=128 bn=64 stages=6 gm=8 sk=2",  // 64 columns: half of a head's pairs
                          "wgmma bm=128 bn=64 stages=6 gm=8 streamk", "wgmma bm=64 bn=64 stages=6 gm=8",
                          "wgmma bm=64 bn=128 stages=4 gm=8 sk=2"})
      hopper.push_back(*parse_matmul_config(c, nullptr));
  uint64_t seed = 1700;
  for (const Graph& g : m.graphs) {
    const FusionPlan plan = plan_fusion(g);
    REQUIRE(plan.groups.size() == 2);
    const FusionGroup& grp = plan.groups[1];
    REQUIRE(grp.kind == GroupKind::Matmul);
    REQUIRE(grp.nodes.size() >= 3);  // the matmul and its ropes (and cache writes)
    const int64_t k = matmul_problem(g, grp, EmitOptions{}).k;
    for (int64_t rows : {1, 7, 129, 300}) {
      auto run = [&](const EmitOptions& emit) {
        lj_test::GroupCase c;
        c.graph = &g;
        c.bind.set("T", rows);
        c.bind.set("C", 5);
        c.seed = ++seed;
        c.emit = emit;
        INFO(g.name() << ", T = " << rows << ", config " << (emit.matmul ? emit.matmul->str() : "default"));
        lj_test::check_group(ctx, *stream, c, grp);
      };
      run(EmitOptions{});
      for (const MatmulConfig& c : configs) {
        EmitOptions e;
        e.matmul = c;
        if (reject_reason(c, matmul_problem(g, grp, e)).empty() && split_fits(c, k)) run(e);
      }
      if (matmul_problem(g, grp, hopper_options()).tma)
        for (const MatmulConfig& c : hopper)
          if (reject_reason(c, matmul_problem(g, grp, hopper_options(c))).empty() && split_fits(c, k)) run(hopper_options(c));
    }
  }
}

TEST_CASE("the Hopper GEMM (TMA + wgmma) matches the reference on odd shapes", "[gpu][gemm][wgmma]") {
  const std::vector<MatmulConfig> configs = hopper_configs();
  if (configs.empty()) {
    WARN("skipped: the wgmma GEMM needs an sm_90 GPU");
    return;
  }
  // TMA needs 16-byte row strides (K % 8 == 0 for bf16); N, M and K tails are zero-filled by TMA.
  uint64_t seed = 1200;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{129, 1000}, {7, 64}, {1000, 136}, {300, 8}, {520, 264}})
    for (int64_t m : {1, 7, 127, 129, 1000})
      for (const MatmulConfig& c : configs)
        if (split_fits(c, k)) check(matmul_graph(n, k, "bf16"), m, hopper_options(c), ++seed);
  EmitOptions h = hopper_options();  // f16 and an f32 output through the default Hopper config
  check(matmul_graph(129, 1000, "f16"), 257, h, ++seed);
  check(matmul_graph(127, 1000, "bf16", "f32"), 257, h, ++seed);
}

TEST_CASE("the Hopper fp8 GEMM matches the reference with per-token, per-channel and per-tensor scales", "[gpu][gemm][wgmma][fp8]") {
  const std::vector<MatmulConfig> configs = hopper_configs();
  if (configs.empty()) {
    WARN("skipped: the wgmma GEMM needs an sm_90 GPU");
    return;
  }
  // fp8 rows need K % 16 == 0 for TMA's 16-byte row strides; k tiles are 128 elements, so none of
  // these K is a multiple of one, and N, M tails are zero-filled as for bf16.
  // Every Hopper config on two shapes, the default on the others and for e5m2.
  uint64_t seed = 2600;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{129, 1008}, {7, 144}, {1000, 272}, {300, 16}})
    for (int64_t m : {1, 7, 129, 1000}) {
      if (n == 129 || n == 1000) {
        for (const MatmulConfig& c : configs)
          if (split_fits(c, k, 1)) check(matmul_graph(n, k, "f8e4m3"), m, hopper_options(c), ++seed);
      } else {
        check(matmul_graph(n, k, "f8e4m3"), m, hopper_options(), ++seed);
      }
      check(matmul_graph(n, k, "f8e5m2"), m, hopper_options(), ++seed);
    }
  // The scales of an fp8 GEMM as the IR spells them: a per-token row scale (matmul's third operand,
  // what a per-row dynamic quantize computes), a per-channel (or per-tensor) weight scale multiplied
  // into the f32 sums in the epilogue, one rounding to bf16 at the end; SwiGLU on fp8 products; an
  // f32 output (the accumulation's own error, see matmul_close).
  Module mod = parse_module(R"(
graph @per_token_channel(%x: f8e4m3[M, 1008], %w: param f8e4m3[129, 1008], %xs: f32[M], %ws: param f32[129]) {
  %acc = matmul(%x, %w, %xs) {out_dtype = f32}
  %y = mul(%acc, %ws)
  %o = cast(%y) {dtype = bf16}
  return %o
}
graph @per_tensor_f32(%x: f8e5m2[M, 272], %w: param f8e5m2[300, 272], %s: f32[]) {
  %acc = matmul(%x, %w) {out_dtype = f32}
  %y = mul(%acc, %s)
  return %y
}
graph @f32_sums(%x: f8e4m3[M, 4096], %w: param f8e4m3[136, 4096]) {
  %acc = matmul(%x, %w) {out_dtype = f32}
  return %acc
}
graph @swiglu_fp8(%x: f8e4m3[M, 144], %w: param f8e4m3[258, 144], %xs: f32[M]) {
  %gu = matmul(%x, %w, %xs)
  %g, %u = split(%gu) {axis = 1, sizes = [129, 129]}
  %s = silu(%g)
  %a = mul(%s, %u)
  return %a
}
)",
                            "<fp8 gemm>");
  // The default and one config of each kind of kernel (split-K, persistent, ping-pong) where it fits.
  std::vector<MatmulConfig> kinds{*parse_matmul_config("wgmma bm=128 bn=256 stages=4 gm=8", nullptr),
                                  *parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 sk=2", nullptr),
                                  *parse_matmul_config("wgmma bm=128 bn=128 stages=3 gm=8 persistent", nullptr),
                                  *parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 pingpong", nullptr),
                                  *parse_matmul_config("wgmma bm=128 bn=128 stages=6 gm=8 pingpong", nullptr),  // staged by halves
                                  *parse_matmul_config("wgmma bm=64 bn=64 stages=6 gm=8", nullptr)};
  for (const Graph& g : mod.graphs) {
    const FusionPlan plan = plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    const FusionGroup& grp = plan.groups[0];
    const int64_t k = matmul_problem(g, grp, hopper_options()).k;
    for (int64_t rows : {1, 7, 129, 300}) {
      check(g, rows, hopper_options(), ++seed);
      for (const MatmulConfig& c : kinds)
        if (reject_reason(c, matmul_problem(g, grp, hopper_options(c))).empty() && split_fits(c, k, 1))
          check(g, rows, hopper_options(c), ++seed);
      EmitOptions gemv;  // the decode family (M = 1's default) on the same graphs
      gemv.matmul = MatmulConfig{};
      gemv.matmul->family = MatmulConfig::Family::Gemv;
      check(g, rows, gemv, ++seed);
    }
  }
}

// ---- INT8 W8A8: i8 x and W, s32 sums returned as f32 ----------------------------------------------
namespace {

// i8 codes uniform over [-127, 127] (what a per-token quantize writes; `positive`: 64..127, so that
// sums pass 2^24), never all zero; scales positive, 0.25/127 .. 1/127 (the amax / 127 of rows whose
// amax is 0.25 .. 1: outputs of order 1, as a real layer's). Each operand is kept, by name, for the
// exact check.
struct W8a8Inputs {
  bool positive = false;
  std::map<std::string, HostTensor> by_name;

  HostTensor make(const Graph& g, ValueId v, const Bindings& b, uint64_t seed) {
    const ValueInfo& info = g.value(v);
    HostTensor t(info.type.dtype, resolve(info.type.shape, b));
    if (t.dtype == DType::I8) {
      fill_uniform(t, seed, positive ? 63.5 : -127.49, 127.49);
      if (std::all_of(t.data.begin(), t.data.end(), [](double c) { return c == 0; })) t.data[0] = 127;
    } else {
      REQUIRE(t.dtype == DType::F32);
      fill_uniform(t, seed, 0.25 / 127, 1.0 / 127);
    }
    by_name[info.name] = t;
    return t;
  }
};

// %x: i8[M, k] times %w: i8[n, k]; `scaled`: times the token's scale (row_scale) and the per-channel
// weight scale, rounded once to bf16 (the W8A8 projection); else the f32 sums themselves.
Graph w8a8_graph(int64_t n, int64_t k, bool scaled) {
  const std::string text =
      scaled ? fmt::format("graph @w8_{}x{}(%x: i8[M, {}], %w: param i8[{}, {}], %rs: f32[M], %ws: param f32[{}]) {{\n"
                           "  %acc = matmul(%x, %w, %rs) {{out_dtype = f32}}\n  %y = mul(%acc, %ws)\n"
                           "  %o = cast(%y) {{dtype = bf16}}\n  return %o\n}}\n",
                           n, k, k, n, k, n)
             : fmt::format("graph @w8_sums_{}x{}(%x: i8[M, {}], %w: param i8[{}, {}]) {{\n"
                           "  %acc = matmul(%x, %w) {{out_dtype = f32}}\n  return %acc\n}}\n",
                           n, k, k, n, k);
  Module m = parse_module(text, "<w8a8 gemm>");
  return std::move(m.graphs.at(0));
}

// Against the exact product: integer sums (int64), times the scales in double. The tensor cores sum
// in s32, exactly, and the GEMV's f32 partial sums are integers below 2^24 while K 127^2 < 2^24 (K <=
// 1040); each sum is then converted to f32 once. So a bf16 output is the exact value after at most
// three f32 roundings (the sum, each scale) and one bf16 rounding: |error| <= |want| (2^-8 + 2^-21);
// an f32 sum is exact below 2^24, else one f32 rounding away (an f32 accumulator would be many).
// Split-K and stream-K add `partials` f32 partial sums of a tile (each exact in s32, rounded to f32
// once, added in f32): past 2^24 up to that many roundings (seen on the H200, twenty-sixth
// session: sk=4 at K = 4096 was 1.8 roundings off, sk=2 1.4).
// check_group's own bound (a rounding step times sqrt(K), for float products) is far looser.
void check_exact(const W8a8Inputs& in, const HostTensor& got, bool scaled, int64_t partials) {
  const HostTensor& x = in.by_name.at("x");
  const HostTensor& w = in.by_name.at("w");
  const int64_t m_rows = x.dim(0), k = x.dim(1), n_cols = w.dim(0);
  for (const HostTensor* t : {&x, &w}) {  // never a zero operand, and the whole range where it is large
    CHECK(std::any_of(t->data.begin(), t->data.end(), [](double c) { return c != 0; }));
    if (t->numel() >= 4096 && !in.positive) {
      CHECK(*std::min_element(t->data.begin(), t->data.end()) == -127);
      CHECK(*std::max_element(t->data.begin(), t->data.end()) == 127);
    }
  }
  std::vector<int32_t> xi(x.data.begin(), x.data.end()), wi(w.data.begin(), w.data.end());
  int64_t bad = 0;
  double worst = 0;
  std::string first;
  for (int64_t m = 0; m < m_rows; ++m)
    for (int64_t n = 0; n < n_cols; ++n) {
      int64_t sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += int64_t{xi[static_cast<size_t>(m * k + i)]} * wi[static_cast<size_t>(n * k + i)];
      double want = static_cast<double>(sum), tol = 0;
      if (scaled) {
        want *= in.by_name.at("rs").data[static_cast<size_t>(m)] * in.by_name.at("ws").data[static_cast<size_t>(n)];
        tol = std::fabs(want) * (std::ldexp(1.0, -8) + std::ldexp(1.0, -21));
      } else if (std::fabs(want) >= std::ldexp(1.0, 24)) {
        tol = std::fabs(want) * std::ldexp(1.0, -24) * static_cast<double>(partials);
      }
      const double err = std::fabs(got.data[static_cast<size_t>(m * n_cols + n)] - want);
      worst = std::max(worst, tol > 0 ? err / tol : err);
      if (err > tol && bad++ == 0)
        first = fmt::format("row {}, column {}: got {}, want {}", m, n, got.data[static_cast<size_t>(m * n_cols + n)], want);
    }
  INFO("M = " << m_rows << ", N = " << n_cols << ", K = " << k << ": worst |error| / bound " << worst << "; first bad: " << first);
  CHECK(bad == 0);
}

// One group, poisoned outputs, check_group's bound, then the exact one.
void check_w8a8(const Graph& g, int64_t m, const EmitOptions& emit, uint64_t seed, bool positive = false) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  W8a8Inputs in;
  in.positive = positive;
  lj_test::GroupCase c;
  c.graph = &g;
  c.bind.set("M", m);
  c.seed = seed;
  c.emit = emit;
  c.input = [&in](const Graph& gr, ValueId v, const Bindings& b, uint64_t s) { return in.make(gr, v, b, s); };
  INFO(g.name() << ", M = " << m << ", config " << (emit.matmul ? emit.matmul->str() : "default"));
  const auto stored = lj_test::check_group(ctx, *stream, c, plan.groups[0]);
  REQUIRE(stored.size() == 1);
  // The f32 partial sums a tile adds (the config the kernel ran: given, or the hint's default).
  const MatmulConfig cfg = emit.matmul ? *emit.matmul : default_matmul_config(matmul_problem(g, plan.groups[0], emit));
  const int64_t k = g.value(g.node(plan.groups[0].nodes.at(0)).operands.at(0)).type.shape.back().value();
  const int64_t kt = cfg.k_tile(1);
  const int64_t partials = cfg.split_k > 1 ? cfg.split_k : cfg.stream_k ? (k + kt - 1) / kt : 1;
  check_exact(in, stored.begin()->second, g.value(g.outputs().at(0)).type.dtype == DType::BF16, partials);
}

// K multiples of 16 (rows 16-byte aligned: cp.async, TMA) that are not of 32 or 128 (a partial
// m16n8k32 step, a partial k tile), and K that are not (element loads).
constexpr int64_t kOddK8[] = {1, 7, 127, 129, 1000, 16, 1008};

EmitOptions hinted(EmitOptions e, int64_t m) {
  e.hint.set("M", m);
  return e;
}

}  // namespace

TEST_CASE("i8 GEMM defaults (GEMV, mma.sync m16n8k32 s8) match the exact sums for M, N, K in {1, 7, 127, 129, 1000}", "[gpu][gemm][int8]") {
  // The default for each M as the executable chooses it: the GEMV at 1, 16-row tiles (split along K
  // where it has k tiles) at 7, 64 x 64 at 127, 128 x 128 above; per-token and per-channel scales.
  uint64_t seed = 7100;
  for (int64_t n : kOdd)
    for (int64_t k : kOddK8) {
      const Graph g = w8a8_graph(n, k, true);
      for (int64_t m : kOdd) check_w8a8(g, m, hinted(EmitOptions{}, m), ++seed);
    }
}

TEST_CASE("i8 Hopper GEMM defaults (k32 s8 wgmma) match the exact sums on odd shapes", "[gpu][gemm][wgmma][int8]") {
  if (lj_test::gpu().info().cc() != 90) {
    WARN("skipped: the wgmma GEMM needs an sm_90 GPU");
    return;
  }
  // sm_90a's defaults: the Hopper GEMM above 64 rows where TMA loads the rows (K % 16 == 0), else
  // as on sm_90; K = 16 is one k tile of 128 mostly zero-filled by TMA.
  uint64_t seed = 7600;
  for (int64_t n : kOdd)
    for (int64_t k : {int64_t{16}, int64_t{144}, int64_t{1008}, int64_t{1000}}) {
      const Graph g = w8a8_graph(n, k, true);
      for (int64_t m : kOdd) check_w8a8(g, m, hinted(hopper_options(), m), ++seed);
    }
}

TEST_CASE("every i8 config the pruner accepts computes the exact product", "[gpu][gemm][int8]") {
  // Each load path's own candidate list (as the tuner would try them: the union over a 16-row, a
  // 300-row and a prefill-sized bucket, so GEMV, thin, split and large tiles), run at odd M.
  rt::Context& ctx = lj_test::gpu();
  uint64_t seed = 8100;
  int runs = 0;
  for (const auto& [n, k, rows] : {std::tuple<int64_t, int64_t, int64_t>{129, 1008, 300}, {127, 129, 129}}) {
    const Graph g = w8a8_graph(n, k, true);
    const FusionGroup grp = plan_fusion(g).groups.at(0);
    std::vector<EmitOptions> configs;
    for (int64_t hint : {16, 300, 4096}) {
      EmitOptions e = hinted(ctx.info().cc() == 90 ? hopper_options() : EmitOptions{}, hint);
      e.sm = ctx.info().cc();
      e.max_shared_bytes = ctx.info().max_smem_per_block_optin;
      for (const MatmulConfig& c : matmul_candidates(matmul_problem(g, grp, e))) {
        if (std::any_of(configs.begin(), configs.end(), [&](const EmitOptions& o) { return *o.matmul == c; })) continue;
        EmitOptions with = e;
        with.matmul = c;
        if (c.persistent) with.sm_count = c.cluster > 1 ? 4 : 3;  // each CTA (or cluster) walks several tiles
        configs.push_back(with);
      }
    }
    INFO(n << " x " << k);
    // GEMV, mma.sync and wgmma configs; no wgmma for K = 129 (its rows are not 16-byte aligned):
    // 75 there on an H200 (twenty-sixth session), at least 80 at K = 1008.
    CHECK(configs.size() >= (k % 16 == 0 ? 80u : 70u));
    for (const EmitOptions& e : configs) {
      check_w8a8(g, rows, e, ++seed);
      ++runs;
    }
  }
  CHECK(runs >= 160);
}

TEST_CASE("i8 GEMM f32 sums: exact in s32, one rounding to f32 past 2^24", "[gpu][gemm][int8]") {
  // Codes 64..127 in x and W: sums of 3.5e7 (K = 4096) to 1.2e8 (K = 14336), where f32 accumulation
  // would be off by many rounding steps; the tensor-core families at 7 and 300 rows.
  rt::Context& ctx = lj_test::gpu();
  std::vector<EmitOptions> families{EmitOptions{}};
  families.back().matmul = parse_matmul_config("mma bm=128 bn=128 bk=64 wm=2 wn=2 stages=4 gm=8", nullptr);
  families.push_back(EmitOptions{});
  families.back().matmul = parse_matmul_config("mma bm=16 bn=64 bk=128 wm=1 wn=2 stages=6 gm=8 sk=4", nullptr);
  if (ctx.info().cc() == 90)
    for (const char* c : {"wgmma bm=128 bn=256 stages=4 gm=8", "wgmma bm=128 bn=128 stages=4 gm=8 sk=2", "wgmma bm=64 bn=128 stages=8 gm=8"}) {
      families.push_back(hopper_options());
      families.back().matmul = parse_matmul_config(c, nullptr);
    }
  uint64_t seed = 8800;
  for (int64_t k : {1008, 4096, 14336}) {
    const Graph g = w8a8_graph(129, k, false);
    for (const EmitOptions& e : families)
      for (int64_t m : {7, 300}) check_w8a8(g, m, e, ++seed, true);
  }
}
