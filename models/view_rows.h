// Small pieces DeviceModel and TpModel share: finding a graph input by name, and where the rows of
// a [T, heads, head_dim] view (a prefill's returned K or V) lie in its buffer, for copying them into
// a KV cache.
#pragma once

#include <string>

#include "compiler/fusion/tensor_layout.h"
#include "layerjit/graph.h"
#include "runtime/result.h"

namespace lj::models {

/// Graph input `name` of `g` (an internal error where there is none).
rt::Result<ValueId> input_named(const Graph& g, const std::string& name);

/// A [T, heads, head_dim] view's first element (in elements) at the sizes `b`.
size_t view_offset(const TensorLayout& l, const Bindings& b);

/// The same view's token stride in bytes (elements of `eb` bytes); an internal error unless its
/// heads and head elements are dense within a token.
rt::Result<size_t> token_pitch(const TensorLayout& l, const Bindings& b, size_t eb, int64_t head_dim);

}  // namespace lj::models
