// The plan as JSON and as a Graphviz graph (see plan_formats.h).
#include "tools/plan_formats.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "codegen/emit_common.h"
#include "layerjit/text.h"
#include "tools/cli.h"
#include "tools/external_tool.h"

namespace lj::cli {

namespace {

bool all_bound(const Graph& g, const Bindings& b) {
  for (const std::string& s : g.symbols())
    if (!b.get(s)) return false;
  return true;
}

int64_t value_bytes(const Graph& g, ValueId v, const Bindings& b) {
  const TensorType& t = g.value(v).type;
  return tensor_bytes(t.dtype, resolve(t.shape, b));
}

// Byte and FLOP counts are whole numbers: written as integers, not 1.2e8.
int64_t whole(double x) { return static_cast<int64_t>(std::llround(x)); }

nlohmann::ordered_json values_json(const Graph& g, const std::vector<ValueId>& vs, const Bindings& b, bool bound) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (ValueId v : vs) {
    const ValueInfo& info = g.value(v);
    out.push_back({{"name", info.name},
                   {"type", info.type.str()},
                   {"param", info.is_param},
                   {"bytes", bound ? nlohmann::ordered_json(value_bytes(g, v, b)) : nlohmann::ordered_json(nullptr)}});
  }
  return out;
}

nlohmann::ordered_json graph_json(const PlannedGraph& pg, const Bindings& sizes) {
  const Graph& g = *pg.lowered.graph;
  const FusionPlan& plan = pg.lowered.plan;
  const bool bound = all_bound(g, sizes);
  nlohmann::ordered_json sz = nlohmann::ordered_json::object();
  for (const std::string& s : g.symbols())
    if (auto v = sizes.get(s)) sz[s] = *v;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  double bytes = 0, flops = 0, prep_bytes = 0;
  size_t kernels = 0, prep_kernels = 0;
  for (const FusionGroup& grp : plan.groups) {
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (NodeId n : grp.nodes) nodes.push_back({{"op", std::string(op_name(g.node(n).kind))}, {"text", print_node(g, n)}});
    nlohmann::ordered_json gj = {{"id", grp.id},
                         {"kind", std::string(group_kind_name(grp.kind))},
                         {"kernel", kernel_name(g, grp)},
                         {"nodes", nodes},
                         {"reads", values_json(g, grp.inputs, sizes, bound)},
                         {"writes", values_json(g, grp.outputs, sizes, bound)},
                         {"on_chip", values_json(g, grp.internal, sizes, bound)},
                         {"copies", values_json(g, grp.copies, sizes, bound)},
                         {"prepare", grp.prepare},
                         {"reasons", grp.why},
                         {"bytes", nullptr},
                         {"flops", nullptr}};
    (grp.prepare ? prep_kernels : kernels) += 1;
    if (bound) {
      const GroupCost c = group_cost(g, grp, sizes);
      gj["bytes"] = whole(c.bytes);
      gj["flops"] = whole(c.flops);
      (grp.prepare ? prep_bytes : bytes) += c.bytes;
      if (!grp.prepare) flops += c.flops;
    }
    groups.push_back(std::move(gj));
  }
  nlohmann::ordered_json views = nlohmann::ordered_json::array();
  for (NodeId n : plan.views) views.push_back({{"op", std::string(op_name(g.node(n).kind))}, {"text", print_node(g, n)}});
  nlohmann::ordered_json returned = nlohmann::ordered_json::array();
  for (const OutputView& ov : plan.output_views)
    returned.push_back({{"value", g.value(ov.value).name},
                        {"buffer", g.value(ov.buffer).name},
                        {"copied_by", ov.copied_by < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ov.copied_by)},
                        {"why", ov.why}});
  nlohmann::ordered_json totals = {{"kernels", kernels},
                           {"bytes", bound ? nlohmann::ordered_json(whole(bytes)) : nlohmann::ordered_json(nullptr)},
                           {"flops", bound ? nlohmann::ordered_json(whole(flops)) : nlohmann::ordered_json(nullptr)},
                           {"prepare_kernels", prep_kernels},
                           {"prepare_bytes", bound ? nlohmann::ordered_json(whole(prep_bytes)) : nlohmann::ordered_json(nullptr)},
                           {"unfused_kernels", nullptr},
                           {"unfused_bytes", nullptr}};
  if (plan.fused) {
    // Counted on the caller's graph, before norm folding, as the text plan does.
    const FusionPlan unfused = plan_fusion(*pg.source, FusionOptions{false});
    totals["unfused_kernels"] = unfused.groups.size();
    if (bound) {
      double ub = 0;
      for (const FusionGroup& grp : unfused.groups) ub += group_cost(*pg.source, grp, sizes).bytes;
      totals["unfused_bytes"] = whole(ub);
    }
  }
  return {{"name", g.name()},          {"sizes", sz},       {"symbols", g.symbols()}, {"fused", plan.fused},
          {"notes", plan.notes},       {"groups", groups},  {"views", views},         {"returned_views", returned},
          {"totals", totals}};
}

// A DOT string literal.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

