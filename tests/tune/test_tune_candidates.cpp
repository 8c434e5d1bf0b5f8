// The tuner's CPU half: which groups it tunes, the candidates it measures (the emitter's default
// first, every one emitted), and how a stored winner is applied or refused with a reason.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "layerjit/host_tensor.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "tune/group_candidates.h"
#include "jit/tuned_config.h"
#include "runtime/host_values.h"
#include "tune/tune_group.h"

using namespace lj;

namespace {

const FusionGroup& group_of(const FusionPlan& plan, GroupKind kind) {
  for (const FusionGroup& grp : plan.groups)
    if (grp.kind == kind) return grp;
  FAIL("no group of that kind");
  return plan.groups.at(0);
}

EmitOptions target(bool hopper) {
  EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = hopper;
  eo.hint.set("T", 4096);
  return eo;
}

}  // namespace

TEST_CASE("tuner: attention prefill candidates start with the target's default and are all emitted", "[tune]") {
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(g);
  const FusionGroup& attn = group_of(plan, GroupKind::Attention);
  CHECK(tune::untunable_reason(g, attn).empty());
  for (bool hopper : {true, false}) {
    INFO((hopper ? "sm_90a" : "sm_90"));
    const tune::Candidates c = tune::group_candidates(g, attn, target(hopper));
    REQUIRE(c.list.size() >= 5);
    CHECK(c.list[0].config == (hopper ? "wgmma bn=128 stages=2" : "128x2x64x2"));
    std::set<std::string> seen;
    int wgmma = 0;
    for (const tune::Candidate& k : c.list) {
      CHECK(seen.insert(k.config).second);  // no config twice
      CHECK(k.kernel.config == k.config);   // the kernel is the one the text names
      wgmma += k.kernel.arch_specific ? 1 : 0;
    }
    CHECK(wgmma == (hopper ? 4 : 0));
    CHECK(c.pruned.empty());
    CHECK(c.abs_tolerance > 0);
    CHECK(c.rel_tolerance > 0);
  }
}

TEST_CASE("tuner: matmul candidates are the pruner's, the default first", "[tune]") {
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(g);
  const FusionGroup& mm = group_of(plan, GroupKind::Matmul);
  const EmitOptions eo = target(true);
  const tune::Candidates c = tune::group_candidates(g, mm, eo);
  const std::vector<MatmulConfig> want = matmul_candidates(matmul_problem(g, mm, eo));
  REQUIRE(c.list.size() == want.size());
  CHECK(c.list[0].config == default_matmul_config(matmul_problem(g, mm, eo)).str());
  for (size_t i = 0; i < want.size(); ++i) CHECK(c.list[i].config == want[i].str());
}

