// GraphEditor: rewrites a copy of a graph in place of new construction, for passes whose result must
// keep every value id of the original (the executable binds the caller's inputs and outputs by the
// ids of the graph the caller built). Values are only added or retyped, never removed; nodes may be
// replaced (keeping their result ids) or inserted before another node. Every change is verified as
// the builder verifies a new op.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "layerjit/graph.h"

namespace lj {

class GraphEditor {
 public:
  explicit GraphEditor(const Graph& g);

  const Graph& graph() const { return g_; }
  /// A name not yet used in the graph: `stem`, else `stem.2`, `stem.3`, ...
  std::string unique_name(const std::string& stem) const;
  /// Inserts `kind(operands) {attrs}` before node `before` (an index into the original nodes); its one
  /// result, named `name`, is a new value (appended after every existing id). Returns its id.
  ValueId insert_before(NodeId before, OpKind kind, const std::vector<ValueId>& operands, const Attrs& attrs, const std::string& name);
  /// Makes node `n` compute `kind(operands) {attrs}` instead; its results keep their ids and take the
  /// new types (and `names`, when given).
  void replace(NodeId n, OpKind kind, const std::vector<ValueId>& operands, const Attrs& attrs,
               const std::vector<std::string>& names = {});
  /// The edited graph: nodes in order (inserted ones before their anchors), producers renumbered.
  /// Asserts every operand is defined before its use.
  Graph finish();

 private:
  Graph g_;
  std::vector<std::vector<Node>> before_;  // per original node: the nodes inserted before it
  std::set<std::string> names_;
};

}  // namespace lj