void graph_dot(std::string& out, int gi, const PlannedGraph& pg, const Bindings& sizes) {
  const Graph& g = *pg.lowered.graph;
  const FusionPlan& plan = pg.lowered.plan;
  const bool bound = all_bound(g, sizes);
  auto vid = [&](ValueId v) { return fmt::format("g{}v{}", gi, v); };
  auto nid = [&](NodeId n) { return fmt::format("g{}n{}", gi, n); };
  auto is_in = [](const std::vector<ValueId>& vs, ValueId v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); };
  auto value_label = [&](ValueId v) { return "%" + g.value(v).name + "\n" + g.value(v).type.str(); };

  std::string sz;
  for (const std::string& s : g.symbols())
    if (auto v = sizes.get(s)) sz += fmt::format("{}{}={}", sz.empty() ? "" : ", ", s, *v);
  out += fmt::format("  subgraph cluster_g{} {{\n    label={}; fontsize=16; style=rounded; color=gray60;\n", gi,
                     q("@" + g.name() + (sz.empty() ? "" : " (" + sz + ")")));
  std::vector<bool> placed(g.values().size(), false);
  for (const FusionGroup& grp : plan.groups) {
    std::string label = fmt::format("group {} {}{}", grp.id, group_kind_name(grp.kind), grp.prepare ? " (weight preparation, once)" : "");
    if (bound) {
      const GroupCost c = group_cost(g, grp, sizes);
      label += fmt::format("\n{} moved, {:.3g} GFLOP", format_bytes(c.bytes), c.flops / 1e9);
    }
    out += fmt::format("    subgraph cluster_g{}k{} {{\n      label={}; style=\"rounded,filled\"; fillcolor={}; color=steelblue;\n", gi,
                       grp.id, q(label), grp.prepare ? "lightyellow" : "aliceblue");
    for (NodeId n : grp.nodes)
      out += fmt::format("      {} [label={}, shape=box, style=filled, fillcolor=white];\n", nid(n), q(std::string(op_name(g.node(n).kind))));
    for (ValueId v : grp.internal) {
      out += fmt::format("      {} [label={}, shape=ellipse, style=dashed, color=gray40, fontcolor=gray30];\n", vid(v), q(value_label(v)));
      placed[static_cast<size_t>(v)] = true;
    }
    out += "    }\n";
  }
  // Everything outside the kernels: graph inputs, values stored between kernels, views.
  for (ValueId v = 0; v < static_cast<ValueId>(g.values().size()); ++v) {
    if (placed[static_cast<size_t>(v)]) continue;
    const ValueInfo& info = g.value(v);
    std::string attrs;
    const bool view = info.producer >= 0 && std::find(plan.views.begin(), plan.views.end(), info.producer) != plan.views.end();
    if (info.producer < 0) attrs = info.is_param ? "shape=box, style=\"rounded,filled\", fillcolor=gray90" : "shape=box, style=rounded";
    else if (view) attrs = "shape=ellipse, style=dotted";  // an alias of another value's memory
    else attrs = "shape=ellipse";
    if (is_in(g.outputs(), v)) attrs += ", peripheries=2";
    out += fmt::format("    {} [label={}, {}];\n", vid(v), q(value_label(v)), attrs);
  }
  for (NodeId n : plan.views)
    out += fmt::format("    {} [label={}, shape=diamond, style=dashed, fontsize=10];\n", nid(n), q(std::string(op_name(g.node(n).kind))));
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes().size()); ++n) {
    const Node& node = g.node(n);
    for (ValueId v : node.operands) out += fmt::format("    {} -> {};\n", vid(v), nid(n));
    for (ValueId v : node.results) out += fmt::format("    {} -> {};\n", nid(n), vid(v));
  }
  out += "  }\n";
}

}  // namespace

nlohmann::ordered_json plan_json(const std::vector<PlannedGraph>& graphs, const Bindings& sizes) {
  nlohmann::ordered_json gs = nlohmann::ordered_json::array();
  for (const PlannedGraph& pg : graphs) gs.push_back(graph_json(pg, sizes));
  return {{"schema", "layerjit.plan/1"}, {"graphs", gs}};
}

std::string plan_dot(const std::vector<PlannedGraph>& graphs, const Bindings& sizes) {
  std::string out =
      "// layerjit plan --format dot: one cluster per fusion group (a kernel); dashed values stay on chip,\n"
      "// solid ones are stored in device memory, dotted ones are views (aliases of another value's memory),\n"
      "// grey boxes are params, doubled outlines are returned; diamonds are views (no kernel).\n"
      "digraph layerjit_plan {\n  rankdir=TB; newrank=true; fontname=\"Helvetica\";\n"
      "  node [fontname=\"Helvetica\", fontsize=11]; edge [color=gray35, arrowsize=0.6];\n";
  for (size_t i = 0; i < graphs.size(); ++i) graph_dot(out, static_cast<int>(i), graphs[i], sizes);
  return out + "}\n";
}

std::string dot_to_svg(const std::string& dot_text) {
  const std::optional<std::string> dot = find_tool("dot");
  if (!dot)
    throw UserError("--format svg needs Graphviz's dot on PATH (Debian: apt-get install graphviz); "
                    "--format dot writes the graph for it");
  const ToolRun r = run_tool_on(*dot, {"-Tsvg"}, dot_text);
  if (r.exit_code != 0) throw UserError(fmt::format("dot -Tsvg failed (exit {}):\n{}", r.exit_code, r.errors));
  return r.output;
}

}  // namespace lj::cli
