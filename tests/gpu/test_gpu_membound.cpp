// GPU tier: every kernel layerjit generates (elementwise, row reductions, RoPE + KV write, and the
// matmul groups: GEMV at a few rows, tensor-core GEMM above), fused and unfused, against the CPU reference of the nodes it
// implements. Each group's inputs are fresh random values (never zeros), outputs are poisoned first,
// shapes include row lengths that no vector width divides (4095, 4097, 7, 1) and views at odd
// offsets; matmuls run over (N, K) from (1, 7) to (129, 4095) with M in {1, 7, 129}.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "compiler/fusion/legality.h"
#include "layerjit/reference.h"
#include "tests/codegen/codegen_graphs.h"
#include "tests/gpu/group_check.h"

using namespace lj;

namespace {

// `sized`: the fused plan is made for the bound sizes, as an executable's is (the one-row and
// weight prologues join their matmuls where the sizes allow).
void check_graph(const Graph& g, Bindings bind, uint64_t seed, bool exact = false,
                 std::function<HostTensor(const Graph&, ValueId, const Bindings&, uint64_t)> input = {}, bool sized = false,
                 bool packed = false) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  int run = 0;
  for (bool fuse : {true, false}) {
    FusionOptions fo{fuse};
    if (fuse && sized) fo.sizes = bind;
    fo.packed_weight_gemms = packed;
    FusionPlan plan = plan_fusion(g, fo);
    for (const FusionGroup& grp : plan.groups) {
      if (!has_emitter(grp.kind)) continue;
      // The Llama-3-8B weights (up to 28672 x 4096) are too large for the CPU reference: random fp64
      // host copies of each (~1 GiB for gate_up) and a K * N * M fp64 matmul per group. Matmul kernels
      // are checked on the small Llama layer and the odd-shaped @mm_* graphs instead, which use the
      // same emitter and cover every tail.
      if (grp.kind == GroupKind::Matmul && g.name().rfind("llama3_8b", 0) == 0) continue;
      lj_test::GroupCase c;
      c.graph = &g;
      c.bind = bind;
      c.seed = seed;
      c.exact = exact;
      c.input = input;
      c.emit.hint = bind;  // the bound sizes pick each matmul's kernel (GEMV for a few rows, else the GEMM)
      lj_test::check_group(ctx, *stream, c, grp);
      ++run;
    }
  }
  CHECK(run > 0);
}

Bindings binds(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  Bindings b;
  for (const auto& [k, v] : kv) b.set(k, v);
  return b;
}

}  // namespace

TEST_CASE("llama 8B prefill memory-bound kernels match the reference (T=5)", "[gpu][membound]") {
  check_graph(llama_prefill(LlamaConfig::llama3_8b()), binds({{"T", 5}}), 1);
}

TEST_CASE("llama 8B decode memory-bound kernels match the reference (B=3, C=37)", "[gpu][membound]") {
  check_graph(llama_decode(LlamaConfig::llama3_8b()), binds({{"B", 3}, {"C", 37}}), 2);
}

TEST_CASE("small llama prefill and decode kernels match the reference", "[gpu][membound]") {
  check_graph(llama_prefill(LlamaConfig::small()), binds({{"T", 33}}), 3);
  check_graph(llama_decode(LlamaConfig::small()), binds({{"B", 2}, {"C", 9}}), 4);
}

TEST_CASE("odd-shaped graphs match the reference for T in {1, 7, 129}", "[gpu][membound]") {
  for (const Graph& g : lj_test::codegen_graphs()) {
    if (g.name().rfind("llama", 0) == 0 || g.name().rfind("fam_", 0) == 0) continue;
    for (int64_t t : {1, 7, 129}) {
      Bindings b = binds({{"T", t}});
      if (g.name() == "dotted.names") b.set("T.len", t);  // a symbol with '.' (s_T_len in the kernel)
      check_graph(g, b, static_cast<uint64_t>(10 + t));
    }
  }
}

/// 4-bit weights at decode sizes: the tensor-core GEMV reads the codes and dequantizes them in
/// registers (the planner's weight prologue); odd N, K multiples of 32, every code and zero-point
/// layout, packed 16-bit and f32 dequantization, SwiGLU, residuals, and the quantized Llama decode
/// layers' projections with RoPE and cache writes in the epilogue. The unfused plan dequantizes first.
TEST_CASE("4-bit weight prologues match the reference at decode sizes", "[gpu][membound][int4]") {
  for (const Graph& g : lj_test::weight_prologue_graphs())
    for (int64_t rows : {1, 7, 16}) {
      INFO(g.name() << " at " << rows << " rows");
      const std::vector<std::string> syms = g.symbols();
      const bool decode = std::find(syms.begin(), syms.end(), "B") != syms.end();  // the Llama layers: B sequences over C
      check_graph(g, decode ? binds({{"B", rows}, {"C", 40}}) : binds({{"T", rows}}), static_cast<uint64_t>(60 + rows), false, {}, true);
    }
}

