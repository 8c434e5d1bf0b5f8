#include "models/view_rows.h"

#include <fmt/format.h>

namespace lj::models {

namespace {

int64_t eval(const DimProduct& p, const Bindings& b) {
  int64_t x = p.constant;
  for (const std::string& s : p.symbols) x *= *b.get(s);
  return x;
}

}  // namespace

rt::Result<ValueId> input_named(const Graph& g, const std::string& name) {
  for (ValueId v : g.inputs())
    if (g.value(v).name == name) return v;
  return rt::Error{fmt::format("internal error: @{} has no input %{} (please report)", g.name(), name)};
}

size_t view_offset(const TensorLayout& l, const Bindings& b) { return static_cast<size_t>(eval(l.offset, b)); }

rt::Result<size_t> token_pitch(const TensorLayout& l, const Bindings& b, size_t eb, int64_t head_dim) {
  if (l.strides.size() != 3 || eval(l.strides[2], b) != 1 || eval(l.strides[1], b) != head_dim)
    return rt::Error{"internal error: a returned K/V view is not [T, heads, head_dim] with dense heads (please report)"};
  return static_cast<size_t>(eval(l.strides[0], b)) * eb;
}

}  // namespace lj::models
