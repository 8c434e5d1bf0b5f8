#include "tune/group_candidates.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "codegen/kernel_family.h"
#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::tune {

namespace {

// Two correct fp32-accumulating kernels differ by summation order: up to a few rounding steps of the
// output at the scale of the partial sums (~sqrt(K) for inputs in [-1, 1)), plus the output's
// relative step. Anything past that is a wrong kernel, not a different order. W made from 4-bit
// codes (the tuner's random codes, zero points and scales in [-1, 1)) is (q - z) * s with q - z up
// to +-15, about 6.5 in root mean square: partial sums 8x those of [-1, 1) operands. The kernels
// also round differently there, not only in order: the GEMV multiplies the exact integer sums by
// each group's scale, the GEMMs round every (q - z) * s to 16 bits before the mma (on Llama-3-8B's
// gate/up at 16 rows the two parted by 0.61 on a sum of 1.27 whose terms reach 15).
void matmul_tolerance(DType t, int64_t k, bool weight_codes, Candidates& c) {
  double unit = std::ldexp(1.0, -16), rel = 1e-5;
  if (t == DType::BF16) unit = std::ldexp(1.0, -7), rel = 1.0 / 32;
  if (t == DType::F16) unit = std::ldexp(1.0, -10), rel = 1.0 / 256;
  if (weight_codes) unit *= 8;
  c.abs_tolerance = std::sqrt(static_cast<double>(k)) * unit;
  c.rel_tolerance = rel;
}

// Attention outputs are means of V rows weighted by P rounded to 16 bits: twice the GPU tests'
// bound against the reference (each candidate may sit on either side of it).
void attention_tolerance(DType t, Candidates& c) {
  c.abs_tolerance = t == DType::F16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  c.rel_tolerance = t == DType::F16 ? 1.0 / 512 : 1.0 / 64;
}

}  // namespace

Candidates group_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& eo) {
  const KernelFamily* family = kernel_family(grp.kind);
  LJ_CHECK(family && family->tunable(), SourceLoc{}, "group {} of @{} is a {} group: only matmul and attention groups have configs to tune",
           grp.id, g.name(), group_kind_name(grp.kind));
  // The family's list, default first, each one reject_reason accepts (decode tiles named by the
  // chunk each resolves to, what the DB stores); those it rejects are listed.
  Candidates out;
  EmitOptions ceo = eo;
  for (const KernelConfig& c : family->candidates(g, grp, eo, &out.pruned)) {
    c.apply(ceo);
    out.list.push_back(Candidate{c.str(), family->emit(g, grp, ceo)});
  }
  const DType t = g.value(g.node(anchor_node(g, grp)).results[0]).type.dtype;
  if (grp.kind == GroupKind::Matmul) {
    const MatmulProblem p = matmul_problem(g, grp, eo);
    matmul_tolerance(t, p.k, p.weight_codes, out);
  } else {
    attention_tolerance(t, out);
  }
  return out;
}

}  // namespace lj::tune
