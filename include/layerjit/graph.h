// The IR graph: SSA values and immutable op nodes, owned by a Graph and created only by the
// GraphBuilder (builder.h), which verifies and infers types at creation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerjit/attrs.h"
#include "layerjit/error.h"
#include "layerjit/op_kind.h"
#include "layerjit/types.h"

namespace lj {

using NodeId = int32_t;  // ValueId: layerjit/types.h

/// An SSA value: a graph input (activation or param) or one result of a node.
struct ValueInfo {
  std::string name;       // printed as %name; unique in its graph
  TensorType type;
  NodeId producer = -1;   // -1 for graph inputs
  int result_index = 0;
  bool is_param = false;  // weights: constant across calls
  SourceLoc loc;
};

/// One op application. Immutable once made by the builder.
struct Node {
  OpKind kind;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  Attrs attrs;
  SourceLoc loc;
};

class Graph {
 public:
  const std::string& name() const { return name_; }
  const std::vector<ValueInfo>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const ValueInfo& value(ValueId id) const;
  const Node& node(NodeId id) const;
  const SourceLoc& loc() const { return loc_; }

  /// Sum of the sizes of all param inputs for the given symbol bindings (params are usually static).
  int64_t param_bytes(const Bindings& b = {}) const;
  /// Every value whose symbols `b` binds must fit: a UserError names the first whose bytes at those
  /// sizes overflow int64 (T = 2^56 makes a [T, 4096] bf16 value 2^69 bytes).
  void check_sizes(const Bindings& b) const;
  /// Symbols used by any input shape, in order of first appearance.
  std::vector<std::string> symbols() const;

 private:
  friend class GraphBuilder;
  friend class GraphEditor;  // graph-to-graph passes that keep every value's id (compiler/passes)
  std::string name_;
  SourceLoc loc_;
  std::vector<ValueInfo> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
};

/// A text IR file holds one or more graphs.
struct Module {
  std::vector<Graph> graphs;
  const Graph* find(std::string_view name) const;
};

}  // namespace lj
