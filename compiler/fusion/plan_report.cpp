// Costs of fusion groups and the human-readable plan (`layerjit plan`, golden tests).
#include <algorithm>

#include <fmt/format.h>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/text.h"
#include "ops/op_schema.h"

namespace lj {

namespace {
double value_bytes(const Graph& g, ValueId v, const Bindings& b) {
  const TensorType& t = g.value(v).type;
  return static_cast<double>(numel(resolve(t.shape, b))) * dtype_bits(t.dtype) / 8;
}

bool bound(const Graph& g, const Bindings& b) {
  for (const auto& s : g.symbols())
    if (!b.get(s)) return false;
  return true;
}

std::string human_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string human_flops(double f) {
  if (f >= 1e12) return fmt::format("{:.2f} TFLOP", f / 1e12);
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  return fmt::format("{:.0f} FLOP", f);
}

std::string value_list(const Graph& g, const std::vector<ValueId>& vs) {
  if (vs.empty()) return "nothing";
  std::string out;
  for (ValueId v : vs) out += (out.empty() ? "%" : ", %") + g.value(v).name;
  return out;
}
}  // namespace

GroupCost group_cost(const Graph& g, const FusionGroup& grp, const Bindings& b) {
  GroupCost c;
  std::vector<ValueId> in_place;  // caches updated in place and page pools: neither read nor rewritten whole
  for (NodeId n : grp.nodes) {
    const Node& node = g.node(n);
    std::vector<TensorType> ops, res;
    for (ValueId v : node.operands) ops.push_back(g.value(v).type);
    for (ValueId v : node.results) res.push_back(g.value(v).type);
    c.flops += op_cost(node.kind, ops, res, node.attrs, b).flops;
    if (node.kind == OpKind::KvCacheWrite) {
      in_place.push_back(node.operands[0]);
      in_place.push_back(node.results[0]);
      c.bytes += value_bytes(g, node.operands[1], b);  // the entries written
    }
    if (node.kind == OpKind::Attention && node.operands.size() == 5) {
      // Paged: the pages the sequences address (B x pages x page rows of k and of v), not the pool.
      const TensorType& pool = g.value(node.operands[1]).type;
      const Shape& table = g.value(node.operands[4]).type.shape;
      const double rows = static_cast<double>(resolve(table[0], b) * resolve(table[1], b) * resolve(pool.shape[1], b));
      c.bytes += 2 * rows * static_cast<double>(resolve(pool.shape[2], b) * resolve(pool.shape[3], b) * dtype_bytes(pool.dtype));
      in_place.push_back(node.operands[1]);
      in_place.push_back(node.operands[2]);
    }
  }
  auto counted = [&](ValueId v) { return std::find(in_place.begin(), in_place.end(), v) == in_place.end(); };
  for (ValueId v : grp.inputs)
    if (counted(v)) c.bytes += value_bytes(g, v, b);
  for (ValueId v : grp.outputs)
    if (counted(v)) c.bytes += value_bytes(g, v, b);
  for (ValueId v : grp.copies) c.bytes += value_bytes(g, v, b);  // written again; the read is among the inputs
  return c;
}

std::string print_plan(const Graph& g, const FusionPlan& plan, const Bindings& b, const Graph* unfused_source) {
  const bool costs = bound(g, b);
  std::string binds;
  for (const auto& s : g.symbols())
    if (auto v = b.get(s)) binds += fmt::format("{}{}={}", binds.empty() ? "" : ", ", s, *v);
  double total_bytes = 0, total_flops = 0, prep_bytes = 0;
  size_t per_call = 0;
  std::string body;
  size_t reduces = 0;  // all_reduce groups: NCCL calls, not kernels
  for (const FusionGroup& grp : plan.groups) {
    per_call += grp.prepare || grp.kind == GroupKind::AllReduce ? 0 : 1;
    reduces += grp.kind == GroupKind::AllReduce ? 1 : 0;
    body += fmt::format("  group {} {}: {} node{}\n", grp.id, group_kind_name(grp.kind), grp.nodes.size(),
                        grp.nodes.size() == 1 ? "" : "s");
    for (NodeId n : grp.nodes) body += fmt::format("    {}\n", print_node(g, n));
    body += fmt::format("    reads {}; writes {}", value_list(g, grp.inputs), value_list(g, grp.outputs));
    if (!grp.copies.empty()) body += fmt::format("; copies {}", value_list(g, grp.copies));
    if (!grp.internal.empty()) body += fmt::format("; keeps on chip {}", value_list(g, grp.internal));
    body += "\n";
    if (costs) {
      GroupCost c = group_cost(g, grp, b);
      (grp.prepare ? prep_bytes : total_bytes) += c.bytes;
      if (!grp.prepare) total_flops += c.flops;
      body += fmt::format("    moves {}, {}\n", human_bytes(c.bytes), human_flops(c.flops));
    }
    for (const auto& why : grp.why) body += fmt::format("    why: {}\n", why);
  }
  // Per-call figures: weight preparation runs once and is reported apart.
  std::string head = fmt::format("plan @{}{}: {} kernel{}", g.name(), binds.empty() ? "" : " (" + binds + ")", per_call,
                                 per_call == 1 ? "" : "s");
  if (reduces) head += fmt::format(" and {} all_reduce{} (NCCL)", reduces, reduces == 1 ? "" : "s");
  if (costs) {
    head += fmt::format(", {} moved, {}", human_bytes(total_bytes), human_flops(total_flops));
    if (plan.fused) {
      const Graph& src = unfused_source ? *unfused_source : g;
      FusionPlan unfused = plan_fusion(src, FusionOptions{false});
      double ub = 0;
      for (const auto& grp : unfused.groups) ub += group_cost(src, grp, b).bytes;
      head += fmt::format(" (unfused: {} kernels, {} moved)", unfused.groups.size(), human_bytes(ub));
    }
  } else if (!g.symbols().empty()) {
    std::string hint;
    for (const auto& sym : g.symbols()) hint += fmt::format("{}{}=N", hint.empty() ? "" : ",", sym);
    head += fmt::format(" (--bind {} for bytes and FLOPs)", hint);
  }
  std::string views;
  for (NodeId n : plan.views) views += fmt::format("    {}\n", print_node(g, n));
  if (per_call + reduces != plan.groups.size()) {
    const size_t n = plan.groups.size() - per_call - reduces;
    head += fmt::format("; weight preparation: {} kernel{} once{}", n, n == 1 ? "" : "s",
                        costs ? fmt::format(", {} moved", human_bytes(prep_bytes)) : "");
  }
  std::string out = head + "\n";
  for (const std::string& note : plan.notes) out += fmt::format("  graph: {}\n", note);
  out += body;
  if (!views.empty()) out += "  views (aliases, no kernel):\n" + views;
  if (!plan.output_views.empty()) {
    out += "  returned views:\n";
    for (const OutputView& ov : plan.output_views) out += fmt::format("    %{}: {}\n", g.value(ov.value).name, ov.why);
  }
  return out;
}

}  // namespace lj
