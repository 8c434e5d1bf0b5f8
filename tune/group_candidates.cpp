#include "tune/group_candidates.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj::tune {

namespace {

// Two correct fp32-accumulating kernels differ by summation order: up to a few rounding steps of the
// output at the scale of the partial sums (~sqrt(K) for inputs in [-1, 1)), plus the output's
// relative step. Anything past that is a wrong kernel, not a different order.
void matmul_tolerance(DType t, int64_t k, Candidates& c) {
  double unit = std::ldexp(1.0, -16), rel = 1e-5;
  if (t == DType::BF16) unit = std::ldexp(1.0, -7), rel = 1.0 / 32;
  if (t == DType::F16) unit = std::ldexp(1.0, -10), rel = 1.0 / 256;
  c.abs_tolerance = std::sqrt(static_cast<double>(k)) * unit;
  c.rel_tolerance = rel;
}

// Attention outputs are means of V rows weighted by P rounded to 16 bits: twice the GPU tests'
// bound against the reference (each candidate may sit on either side of it).
void attention_tolerance(DType t, Candidates& c) {
  c.abs_tolerance = t == DType::F16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  c.rel_tolerance = t == DType::F16 ? 1.0 / 512 : 1.0 / 64;
}

void add(const Graph& g, const FusionGroup& grp, const EmitOptions& eo, const std::string& config, Candidates& out) {
  try {
    out.list.push_back(Candidate{config, emit_group(g, grp, eo)});
  } catch (const UserError& e) {
    out.pruned.push_back(fmt::format("{}: {}", config, e.what()));
  }
}

}  // namespace

Candidates group_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& eo) {
  Candidates out;
  if (grp.kind == GroupKind::Matmul) {
    const MatmulProblem problem = matmul_problem(g, grp, eo);
    EmitOptions ceo = eo;
    for (const MatmulConfig& c : matmul_candidates(problem)) {
      ceo.matmul = c;
      add(g, grp, ceo, c.str(), out);
    }
    matmul_tolerance(g.value(g.node(grp.nodes[0]).results[0]).type.dtype, problem.k, out);
    return out;
  }
  LJ_CHECK(grp.kind == GroupKind::Attention, SourceLoc{}, "group {} of @{} is a {} group: only matmul and attention groups have configs to tune",
           grp.id, g.name(), group_kind_name(grp.kind));
  // The default first (emitted without a config: the emitter's own choice for this target).
  EmitOptions ceo = eo;
  ceo.attention.reset();
  GeneratedKernel def = emit_group(g, grp, ceo);
  const std::string def_config = def.config;
  out.list.push_back(Candidate{def_config, std::move(def)});
  const bool decode = def_config.rfind("decode ", 0) == 0;  // one query token per sequence: the split-KV kernel
  std::vector<AttentionConfig> others = {AttentionConfig{}, AttentionConfig{128, 2, 32, 2}, AttentionConfig{128, 1, 64, 2},
                                         AttentionConfig{64, 1, 64, 2}, AttentionConfig{128, 2, 32, 3}};
  if (decode) others = decode_attention_candidates();
  if (!decode && eo.arch_specific && eo.sm == 90)
    for (AttentionConfig c : {AttentionConfig::hopper(), AttentionConfig{128, 1, 128, 3, true}, AttentionConfig{128, 1, 64, 2, true},
                              AttentionConfig{128, 1, 64, 4, true}})
      others.push_back(c);
  for (const AttentionConfig& c : others) {
    if (c.str() == def_config) continue;
    ceo.attention = c;
    if (!decode) {
      add(g, grp, ceo, c.str(), out);
      continue;
    }
    // Decode: named by the chunk each candidate resolves to (what the DB stores), each once.
    Candidates one;
    add(g, grp, ceo, c.str(), one);
    for (std::string& p : one.pruned) out.pruned.push_back(std::move(p));
    if (one.list.empty()) continue;
    one.list[0].config = one.list[0].kernel.config;
    if (std::none_of(out.list.begin(), out.list.end(), [&](const Candidate& k) { return k.config == one.list[0].config; }))
      out.list.push_back(std::move(one.list[0]));
  }
  attention_tolerance(g.value(g.node(grp.nodes[0]).results[0]).type.dtype, out);
  return out;
}

}  // namespace lj::tune
