// Fusion legality predicates: op classes, use maps, cycle checks, iteration spaces.
#include "compiler/fusion/legality.h"

#include <algorithm>

namespace lj {

bool is_view(OpKind k) {
  switch (k) {
    case OpKind::Reshape:
    case OpKind::Split: return true;
    case OpKind::Matmul:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Exp:
    case OpKind::Rsqrt:
    case OpKind::Cast:
    case OpKind::RmsNorm:
    case OpKind::LayerNorm:
    case OpKind::RopeTable:
    case OpKind::Rope:
    case OpKind::Softmax:
    case OpKind::Attention:
    case OpKind::KvCacheWrite:
    case OpKind::Transpose:
    case OpKind::Concat:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMean:
    case OpKind::Quantize:
    case OpKind::Dequantize: return false;
  }
  LJ_ASSERT(false, "unhandled op kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

bool is_elementwise(OpKind k) {
  switch (k) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Silu:
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Exp:
    case OpKind::Rsqrt:
    case OpKind::Cast:
    case OpKind::Quantize:  // with a scale operand; without one it is a reduction (is_pointwise)
    case OpKind::Dequantize: return true;
    case OpKind::Matmul:
    case OpKind::RmsNorm:
    case OpKind::LayerNorm:
    case OpKind::RopeTable:
    case OpKind::Rope:
    case OpKind::Softmax:
    case OpKind::Attention:
    case OpKind::KvCacheWrite:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Split:
    case OpKind::Concat:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMean: return false;
  }
  LJ_ASSERT(false, "unhandled op kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

bool is_row_reduction(OpKind k) { return k == OpKind::RmsNorm || k == OpKind::LayerNorm || k == OpKind::Softmax; }

bool is_dynamic_quantize(const Node& n) { return n.kind == OpKind::Quantize && n.operands.size() == 1; }

bool is_pointwise(const Node& n) { return is_elementwise(n.kind) && !is_dynamic_quantize(n); }

bool is_row_quantize(const Graph& g, const Node& n) {
  if (!is_dynamic_quantize(n) || g.value(n.operands[0]).type.rank() != 2) return false;
  const auto* axis = std::get_if<int64_t>(&n.attrs.find("axis")->v);
  return axis && (*axis == 0 || *axis == -2);
}

UseMap::UseMap(const Graph& g) : users_(g.values().size()), is_output_(g.values().size(), false) {
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes().size()); ++n) {
    for (ValueId v : g.node(n).operands) {
      auto& u = users_[static_cast<size_t>(v)];
      if (u.empty() || u.back() != n) u.push_back(n);
    }
  }
  for (ValueId v : g.outputs()) is_output_[static_cast<size_t>(v)] = true;
}

bool creates_cycle(const Graph& g, const UseMap& uses, const std::vector<NodeId>& group, NodeId candidate) {
  std::vector<NodeId> members = group;
  members.push_back(candidate);
  // Views of a member's results are aliases of memory the group writes (or keeps): no kernel of their
  // own, so a path through them does not leave the group (silu(split(matmul)[0]) joining the matmul).
  for (size_t i = 0; i < members.size(); ++i)
    for (ValueId r : g.node(members[i]).results)
      for (NodeId u : uses.users(r))
        if (is_view(g.node(u).kind) && std::find(members.begin(), members.end(), u) == members.end()) members.push_back(u);
  auto inside = [&](NodeId n) { return std::find(members.begin(), members.end(), n) != members.end(); };
  // Walk forward from every edge that leaves the would-be group; reaching a member again is a cycle.
  std::vector<bool> seen(g.nodes().size(), false);
  std::vector<NodeId> stack;
  for (NodeId m : members)
    for (ValueId r : g.node(m).results)
      for (NodeId u : uses.users(r))
        if (!inside(u) && !seen[static_cast<size_t>(u)]) {
          seen[static_cast<size_t>(u)] = true;
          stack.push_back(u);
        }
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (ValueId r : g.node(n).results) {
      for (NodeId u : uses.users(r)) {
        if (inside(u)) return true;
        if (!seen[static_cast<size_t>(u)]) {
          seen[static_cast<size_t>(u)] = true;
          stack.push_back(u);
        }
      }
    }
  }
  return false;
}

bool same_iteration_space(const Graph& g, NodeId a, NodeId b) {
  const TensorType& ta = g.value(g.node(a).results[0]).type;
  const TensorType& tb = g.value(g.node(b).results[0]).type;
  return ta.shape == tb.shape;
}

}  // namespace lj
