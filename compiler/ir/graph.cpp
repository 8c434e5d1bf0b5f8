// Graph accessors and whole-graph queries.
#include "layerjit/graph.h"

#include <algorithm>

#include <fmt/format.h>

#include "layerjit/check.h"
#include "layerjit/error.h"

namespace lj {

const ValueInfo& Graph::value(ValueId id) const {
  LJ_ASSERT(id >= 0 && static_cast<size_t>(id) < values_.size(), "value id {} out of range in @{}", id, name_);
  return values_[static_cast<size_t>(id)];
}

const Node& Graph::node(NodeId id) const {
  LJ_ASSERT(id >= 0 && static_cast<size_t>(id) < nodes_.size(), "node id {} out of range in @{}", id, name_);
  return nodes_[static_cast<size_t>(id)];
}

void Graph::check_sizes(const Bindings& b) const {
  for (const ValueInfo& v : values_) {
    std::vector<int64_t> dims;
    bool bound = true;
    for (const Dim& d : v.type.shape) {
      if (d.is_const()) dims.push_back(d.value());
      else if (const std::optional<int64_t> x = b.get(d.symbol())) dims.push_back(*x);
      else bound = false;
    }
    if (!bound) continue;
    try {
      (void)tensor_bytes(v.type.dtype, dims);
    } catch (const UserError& e) {
      throw UserError(fmt::format("@{}: %{} ({}) at these sizes: {}", name_, v.name, v.type.str(), e.what()));
    }
  }
}

int64_t Graph::param_bytes(const Bindings& b) const {
  int64_t total = 0;
  for (ValueId id : inputs_) {
    const ValueInfo& v = value(id);
    if (v.is_param) total += tensor_bytes(v.type.dtype, resolve(v.type.shape, b));
  }
  return total;
}

std::vector<std::string> Graph::symbols() const {
  std::vector<std::string> out;
  for (ValueId id : inputs_) {
    for (const Dim& d : value(id).type.shape) {
      if (d.is_symbol() && std::find(out.begin(), out.end(), d.symbol()) == out.end()) out.push_back(d.symbol());
    }
  }
  return out;
}

const Graph* Module::find(std::string_view name) const {
  for (const auto& g : graphs)
    if (g.name() == name) return &g;
  return nullptr;
}

}  // namespace lj