/// 4-bit weights kept packed at more rows (FusionOptions::packed_weight_gemms): the GEMMs dequantize
/// W's tiles into shared memory (gemm_q4.cuh), the
/// mma.sync one at 17-64 rows (and everywhere on sm_80), the Hopper one above; row counts that no
/// tile divides, split-K, and the Llama layers' projections with RoPE, SwiGLU and residual epilogues.
TEST_CASE("4-bit weight prologues match the reference at prefill sizes", "[gpu][membound][int4]") {
  for (const Graph& g : lj_test::weight_prologue_graphs())
    for (int64_t rows : {17, 33, 129, 300}) {
      INFO(g.name() << " at " << rows << " rows");
      const std::vector<std::string> syms = g.symbols();
      const bool decode = std::find(syms.begin(), syms.end(), "B") != syms.end();
      check_graph(g, decode ? binds({{"B", rows}, {"C", 40}}) : binds({{"T", rows}}), static_cast<uint64_t>(80 + rows), false, {}, true, true);
    }
}

namespace {

/// Every config the tuner may pick for a 4-bit matmul on `graphs` at each of `rows` (`layer`: the
/// quantized Llama decode layers, B sequences over 40 cached tokens, their 256 x 128 tiles only),
/// for this device's architecture (on Hopper the wgmma GEMM's configs at 200 rows too). Returns the
/// number of kernels checked.
int check_q4_candidates(const std::vector<const Graph*>& graphs, const std::vector<int64_t>& rows_list, bool layer) {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  int checked = 0;
  for (const Graph* g : graphs)
    for (int64_t rows : rows_list) {
      FusionOptions fo;
      fo.packed_weight_gemms = true;  // the GEMMs at 9 and 200 rows
      fo.sizes = layer ? binds({{"B", rows}, {"C", 40}}) : binds({{"T", rows}});
      const FusionPlan plan = plan_fusion(*g, fo);
      for (const FusionGroup& grp : plan.groups) {
        if (grp.kind != GroupKind::Matmul || grp.matmul.dequant < 0) continue;
        lj_test::GroupCase c;
        c.graph = g;
        c.bind = fo.sizes;
        c.seed = static_cast<uint64_t>(300 + rows);
        c.emit.hint = fo.sizes;
        c.emit.sm = ctx.info().cc();
        c.emit.arch_specific = c.emit.sm == 90;  // the Hopper GEMM's candidates where it runs
        c.emit.max_shared_bytes = ctx.info().max_smem_per_block_optin;
        for (const MatmulConfig& cfg : matmul_candidates(matmul_problem(*g, grp, c.emit))) {
          if (layer && cfg.bm != 256) continue;
          INFO(g->name() << " at " << rows << " rows, " << cfg.str());
          c.emit.matmul = cfg;
          c.emit.sm_count = cfg.persistent ? 3 : 132;  // a persistent CTA walks several tiles (ping-pong: both warpgroups')
          lj_test::check_group(ctx, *stream, c, grp);
          ++checked;
        }
      }
    }
  return checked;
}

std::vector<const Graph*> q4_graphs(bool layers) {
  static const std::vector<Graph> all = lj_test::weight_prologue_graphs();
  std::vector<const Graph*> out;
  for (const Graph& g : all)
    if ((g.name().rfind("q4_llama", 0) == 0) == layers) out.push_back(&g);
  return out;
}

}  // namespace

/// At one row the GEMV's configs (k steps in flight, warps per CTA: shares of K that are whole
/// batches, EVEN, or not; groups of 32 to whole rows; chunks of x rows past M), at 9 rows the GEMV's
/// and the mma.sync GEMM's tiles.
TEST_CASE("every 4-bit GEMV config the tuner tries matches the reference at 1 and 9 rows", "[gpu][membound][int4]") {
  const int checked = check_q4_candidates(q4_graphs(false), {1, 9}, false);
  CHECK(checked >= 7 * 2 * 6);  // u=1 and u=2 with 4, 8 and 16 warps on every graph, u=4 where K allows
}

