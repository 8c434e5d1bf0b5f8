// GPU tier: the matmul kernels (tensor-core GEMM and GEMV) against the CPU reference for odd shapes —
// M, N, K in {1, 7, 127, 129, 1000}, none a multiple of any tile — and for every config the pruner
// accepts for a prefill-sized problem, on shapes that exercise both load paths (cp.async for 16-byte
// aligned rows, element loads otherwise) and every edge mask. Outputs are poisoned before each run.
#include <algorithm>

#include <fmt/format.h>

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

TEST_CASE("every config the pruner accepts computes the same product", "[gpu][gemm]") {
  // A prefill-sized problem gives every large tile, a 16-row one the GEMV variants and thin tiles.
  rt::Context& ctx = lj_test::gpu();
  std::vector<MatmulConfig> configs;
  for (int64_t rows : {4096, 16}) {
    MatmulProblem p;
    p.m = rows, p.n = 4096, p.k = 4096;
    p.max_shared_bytes = ctx.info().max_smem_per_block_optin;
    p.sm = ctx.info().cc();
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
    check(aligned, 300, emit, ++seed);
    check(unaligned, 129, emit, ++seed);
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
graph @quantized(%x: bf16[M, 256], %w: param bf16[96, 256], %s: f32[96]) {
  %y = matmul(%x, %w)
  %q = quantize(%y, %s) {dtype = f8e4m3, axis = 1}
  return %q
}
)",
                          "<gemm epilogues>");
  uint64_t seed = 900;
  for (const Graph& g : m.graphs) {
    REQUIRE(plan_fusion(g).groups.size() == 1);
    for (int64_t rows : {1, 7, 129, 300}) {
      EmitOptions mma;  // no hint: the tensor-core GEMM
      check(g, rows, mma, ++seed);
      EmitOptions gemv;
      gemv.matmul = MatmulConfig{};
      gemv.matmul->family = MatmulConfig::Family::Gemv;
      check(g, rows, gemv, ++seed);
    }
  }
}
