// The text IR printer. Output is deterministic and parses back to an identical graph; each result's
// inferred type follows as a trailing comment.
#include <fmt/format.h>

#include "layerjit/text.h"

namespace lj {

std::string print_node(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string line;
  for (size_t i = 0; i < n.results.size(); ++i) line += fmt::format("{}%{}", i ? ", " : "", g.value(n.results[i]).name);
  line += fmt::format(" = {}(", op_name(n.kind));
  for (size_t i = 0; i < n.operands.size(); ++i) line += fmt::format("{}%{}", i ? ", " : "", g.value(n.operands[i]).name);
  line += ")";
  if (!n.attrs.empty()) {
    line += " {";
    bool first = true;
    for (const auto& [k, v] : n.attrs.items()) {
      line += fmt::format("{}{} = {}", first ? "" : ", ", k, v.str());
      first = false;
    }
    line += "}";
  }
  return line;
}

std::string print_graph(const Graph& g) {
  std::string out = fmt::format("graph @{}(", g.name());
  const auto& ins = g.inputs();
  for (size_t i = 0; i < ins.size(); ++i) {
    const ValueInfo& v = g.value(ins[i]);
    out += fmt::format("\n    %{}: {}{}{}", v.name, v.is_param ? "param " : "", v.type.str(), i + 1 < ins.size() ? "," : "");
  }
  out += ") -> ";
  for (size_t i = 0; i < g.outputs().size(); ++i) out += (i ? ", " : "") + g.value(g.outputs()[i]).type.str();
  out += " {\n";
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes().size()); ++id) {
    const Node& n = g.node(id);
    std::string types;
    for (size_t i = 0; i < n.results.size(); ++i) types += (i ? ", " : "") + g.value(n.results[i]).type.str();
    out += fmt::format("  {}  // {}\n", print_node(g, id), types);
  }
  out += "  return ";
  for (size_t i = 0; i < g.outputs().size(); ++i) out += fmt::format("{}%{}", i ? ", " : "", g.value(g.outputs()[i]).name);
  out += "\n}\n";
  return out;
}

std::string print_module(const Module& m) {
  std::string out;
  for (size_t i = 0; i < m.graphs.size(); ++i) {
    if (i) out += "\n";
    out += print_graph(m.graphs[i]);
  }
  return out;
}

}  // namespace lj