/// At 200 rows the GEMMs' configs (the Hopper one's on sm_90a: 64-, 128- and 256-row tiles,
/// ping-pong over several tiles a CTA, split-K, the tile's group constants staged in shared memory
/// or not, W in registers; 170 kernels with the layers' below before `wreg`, 88 on sm_80, counted
/// 2026-12-07).
TEST_CASE("every 4-bit GEMV config the tuner tries matches the reference at 200 rows", "[gpu][membound][int4]") {
  const int checked = check_q4_candidates(q4_graphs(false), {200}, false);
  CHECK(checked >= 7 * 8);
}

/// The quantized Llama layers' projections in 256 x 128 tiles at 200 rows (the default at M = 4096,
/// where the case above does not reach: RoPE with cache writes, SwiGLU and residual epilogues over a
/// consumer warpgroup's two m64 halves). Hopper only.
TEST_CASE("the quantized Llama layers' projections in 256-row tiles match the reference", "[gpu][membound][int4]") {
  if (lj_test::gpu().info().cc() != 90) {
    WARN("skipped: the 256-row tiles are the Hopper GEMM's");
    return;
  }
  const int checked = check_q4_candidates(q4_graphs(true), {200}, true);
  CHECK(checked >= 2 * 4 * 2);  // 3 and 4 stages for qkv, o, gate/up and down of both layers
}

/// With norm prologues (opt-in: FusionOptions::norm_prologues) each rms_norm before a 4-bit GEMV at
/// one row joins it (x times the norm's weight on load, x's squares on the tensor cores, the row's
/// factor on the sums): every config the tuner may pick for those groups, on q4_norm (K = 1344, the
/// last k step partly past K, groups of 32) and the quantized decode layers' QKV and gate/up (K =
/// 128, one k step: most warps have none), against the kernel's definition (group_check.cpp).
TEST_CASE("every 4-bit GEMV config the tuner tries with the rms_norm folded in matches the reference", "[gpu][membound][int4]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  int checked = 0, groups = 0;
  for (const Graph& g : lj_test::weight_prologue_graphs()) {
    FusionOptions fo;
    fo.norm_prologues = true;
    fo.sizes = binds({{"T", 1}, {"B", 1}, {"C", 40}});
    const FusionPlan plan = plan_fusion(g, fo);
    for (const FusionGroup& grp : plan.groups) {
      if (grp.matmul.x_norm < 0) continue;
      ++groups;
      lj_test::GroupCase c;
      c.graph = &g;
      c.bind = fo.sizes;
      c.seed = 500 + static_cast<uint64_t>(grp.id);
      c.emit.hint = fo.sizes;
      for (const MatmulConfig& cfg : matmul_candidates(matmul_problem(g, grp, c.emit))) {
        INFO(g.name() << " group " << grp.id << ", " << cfg.str());
        c.emit.matmul = cfg;
        lj_test::check_group(ctx, *stream, c, grp);
        ++checked;
      }
    }
  }
  CHECK(groups == 5);  // q4_norm, and QKV and gate/up of the two layers
  CHECK(checked >= 5 * 6);  // u = 1 and 2 with 4, 8 and 16 warps at least
}

/// The model families' layers, every kernel against the reference: prefill past Mistral's window,
/// decode of two sequences at different positions.
TEST_CASE("the model families' layer kernels match the reference (Llama-3.1 RoPE, window, QKV bias, q/k norm)", "[gpu][membound]") {
  uint64_t seed = 40;
  for (const LlamaConfig& c : lj_test::family_configs()) {
    INFO(c.name);
    check_graph(llama_prefill(c), binds({{"T", 9}}), ++seed);
    check_graph(llama_prefill(c), binds({{"T", 130}}), ++seed);
    check_graph(llama_decode(c), binds({{"B", 2}, {"C", 11}}), ++seed);
    check_graph(llama_decode(c), binds({{"B", 3}, {"C", 700}}), ++seed);
  }
}

TEST_CASE("casts to every narrow format round exactly as the reference", "[gpu][membound]") {
  // Magnitudes from 2^-22 to 2^20 with both signs: fp8 subnormals, normals and saturation (448,
  // 57344), f16 subnormals and overflow, i8 saturation; every value a float, so the kernel's
  // conversion is the only rounding and must match the reference's bit for bit.
  Module m = parse_module(R"(
graph @casts(%x: f32[T, 96]) {
  %a = cast(%x) {dtype = f8e4m3}
  %b = cast(%x) {dtype = f8e5m2}
  %c = cast(%x) {dtype = bf16}
  %d = cast(%x) {dtype = f16}
  %e = cast(%x) {dtype = i8}
  return %a, %b, %c, %d, %e
}
)", "casts");
  auto spread = [](const Graph& g, ValueId v, const Bindings& b, uint64_t seed) {
    HostTensor t(g.value(v).type.dtype, resolve(g.value(v).type.shape, b));
    HostTensor u(DType::F32, t.shape), e(DType::F32, t.shape);
    fill_uniform(u, seed, 1.0, 2.0);
    fill_uniform(e, seed + 7, -22.0, 21.0);
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = round_to(DType::F32, (i % 2 ? -1.0 : 1.0) * u.data[i] * std::ldexp(1.0, static_cast<int>(std::floor(e.data[i]))));
    return t;
  };
  check_graph(m.graphs[0], binds({{"T", 77}}), 99, /*exact=*/true, spread);
}

