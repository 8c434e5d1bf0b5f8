// The configs the tuner measures for one group, emitted, and how two candidates' outputs may differ.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace lj::tune {

struct Candidate {
  std::string config;  ///< the config text (MatmulConfig::str, AttentionConfig::str)
  GeneratedKernel kernel;
};

struct Candidates {
  std::vector<Candidate> list;      ///< the default first
  std::vector<std::string> pruned;  ///< "config: why" for attention tile sets the plan refuses
  /// Largest |a - b| allowed between two correct candidates at output magnitude |a|: absolute + rel * |a|.
  double abs_tolerance = 0, rel_tolerance = 0;
};

/// Matmul groups: the pruner's candidates (matmul_candidates: reject_reason decides before emitting).
/// Attention groups: attention_candidates (the default tiles of the target first, the plan deciding
/// which others fit). Each emitted; `eo.hint` must hold the values the kernels run with.
Candidates group_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& eo);

}  // namespace lj::tune
