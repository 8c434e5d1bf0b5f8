// GraphEditor: a copy of a graph edited node by node, with every value id kept.
#include "compiler/passes/graph_editor.h"

#include <fmt/format.h>

#include "ops/op_schema.h"
#include "layerjit/check.h"

namespace lj {

namespace {
std::vector<TensorType> types_of(const Graph& g, const std::vector<ValueId>& vs) {
  std::vector<TensorType> out;
  for (ValueId v : vs) out.push_back(g.value(v).type);
  return out;
}
}  // namespace

GraphEditor::GraphEditor(const Graph& g) : g_(g), before_(g.nodes().size()) {
  for (const ValueInfo& v : g.values()) names_.insert(v.name);
}

std::string GraphEditor::unique_name(const std::string& stem) const {
  if (!names_.count(stem)) return stem;
  for (int i = 2;; ++i)
    if (std::string n = fmt::format("{}.{}", stem, i); !names_.count(n)) return n;
}

ValueId GraphEditor::insert_before(NodeId before, OpKind kind, const std::vector<ValueId>& operands, const Attrs& attrs,
                                   const std::string& name) {
  LJ_ASSERT(before >= 0 && static_cast<size_t>(before) < before_.size(), "insert before node {} of @{}: no such node", before, g_.name_);
  LJ_ASSERT(!names_.count(name), "insert %{} into @{}: the name is taken", name, g_.name_);
  Node n;
  n.kind = kind;
  n.operands = operands;
  n.attrs = check_attrs(kind, attrs);
  const std::vector<TensorType> types = infer_types(kind, types_of(g_, operands), n.attrs);
  LJ_ASSERT(types.size() == 1, "insert_before makes ops of one result, {} has {}", op_name(kind), types.size());
  n.loc = g_.node(before).loc;
  ValueInfo v;
  v.name = name;
  v.type = types[0];
  v.loc = n.loc;
  const auto id = static_cast<ValueId>(g_.values_.size());
  g_.values_.push_back(std::move(v));
  names_.insert(name);
  n.results = {id};
  before_[static_cast<size_t>(before)].push_back(std::move(n));
  return id;
}

void GraphEditor::replace(NodeId id, OpKind kind, const std::vector<ValueId>& operands, const Attrs& attrs,
                          const std::vector<std::string>& names) {
  Node& n = g_.nodes_.at(static_cast<size_t>(id));
  const Attrs checked = check_attrs(kind, attrs);
  const std::vector<TensorType> types = infer_types(kind, types_of(g_, operands), checked);
  LJ_ASSERT(types.size() == n.results.size(), "replace node {} of @{}: {} makes {} results, the node has {}", id, g_.name_,
            op_name(kind), types.size(), n.results.size());
  LJ_ASSERT(names.empty() || names.size() == n.results.size(), "replace node {} of @{}: {} names for {} results", id, g_.name_,
            names.size(), n.results.size());
  n.kind = kind;
  n.operands = operands;
  n.attrs = checked;
  for (size_t i = 0; i < types.size(); ++i) {
    ValueInfo& v = g_.values_[static_cast<size_t>(n.results[i])];
    v.type = types[i];
    if (!names.empty() && names[i] != v.name) {
      LJ_ASSERT(!names_.count(names[i]), "rename %{} to %{} in @{}: the name is taken", v.name, names[i], g_.name_);
      names_.erase(v.name);
      v.name = names[i];
      names_.insert(v.name);
    }
  }
}

Graph GraphEditor::finish() {
  std::vector<Node> nodes;
  for (size_t i = 0; i < g_.nodes_.size(); ++i) {
    for (Node& n : before_[i]) nodes.push_back(std::move(n));
    nodes.push_back(std::move(g_.nodes_[i]));
  }
  before_.assign(before_.size(), {});
  std::vector<bool> defined(g_.values_.size(), false);
  for (ValueId v : g_.inputs_) defined[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].operands)
      LJ_ASSERT(defined[static_cast<size_t>(v)], "edited @{}: %{} is used by a {} before it is defined", g_.name_,
                g_.values_[static_cast<size_t>(v)].name, op_name(nodes[i].kind));
    for (size_t r = 0; r < nodes[i].results.size(); ++r) {
      ValueInfo& v = g_.values_[static_cast<size_t>(nodes[i].results[r])];
      v.producer = static_cast<NodeId>(i);
      v.result_index = static_cast<int>(r);
      defined[static_cast<size_t>(nodes[i].results[r])] = true;
    }
  }
  g_.nodes_ = std::move(nodes);
  return std::move(g_);
}

}  // namespace lj
