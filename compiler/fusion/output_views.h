// The planner's last step: graph outputs that are views of larger buffers, copied out by a kernel
// that reads the buffer anyway so the buffer need not outlive its readers (see OutputView).
#pragma once

#include "compiler/fusion/fusion_group.h"

namespace lj {

/// Fills plan.output_views with every distinct graph output made by a view, each with its decision,
/// and adds the copies to the groups that make them (FusionGroup::copies, inputs, why). Runs on the
/// finished, ordered groups; deterministic (outputs in order, the first group that can copy).
void plan_output_view_copies(const Graph& g, FusionPlan& plan, const FusionOptions& opts);

}  // namespace lj
