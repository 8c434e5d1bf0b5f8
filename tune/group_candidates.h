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
  std::vector<std::string> pruned;  ///< "config: why" for those the family left out (KernelFamily::candidates)
  /// Largest |a - b| allowed between two correct candidates at output magnitude |a|: absolute + rel * |a|.
  double abs_tolerance = 0, rel_tolerance = 0;
};

/// The group's family's candidates (KernelFamily::candidates: the default first, each accepted by
/// reject_reason before it is emitted), each emitted; `eo.hint` must hold the values the kernels run with.
Candidates group_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& eo);

}  // namespace lj::tune
