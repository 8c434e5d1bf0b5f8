// `layerjit plan --format json|dot|svg`: the fusion plan as data and as a picture. The text form is
// print_plan (compiler/fusion/fusion_group.h); these read the same FusionPlan and group_cost, so the
// three cannot disagree.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/fusion/fusion_group.h"

namespace lj::cli {

/// One graph's plan, as the planner made it for `sizes`.
struct PlannedGraph {
  const Graph* source = nullptr;  // the caller's graph (the unfused totals are counted on it)
  Lowered lowered;                // the graph after its passes, and its plan
};

/// The JSON document (schema docs/plan.schema.json, "layerjit.plan/1"): per graph its sizes, groups
/// (kind, kernel name, nodes, values read, written and kept on chip with their types and bytes,
/// reasons, bytes and FLOPs), views, returned views and totals against the unfused plan. Bytes and
/// FLOPs are null where a symbol they need is unbound.
nlohmann::ordered_json plan_json(const std::vector<PlannedGraph>& graphs, const Bindings& sizes);

/// A Graphviz digraph: one cluster per graph, inside it one cluster per fusion group (a kernel)
/// holding its ops and the values it keeps on chip (dashed); values stored in device memory
/// between kernels are solid, params grey boxes, returned values doubled; views are diamonds
/// outside every kernel.
std::string plan_dot(const std::vector<PlannedGraph>& graphs, const Bindings& sizes);

/// `dot -Tsvg` of `dot_text` (Graphviz on PATH); a UserError naming the package when it is missing.
std::string dot_to_svg(const std::string& dot_text);

}  // namespace lj::cli