TEST_CASE("tuner: decode attention candidates are the decode tile sets, the emitter's default first", "[tune]") {
  const Graph decode = llama_decode(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(decode);
  EmitOptions eo = target(true);
  eo.hint.set("B", 32);
  eo.hint.set("C", 4096);
  const tune::Candidates c = tune::group_candidates(decode, group_of(plan, GroupKind::Attention), eo);
  REQUIRE(c.list.size() > 10);
  // B = 32 sequences x 8 KV heads: 256 CTAs of the whole cache each are one wave of two per SM.
  CHECK(c.list[0].config == "decode bn=16 warps=4 stages=3 chunk=4096");
  for (const tune::Candidate& k : c.list) {
    INFO(k.config);
    CHECK(k.config.rfind("decode bn=", 0) == 0);
    CHECK(parse_attention_config(k.config, nullptr).has_value());
  }
}

TEST_CASE("tuner: groups without configs say why", "[tune]") {
  const Graph decode = llama_decode(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(decode);
  CHECK(tune::untunable_reason(decode, group_of(plan, GroupKind::Attention)).empty());  // the decode kernel's tiles
  CHECK_THAT(tune::untunable_reason(decode, group_of(plan, GroupKind::RowReduce)), Catch::Contains("only matmul and attention"));
  CHECK(tune::untunable_reason(decode, group_of(plan, GroupKind::Matmul)).empty());
}

TEST_CASE("tuner: a stored winner is applied when the emitter accepts it, else the reason is returned", "[tune]") {
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(g);
  const FusionGroup& attn = group_of(plan, GroupKind::Attention);
  EmitOptions eo = target(true);
  CHECK(jit::apply_config(g, attn, "wgmma bn=64 stages=4", eo).empty());
  REQUIRE(eo.attention.has_value());
  CHECK(eo.attention->str() == "wgmma bn=64 stages=4");

  EmitOptions plain = target(false);
  CHECK_THAT(jit::apply_config(g, attn, "wgmma bn=64 stages=4", plain), Catch::Contains("needs sm_90a"));
  CHECK(!plain.attention.has_value());  // left alone
  CHECK_THAT(jit::apply_config(g, attn, "wgmma bn=96 stages=2", eo), Catch::Contains("BN must be 64 or 128"));
  CHECK_THAT(jit::apply_config(g, attn, "mma bm=128", eo), Catch::Contains("expected BMxMTxBNxSTAGES"));

  const FusionGroup& mm = group_of(plan, GroupKind::Matmul);
  EmitOptions m = target(true);
  CHECK(jit::apply_config(g, mm, "wgmma bm=128 bn=128 stages=3 gm=8", m).empty());
  REQUIRE(m.matmul.has_value());
  CHECK(m.matmul->str() == "wgmma bm=128 bn=128 stages=3 gm=8");
  CHECK(!jit::apply_config(g, mm, "128x2x64x2", m).empty());
}

TEST_CASE("tuner: candidate outputs agree bit for bit or within the tolerance, never through a NaN", "[tune]") {
  // bf16 elements, little-endian: 0x3f80 = 1.0, 0x3f81 = 1.0078125, 0x4000 = 2.0, 0x7fc0 = NaN.
  const std::vector<unsigned char> want = {0x80, 0x3f, 0x00, 0x40, 0xc0, 0x7f, 0x80, 0x3f};
  std::string why;
  CHECK(tune::outputs_agree(DType::BF16, 0, 0, want, want, &why));  // identical, the NaN (poison) included
  std::vector<unsigned char> near = want;
  near[6] = 0x81;  // the last element 1.0 -> 1.0078125
  CHECK(tune::outputs_agree(DType::BF16, 0.01, 0, want, near, &why));
  CHECK(!tune::outputs_agree(DType::BF16, 0.001, 0, want, near, &why));
  CHECK(why == "element 3: 1.0078125 where the default config gives 1");
  std::vector<unsigned char> nan = want;
  nan[3] = 0x7f, nan[2] = 0xc0;  // element 1: 2.0 -> NaN
  CHECK(!tune::outputs_agree(DType::BF16, 1e9, 1e9, want, nan, &why));
  CHECK(why.find("element 1: nan") == 0);
  CHECK(!tune::outputs_agree(DType::BF16, 1, 1, want, std::vector<unsigned char>(6), &why));
  CHECK(why == "6 bytes where the default config gives 8");
}

TEST_CASE("tuner: 4-bit matmuls' tolerance admits both roundings of (q - z) * s and refuses a lost group", "[tune][int4]") {
  // The 4-bit kernels round differently, not only in order: the tensor-core GEMV multiplies each
  // group's exact integer sums by its scale, the GEMMs round every (q - z) * s to bf16 before the
  // mma. Both, modelled here on the tuner's random operands (K = 4096 as Llama-3-8B's projections,
  // 16 rows), must pass the tuner's comparison; a kernel that loses one group of 128 must not.
  const Module mod = parse_module(R"(
graph @q4(%x: bf16[T, 4096], %w: param u4[200, 4096], %s: param bf16[200, 32], %z: param u4[200, 32]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
)");
  const Graph& g = mod.graphs.at(0);
  FusionOptions fo;
  fo.packed_weight_gemms = true;
  fo.sizes.set("T", 16);
  const FusionPlan plan = plan_fusion(g, fo);
  const FusionGroup& mm = group_of(plan, GroupKind::Matmul);
  REQUIRE(mm.matmul.dequant >= 0);
  EmitOptions eo = target(true);
  eo.hint = fo.sizes;
  const tune::Candidates c = tune::group_candidates(g, mm, eo);
  REQUIRE(c.list.size() > 1);

  const int m = 16, n = 200, k = 4096, group = 128;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {  // xorshift64*
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return (state * 0x2545F4914F6CDD1Dull) >> 11;
  };
  auto uniform = [&] { return round_to(DType::BF16, -1.0 + 2.0 * static_cast<double>(next()) / 9007199254740992.0); };
  std::vector<double> x(static_cast<size_t>(m * k)), s(static_cast<size_t>(n * k / group));
  std::vector<int> q(static_cast<size_t>(n * k)), z(s.size());
  for (double& v : x) v = uniform();
  for (double& v : s) v = uniform();
  for (int& v : q) v = static_cast<int>(next() & 15);
  for (int& v : z) v = static_cast<int>(next() & 15);
  std::vector<unsigned char> gemm(static_cast<size_t>(m * n) * 2), gemv(gemm.size()), lost(gemm.size());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double rounded = 0, scaled = 0, dropped = 0;
      for (int gi = 0; gi < k / group; ++gi) {
        const double sc = s[static_cast<size_t>(j * (k / group) + gi)];
        const int zp = z[static_cast<size_t>(j * (k / group) + gi)];
        float part = 0;  // the GEMV's fp32 sum of one group's integers times x
        for (int e = gi * group; e < (gi + 1) * group; ++e) {
          const double xv = x[static_cast<size_t>(i * k + e)];
          const int qz = q[static_cast<size_t>(j * k + e)] - zp;
          rounded += xv * round_to(DType::BF16, qz * sc);
          part += static_cast<float>(xv * qz);
        }
        scaled += static_cast<double>(part) * sc;
        if (gi != 17) dropped += static_cast<double>(part) * sc;
      }
      const size_t at = static_cast<size_t>(i * n + j);
      REQUIRE(rt::encode_at(DType::BF16, round_to(DType::BF16, rounded), gemm.data(), at));
      REQUIRE(rt::encode_at(DType::BF16, round_to(DType::BF16, scaled), gemv.data(), at));
      REQUIRE(rt::encode_at(DType::BF16, round_to(DType::BF16, dropped), lost.data(), at));
    }
  std::string why;
  const bool agree = tune::outputs_agree(DType::BF16, c.abs_tolerance, c.rel_tolerance, gemv, gemm, &why);
  INFO(why);
  CHECK(agree);
  CHECK(!tune::outputs_agree(DType::BF16, c.abs_tolerance, c.rel_tolerance, gemv, lost, &why));
}
