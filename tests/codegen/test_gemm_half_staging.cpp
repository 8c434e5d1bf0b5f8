// Ping-pong Hopper GEMMs whose whole epilogue tile would take the ring past the device's shared
// memory stage it one m64 half at a time (MatmulConfig::staged_rows): bf16/fp8 at 6 stages, i8 with
// its f32 tile at 5. The GPU tests that run them: test_gpu_gemm's Hopper lists (odd shapes, fused
// epilogues) and its i8 candidate test.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/matmul_config.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"
#include "tests/codegen/gemv_kernel_util.h"

using namespace lj;
using lj_test::count;

namespace {

const char* kGraphs = R"(
graph @residual(%x: bf16[M, 4096], %w: param bf16[4096, 4096], %r: bf16[M, 4096]) {
  %y = matmul(%x, %w)
  %o = add(%r, %y)
  return %o
}
graph @i8(%x: i8[M, 4096], %w: param i8[6144, 4096]) {
  %y = matmul(%x, %w) {out_dtype = f32}
  return %y
}
)";

GeneratedKernel pingpong_kernel(const Graph& g, int stages) {
  return lj_test::hopper_matmul(g, fmt::format("wgmma bm=128 bn=128 stages={} gm=8 pingpong", stages), 4096);
}

}  // namespace

TEST_CASE("a ping-pong tile that cannot be staged whole beside its ring is staged a half at a time", "[codegen]") {
  const Module m = parse_module(kGraphs, "<half staging>");
  for (const Graph& g : m.graphs) {
    const bool i8 = g.name() == "i8";
    const int out_bytes = i8 ? 4 : 2, elem_bytes = i8 ? 1 : 2;
    // The deepest ring that fits whole, and the next stage up.
    for (int stages : {i8 ? 4 : 5, i8 ? 5 : 6}) {
      INFO(g.name() << ", " << stages << " stages");
      const bool halves = stages == (i8 ? 5 : 6);
      const GeneratedKernel k = pingpong_kernel(g, stages);
      CHECK(count(k.source, "Gemm::stage_half<0>(acc") == (halves ? 1 : 0));
      CHECK(count(k.source, "Gemm::stage_half<1>(acc") == (halves ? 1 : 0));
      CHECK(count(k.source, "Gemm::stage(acc") == (halves ? 0 : 1));
      CHECK(count(k.source, "const lj_i64 m0 = lj_m0_tile + 64;") == (halves ? 1 : 0));
      // The launch asks for the ring and the staged rows: 1024 of alignment, 128 of barriers.
      const int rows = halves ? 64 : 128;
      CHECK(k.launch.shared_bytes == 1024 + stages * 256 * 128 + 128 + rows * 136 * out_bytes);
      CHECK(k.launch.shared_bytes <= 227 * 1024);
      CHECK(parse_matmul_config(k.config, nullptr)->staged_rows(elem_bytes, out_bytes, false, 227 * 1024) == rows);
      if (!halves) continue;
      // It compiles without spills: the other half's sums held through the first half's epilogue
      // fit in the consumers' 232 registers (they spilled 20-750 bytes while ptxas ignored
      // setmaxnreg and capped every thread at 168).
      auto r = jit::kernel_resources(k, *rt::Target::parse("sm_90a"));
      REQUIRE(r.ok());
      INFO(r->str());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      CHECK(!r->spills());
    }
  }
}
