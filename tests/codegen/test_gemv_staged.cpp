// The fp8 and i8 GEMV's first bytes of a weight W before the wait on the kernel before
// (griddepcontrol.wait), so that W streams while a row kernel finishes: the register batches load
// their first U steps of W there; the staged GEMV ("gemv mma stages=S": W and x through cp.async
// into each warp's ring in dynamic shared memory) copies its first S - 1 steps.
#include <catch2/catch.hpp>

#include <string>

#include "codegen/matmul_config.h"
#include "tests/codegen/gemv_kernel_util.h"
#include "layerjit/text.h"

using namespace lj;
using lj_test::count;
using lj_test::one_row_matmul;
using lj_test::ptx_of;

namespace {

const char* kGraphs = R"(
graph @w_param(%x: f8e4m3[M, 1008], %w: param f8e4m3[130, 1008], %rs: f32[M], %r: bf16[M, 130]) {
  %y = matmul(%x, %w, %rs)
  %h = add(%r, %y)
  return %h
}
graph @w_input(%x: f8e4m3[M, 1008], %w: f8e4m3[130, 1008]) {
  %y = matmul(%x, %w)
  return %y
}
graph @w_i8(%x: i8[M, 4112], %w: param i8[129, 4112]) {
  %y = matmul(%x, %w)
  return %y
}
)";

}  // namespace

TEST_CASE("the fp8 and i8 GEMV load a weight's first steps before the wait, the staged one through each warp's ring", "[codegen]") {
  const Module m = parse_module(kGraphs, "<staged gemv>");
  const Graph& param = m.graphs.at(0);
  const Graph& input = m.graphs.at(1);
  const Graph& i8 = m.graphs.at(2);

  // The rings are dynamic shared memory: 3 x 16 bytes per lane and step.
  const GeneratedKernel k = one_row_matmul(param, "gemv mma stages=4 warps=4");
  CHECK(k.launch.shared_bytes == 4 * 4 * 3 * 32 * 16);
  CHECK(k.config == "gemv mma stages=4 warps=4");
  CHECK(k.source.find("lj_mma_ring<S>* const ring") != std::string::npos);
  CHECK(k.source.find("lj_gemv_mma_share_staged<lj_e4m3, lj_e4m3, S, K>") != std::string::npos);
  // W is a param: its copies go out before the wait, once per call (the first chunk of x rows).
  const size_t prime = k.source.find("lj_gemv_mma_prime<S, K>"), wait = k.source.find("lj_pdl_begin();");
  REQUIRE(prime != std::string::npos);
  REQUIRE(wait != std::string::npos);
  CHECK(prime < wait);
  CHECK(k.source.find("ring[warp], m0 == 0, c);") != std::string::npos);
  for (const char* arch : {"sm_89", "sm_90a"}) {
    INFO(arch);
    const std::string ptx = ptx_of(k, arch);
    // W rows a and b before the wait and again in the share's prologue (for a later chunk of x rows),
    // x's prologue, the main loop's W a, b and x. Never a global load of W or x: they are read back
    // from the ring.
    CHECK(count(ptx, "cp.async.cg.shared.global") == 2 + 2 + 1 + 3);
    CHECK(count(ptx, "cp.async.wait_group 3") == 1);
    CHECK(count(ptx, "cp.async.wait_group 0") == 1);
    CHECK(count(ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 2);
    CHECK(count(ptx, "ld.global.v4") == 0);
    if (std::string(arch) == "sm_90a") {
      const size_t first_copy = ptx.find("cp.async.cg.shared.global"), dep_wait = ptx.find("griddepcontrol.wait");
      REQUIRE(dep_wait != std::string::npos);
      CHECK(first_copy < dep_wait);
    }
  }

  // W an input (not a param): another kernel may write it, so nothing is copied before the wait.
  const GeneratedKernel in = one_row_matmul(input, "gemv mma stages=4 warps=4");
  CHECK(in.source.find("lj_gemv_mma_prime") == std::string::npos);
  CHECK(in.source.find("ring[warp], false, c);") != std::string::npos);
  const std::string in_ptx = ptx_of(in, "sm_90a");
  CHECK(in_ptx.find("griddepcontrol.wait") < in_ptx.find("cp.async.cg.shared.global"));
  CHECK(count(in_ptx, "cp.async.cg.shared.global") == 2 + 1 + 3);

  // i8 (W8A8): the s8 mma, the sums in int32.
  const GeneratedKernel s8 = one_row_matmul(i8, "gemv mma stages=8 warps=4");
  CHECK(s8.source.find("lj_gemv_mma_share_s8_staged<S, K>") != std::string::npos);
  CHECK(count(ptx_of(s8, "sm_80"), "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 2);

  // The register batches: W's first U steps into registers before the wait, a param's only.
  const GeneratedKernel reg = one_row_matmul(param, "gemv mma u=4 warps=4");
  const size_t load_w = reg.source.find("lj_gemv_mma_load_w<U, K>(wa, wb, a_in, b_in, s0, s1, t, w0a, w0b);");
  REQUIRE(load_w != std::string::npos);
  CHECK(load_w < reg.source.find("lj_pdl_begin();"));
  CHECK(reg.source.find("lj_gemv_mma_share_pre<lj_e4m3, lj_e4m3, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, w0a, w0b, m0 == 0, c);") !=
        std::string::npos);
  {
    const std::string ptx = ptx_of(reg, "sm_90a");
    const size_t first_load = ptx.find("ld.global"), dep_wait = ptx.find("griddepcontrol.wait");
    REQUIRE(dep_wait != std::string::npos);
    CHECK(first_load < dep_wait);
    CHECK(count(ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 8);  // U = 4 steps of two
  }
  const GeneratedKernel reg_in = one_row_matmul(input, "gemv mma u=4 warps=4");
  CHECK(reg_in.source.find("lj_gemv_mma_load_w") == std::string::npos);
  CHECK(reg_in.source.find("lj_gemv_mma_share<lj_e4m3, lj_e4m3, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, c);") != std::string::npos);
  {
    const std::string ptx = ptx_of(reg_in, "sm_90a");
    CHECK(ptx.find("griddepcontrol.wait") < ptx.find("ld.global"));
  }
  CHECK(one_row_matmul(i8, "gemv mma u=2 warps=4").source.find("lj_gemv_mma_share_s8_pre<U, K>(") != std::string::npos);

  // The rules.
  MatmulProblem p;
  p.m = 1, p.n = 4096, p.k = 4096, p.dtype = DType::F8E4M3, p.sm = 90;
  const MatmulConfig c = *parse_matmul_config("gemv mma stages=8 warps=8", nullptr);
  CHECK(reject_reason(c, p).empty());
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma stages=16 warps=16", nullptr), p),
             Catch::Contains("stages=16 with 16 warps: 384 KiB of rings per CTA (at most 211 KiB"));
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma stages=1 warps=8", nullptr), p), Catch::Contains("stages=1 (2 to 16"));
  MatmulProblem short_k = p;
  short_k.k = 1024;  // 16 steps: 2 per warp
  CHECK_THAT(reject_reason(c, short_k), Catch::Contains("more steps in flight than a warp's share of 2 (K = 1024)"));
  MatmulProblem quantized = p;
  quantized.quantize_in_kernel = true;
  CHECK_THAT(reject_reason(c, quantized), Catch::Contains("stages with a quantize prologue"));
}
