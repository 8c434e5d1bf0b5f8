#include "tools/tp_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "tools/cli.h"

namespace lj::cli {

namespace {
std::string bytes_str(double v) { return v >= 1 << 20 ? fmt::format("{:.1f} MiB", v / (1 << 20)) : fmt::format("{:.1f} KiB", v / 1024); }
}  // namespace

int parse_tp(const std::string& v) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < 1 || n > 64) throw UsageError{fmt::format("--tp expects a rank count from 1 to 64, got '{}'", v)};
  return n;
}

std::string tp_summary(const ShardedGraph& s, const Bindings& b) {
  const Graph& g = s.graph;
  const bool folded = s.others.nodes().size() != g.nodes().size();
  std::string out = folded ? fmt::format("tensor parallel @{}: {} ranks; rank 0 runs the graph below, the others the same without the "
                                         "residual adds folded before the all_reduces (docs/tp.md)\n", g.name(), s.tp)
                           : fmt::format("tensor parallel @{}: {} ranks, each runs the graph below (docs/tp.md)\n", g.name(), s.tp);
  for (ValueId in : g.inputs()) {
    const ShardSpec& spec = s.inputs.at(g.value(in).name);
    if (spec.split()) out += fmt::format("  %{}: {} (a rank holds {})\n", g.value(in).name, spec.str(), g.value(in).type.str());
  }
  int reduces = 0;
  double bytes = 0;
  bool known = true;
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::AllReduce) continue;
    ++reduces;
    const TensorType& t = g.value(n.results[0]).type;
    std::string size = "sizes unbound";
    if (bool bound = std::all_of(t.shape.begin(), t.shape.end(), [&](const Dim& d) { return d.is_const() || b.get(d.symbol()); }); bound) {
      const double v = static_cast<double>(numel(resolve(t.shape, b))) * dtype_bits(t.dtype) / 8;
      bytes += v;
      size = bytes_str(v);
    } else {
      known = false;
    }
    out += fmt::format("  all_reduce %{} ({}): {} per call, a ring moves 2 x {}/{} of it over each link\n", g.value(n.results[0]).name,
                       t.str(), size, s.tp - 1, s.tp);
  }
  out += fmt::format("  communication: {} all_reduce{} per call{}\n", reduces, reduces == 1 ? "" : "s",
                     known && reduces ? fmt::format(", {} in all", bytes_str(bytes)) : "");
  for (const std::string& note : s.notes) out += "  " + note + "\n";
  return out;
}

void shard_module(Module& m, int tp) {
  if (tp == 1) return;
  for (Graph& g : m.graphs) g = shard(g, tp).graph;
}

}  // namespace lj::cli
