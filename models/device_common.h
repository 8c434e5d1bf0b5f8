// What DeviceModel and TpModel share: finding a graph input by name, the request checks of
// generate(), and copying a prefill's K or V rows, left a view of a larger buffer, into a KV cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/executable.h"
#include "layerjit/graph.h"
#include "models/generate.h"
#include "runtime/result.h"
#include "runtime/stream.h"

namespace lj::models {

/// Graph input `name` of `g` (an internal error where there is none).
rt::Result<ValueId> input_named(const Graph& g, const std::string& name);

/// check_generate_request, and the prompt plus the new tokens within `capacity` cache positions.
rt::Status check_device_request(const ModelConfig& c, const std::vector<int32_t>& prompt, const GenerateOptions& opts, int64_t capacity);

/// After a prefill run at `pb` (T rows): output `kv` of `prefill`, a [T, heads, head_dim] view with
/// `heads` heads, copied into rows 0 .. T-1 of `cache` ([1, C, heads, head_dim], dense) on `st`.
rt::Status copy_prompt_rows(rt::Stream& st, const exec::Executable& prefill, ValueId kv, const Bindings& pb, DType dtype, int64_t heads,
                            int64_t head_dim, CUdeviceptr cache);

}  // namespace lj::models