TEST_CASE("dynamic per-row quantization matches the reference bit for bit on odd rows", "[gpu][membound]") {
  // Rows of 4095, 7 and 1 elements, fused (with the residual add as prologue) and unfused. Every
  // input value is exact in its dtype and the add of two bf16 values is exact in f32, so the amax,
  // the scale (an f32 division) and every code must equal the reference's. Row 0 is all zeros
  // (scale 1, codes 0); row 1 is scaled by 2^-120 (a subnormal f32 scale); row 2 holds values
  // near the smallest subnormal of the row's dtype (for f32, 2^-149 / 127 underflows: scale 1).
  Module m = parse_module(R"(
graph @dq_rows(%x: bf16[T, 4095], %r: bf16[T, 4095], %y: bf16[T, 7], %z: f32[T, 1]) {
  %h = add(%x, %r)
  %q, %qs = quantize(%h) {dtype = f8e4m3, axis = 0}
  %q5, %qs5 = quantize(%y) {dtype = f8e5m2, axis = 0}
  %q8, %qs8 = quantize(%z) {dtype = i8, axis = -2}
  return %h, %q, %qs, %q5, %qs5, %q8, %qs8
}
)", "dq_rows");
  auto rows = [](const Graph& g, ValueId v, const Bindings& b, uint64_t seed) {
    HostTensor t(g.value(v).type.dtype, resolve(g.value(v).type.shape, b));
    fill_uniform(t, seed, -1.0, 1.0);
    const int64_t d = t.shape[1];
    const double tiny = t.dtype == DType::F32 ? 0x1p-149 : 0x1p-133;
    for (int64_t r = 0; r < std::min<int64_t>(t.shape[0], 3); ++r)
      for (int64_t c = 0; c < d; ++c) {
        double& e = t.data[static_cast<size_t>(r * d + c)];
        e = r == 0 ? 0.0 : r == 1 ? round_to(t.dtype, e * 0x1p-120) : (c % 2 ? -tiny : tiny);
      }
    return t;
  };
  for (int64_t t : {1, 3, 7, 129}) check_graph(m.graphs[0], binds({{"T", t}}), static_cast<uint64_t>(200 + t), true, rows);
}

TEST_CASE("rms_norm with per-token fp8 quantization: codes and scales exact for the row the kernel normalised",
          "[gpu][membound]") {
  // The production pattern, once with the normalised row returned as well: the kernel then stores
  // the same bf16 row it quantizes, and check_group requires the codes and scales to equal the
  // reference quantize of that stored row bit for bit (the row itself within bf16 tolerance). The
  // second graph keeps the row on chip, as the planner fuses it in a layer; its codes and scales are
  // checked against the fp64 reference within one rounding step.
  Module m = parse_module(R"(
graph @norm_q_stored(%x: bf16[T, 4095], %r: bf16[T, 4095], %w: param bf16[4095]) {
  %h = add(%x, %r)
  %n = rms_norm(%h, %w) {eps = 1e-5}
  %q, %qs = quantize(%n) {dtype = f8e4m3, axis = 0}
  return %h, %n, %q, %qs
}
graph @norm_q_internal(%x: bf16[T, 4096], %r: bf16[T, 4096], %w: param bf16[4096]) {
  %h = add(%x, %r)
  %n = rms_norm(%h, %w) {eps = 1e-5}
  %q, %qs = quantize(%n) {dtype = f8e4m3, axis = 0}
  return %h, %q, %qs
}
graph @softmax_q_stored(%x: f16[T, 7]) {
  %p = softmax(%x)
  %q, %qs = quantize(%p) {dtype = i8, axis = 0}
  return %p, %q, %qs
}
)", "norm_q");
  for (const Graph& g : m.graphs) {
    const FusionPlan plan = plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);  // one kernel: add, norm and quantize
    for (int64_t t : {1, 7, 129}) check_graph(g, binds({{"T", t}}), static_cast<uint64_t>(300 + t));
  }
}
