#include "models/device_common.h"

#include <fmt/format.h>

#include "layerjit/error.h"
#include "models/model.h"
#include "runtime/memory.h"

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

rt::Status check_device_request(const ModelConfig& c, const std::vector<int32_t>& prompt, const GenerateOptions& opts, int64_t capacity) {
  try {
    check_generate_request(c, prompt, opts.new_tokens, opts.forced);
  } catch (const UserError& e) {
    return rt::Error{e.what()};
  }
  const auto t_len = static_cast<int64_t>(prompt.size());
  if (t_len + opts.new_tokens > capacity)
    return rt::Error{fmt::format("{} prompt tokens and {} new ones need {} cache positions; the model was opened with {}", t_len,
                                 opts.new_tokens, t_len + opts.new_tokens, capacity)};
  return {};
}

rt::Status copy_prompt_rows(rt::Stream& st, const exec::Executable& prefill, ValueId kv, const Bindings& pb, DType dtype, int64_t heads,
                            int64_t head_dim, CUdeviceptr cache) {
  const TensorLayout& l = prefill.layout(kv);
  if (l.strides.size() != 3 || eval(l.strides[2], pb) != 1 || eval(l.strides[1], pb) != head_dim)
    return rt::Error{"internal error: a returned K/V view is not [T, heads, head_dim] with dense heads (please report)"};
  const auto eb = static_cast<size_t>(dtype_bytes(dtype));
  const size_t row = static_cast<size_t>(heads * head_dim) * eb, pitch = static_cast<size_t>(eval(l.strides[0], pb)) * eb;
  LJ_RT_ASSIGN(const CUdeviceptr base, prefill.buffer_address(kv, pb));
  return rt::copy_rows_on_device(st, cache, row, base + static_cast<size_t>(eval(l.offset, pb)) * eb, pitch, row,
                                 static_cast<size_t>(*pb.get("T")));
}

}  // namespace lj::models
