// The bulk-fed fp8 and i8 GEMV ("gemv mma bulk=S", sm_90+): the CTA's 16 W rows stream through a
// ring of S stages in dynamic shared memory, one bulk copy per row and stage issued by one thread,
// each stage completing on its mbarrier; a weight's first S stages go out before the wait on the
// kernel before. The GPU test that runs it: test_gpu_gemm "the tensor-core fp8 GEMV matches...".
#include <catch2/catch.hpp>

#include <string>

#include "codegen/matmul_config.h"
#include "tests/codegen/gemv_kernel_util.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"

using namespace lj;
using lj_test::count;
using lj_test::one_row_matmul;
using lj_test::ptx_of;

namespace {

const char* kGraphs = R"(
graph @w_param(%x: f8e4m3[M, 4112], %w: param f8e4m3[130, 4112], %rs: f32[M], %r: bf16[M, 130]) {
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

constexpr const char* kBulkCopy = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes";

}  // namespace

TEST_CASE("the bulk-fed fp8 and i8 GEMV: W through a ring of bulk copies, a weight's first stages before the wait", "[codegen]") {
  const Module m = parse_module(kGraphs, "<bulk gemv>");
  const Graph& param = m.graphs.at(0);
  const Graph& input = m.graphs.at(1);
  const Graph& i8 = m.graphs.at(2);

  const GeneratedKernel k = one_row_matmul(param, "gemv mma bulk=4 warps=8");
  CHECK(k.config == "gemv mma bulk=4 warps=8");
  CHECK(k.launch.shared_bytes == gemv_bulk_ring_bytes(4));
  CHECK(gemv_bulk_ring_bytes(4) == 4 * (16 * (1024 + 16) + 8));
  CHECK(k.source.find("static_assert(sizeof(lj_gemv_bulk_ring<S, KB>) == 66592") != std::string::npos);
  CHECK(k.source.find("lj_gemv_mma_share_bulk<lj_e4m3, lj_e4m3, S, KB, WARPS, K>(xr, x_in, m0 / 8 * NST, total,") != std::string::npos);
  // W is a param: the first S stages go out before the wait.
  const size_t issue = k.source.find("lj_gemv_bulk_issue<S, KB, K>(wrow, q, ring)"), wait = k.source.find("lj_pdl_begin();");
  REQUIRE(issue != std::string::npos);
  REQUIRE(wait != std::string::npos);
  CHECK(issue < wait);
  {
    const std::string ptx = ptx_of(k, "sm_90a");
    // The bulk copies of the first stages and of each refill; one expect_tx each; one wait per stage.
    CHECK(count(ptx, kBulkCopy) == 2);
    CHECK(count(ptx, "mbarrier.arrive.expect_tx.shared::cta.b64") == 2);
    CHECK(count(ptx, "mbarrier.try_wait.parity.shared::cta.b64") == 1);
    // 16 k steps a stage over 8 warps: two steps of two mmas each per warp.
    CHECK(count(ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 4);
    // No cp.async of the per-warp rings, and W never read by a plain global load: x's two chunks a
    // stage are the only 16-byte global loads.
    CHECK(count(ptx, "cp.async.cg.shared.global") == 0);
    CHECK(count(ptx, "ld.global.v4") + count(ptx, "ld.global.nc.v4") == 2);
    const size_t first_copy = ptx.find(kBulkCopy), dep_wait = ptx.find("griddepcontrol.wait");
    REQUIRE(dep_wait != std::string::npos);
    CHECK(first_copy < dep_wait);
    CHECK(ptx_of(k, "sm_90").find(kBulkCopy) != std::string::npos);  // sm_90 has it too (not only 90a)
  }

  // W an input (not a param): another kernel may write it, so nothing is copied before the wait.
  const GeneratedKernel in = one_row_matmul(input, "gemv mma bulk=2 warps=4");
  CHECK(in.source.find("lj_pdl_begin();") < in.source.find("lj_gemv_bulk_issue<S, KB, K>(wrow, q, ring)"));
  {
    const std::string ptx = ptx_of(in, "sm_90a");
    CHECK(ptx.find("griddepcontrol.wait") < ptx.find(kBulkCopy));
    CHECK(count(ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 8);  // 4 warps: four steps a stage
  }

  // i8 (W8A8): the s8 mma, the sums in int32.
  const GeneratedKernel s8 = one_row_matmul(i8, "gemv mma bulk=3 warps=16");
  CHECK(s8.source.find("lj_gemv_mma_share_s8_bulk<S, KB, WARPS, K>(") != std::string::npos);
  CHECK(count(ptx_of(s8, "sm_90a"), "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 2);

  // Every bulk config compiles without spills or stack, two CTAs of 8 warps per SM.
  for (const char* config : {"gemv mma bulk=2 warps=4", "gemv mma bulk=4 warps=8", "gemv mma bulk=5 warps=8", "gemv mma bulk=4 warps=16"})
    for (const Graph* g : {&param, &i8}) {
      const GeneratedKernel b = one_row_matmul(*g, config);
      auto r = jit::kernel_resources(b, *rt::Target::parse("sm_90a"));
      INFO(b.name << " (" << config << "): " << (r.ok() ? r->str() : r.message()));
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      CHECK(!r->spills());
      CHECK(r->stack_bytes == 0);
      CHECK(r->registers <= 128);
    }
}

TEST_CASE("the pruner says where the bulk-fed GEMV cannot run", "[codegen]") {
  MatmulProblem p;
  p.m = 1, p.n = 4096, p.k = 4096, p.dtype = DType::F8E4M3, p.sm = 90;
  const MatmulConfig c = *parse_matmul_config("gemv mma bulk=4 warps=8", nullptr);
  CHECK(c.bulk_stages == 4);
  CHECK(c.str() == "gemv mma bulk=4 warps=8");
  CHECK(reject_reason(c, p).empty());
  MatmulProblem ada = p;
  ada.sm = 89;
  CHECK_THAT(reject_reason(c, ada), Catch::Contains("bulk=4 (bulk copies, cp.async.bulk with mbarriers) needs sm_90 or newer, target is sm_89"));
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma bulk=4 warps=3", nullptr), p),
             Catch::Contains("a stage's 16 k steps are shared equally"));
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma bulk=9 warps=8", nullptr), p), Catch::Contains("bulk=9 (2 to 8 stages)"));
  MatmulProblem small = p;
  small.max_shared_bytes = 99 * 1024;  // a GPU with less shared memory per block
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma bulk=6 warps=8", nullptr), small),
             Catch::Contains("bulk=6 with 8 warps: 97 KiB of ring per CTA (at most 94 KiB"));
  MatmulProblem short_k = p;
  short_k.k = 2048;  // two stages a pass
  CHECK_THAT(reject_reason(c, short_k), Catch::Contains("bulk=4: more stages than the 2 of a pass over K = 2048"));
  MatmulProblem codes = p;
  codes.dtype = DType::BF16;
  codes.weight_codes = true;
  CHECK_FALSE(reject_reason(c, codes).empty());
  std::string error;
  CHECK_FALSE(parse_matmul_config("gemv mma bulk=4 u=2", &error));
  CHECK_THAT(error, Catch::Contains("bulk (W fed by bulk copies) replaces u"));
  CHECK_FALSE(parse_matmul_config("gemv bulk=4", &error));  // the SIMT GEMV has no bulk
  CHECK_THAT(error, Catch::Contains("unknown key 'bulk'"));
  // Candidates: at one row on sm_90, fp8 and i8; none on sm_89.
  int bulk = 0;
  for (const MatmulConfig& x : matmul_candidates(p)) bulk += x.bulk_stages > 0;
  CHECK(bulk == 4);  // 2 and 4 stages (6 is more than K = 4096's four), 4 and 8 warps
  int none = 0;
  for (const MatmulConfig& x : matmul_candidates(ada)) none += x.bulk_stages > 0;
  CHECK(none == 0);
}

TEST_CASE("the bulk-fed GEMV with an activation-quantize prologue: x from the CTA's codes, W streaming meanwhile", "[codegen]") {
  const Module m = parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/examples/llama3_8b_fp8.lj");
  const Graph& g = m.graphs.at(1);
  REQUIRE(g.name() == "llama3_8b_fp8_decode");
  EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = true;
  eo.hint.set("B", 1);
  eo.hint.set("C", 4096);
  eo.matmul = parse_matmul_config("gemv mma bulk=4 warps=8", nullptr);
  FusionOptions fo;
  fo.sizes = eo.hint;
  fo.quantize_prologues = true;
  const Lowered l = lower(g, fo);
  int seen = 0;
  for (const FusionGroup& grp : l.plan.groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    REQUIRE(grp.matmul.x_quantize >= 0);
    const GeneratedKernel k = emit_group(*l.graph, grp, eo);
    // The first stages before the wait and the prologue; the pass reads the codes from xq_s.
    const size_t issue = k.source.find("lj_gemv_bulk_issue<S, KB, K>(wrow, q, ring)"), wait = k.source.find("lj_pdl_begin();"),
                 codes = k.source.find("xq_s[");
    CHECK(issue < wait);
    CHECK(wait < codes);
    CHECK(k.source.find("const lj_e4m3* __restrict__ xr = xq_s;") != std::string::npos);
    CHECK(k.source.find("(xr, x_in, m0 * NST, total,") != std::string::npos);
    auto r = jit::kernel_resources(k, *rt::Target::parse("sm_90a"));
    INFO(k.name << ": " << (r.ok() ? r->str() : r.message()));
    REQUIRE(r.ok());
    CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
    CHECK(!r->spills());
    // Two CTAs per SM: the ring beside the prologue's static shared memory (down: 46 KiB of it).
    CHECK(2 * (r->static_shared_bytes + k.launch.shared_bytes + 1024) <= 228 * 1024);
    ++seen;
  }
  CHECK(seen == 4);
}
