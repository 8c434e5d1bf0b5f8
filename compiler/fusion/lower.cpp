// lower(): the graph passes a plan depends on, then the plan.
#include "compiler/fusion/fusion_group.h"
#include "layerjit/passes.h"

namespace lj {

Lowered lower(const Graph& g, const FusionOptions& opts) {
  Lowered out;
  std::vector<std::string> notes;
  if (opts.fuse && opts.fold_norms) {
    NormFolding f = fold_norms(g);
    notes = std::move(f.notes);
    if (f.folded > 0) out.graph = std::make_shared<const Graph>(std::move(f.graph));
  }
  // Nothing changed: the caller's graph itself (which must outlive the result).
  if (!out.graph) out.graph = std::shared_ptr<const Graph>(&g, [](const Graph*) {});
  out.plan = plan_fusion(*out.graph, opts);
  out.plan.notes = std::move(notes);
  return out;
}

}  // namespace lj
