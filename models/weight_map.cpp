// The Hugging Face names of the four families (they share Llama's), and the checks of each part.
#include "models/weight_map.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layerjit/check.h"
#include "layerjit/error.h"
#include "runtime/host_values.h"

namespace lj::models {

std::vector<ParamSource> layer_param_sources(const ModelConfig& c, int64_t layer) {
  const LlamaConfig& l = c.layer;
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t q = l.n_heads * l.head_dim, kv = l.n_kv_heads * l.head_dim;
  std::vector<ParamSource> s = {
      {"attn_norm", {{p + "input_layernorm.weight", l.hidden}}},
      {"w_qkv", {{p + "self_attn.q_proj.weight", q}, {p + "self_attn.k_proj.weight", kv}, {p + "self_attn.v_proj.weight", kv}}},
      {"w_o", {{p + "self_attn.o_proj.weight", l.hidden}}},
      {"mlp_norm", {{p + "post_attention_layernorm.weight", l.hidden}}},
      {"w_gate_up", {{p + "mlp.gate_proj.weight", l.ffn}, {p + "mlp.up_proj.weight", l.ffn}}},
      {"w_down", {{p + "mlp.down_proj.weight", l.hidden}}},
  };
  if (l.qkv_bias)
    s.push_back({"b_qkv", {{p + "self_attn.q_proj.bias", q}, {p + "self_attn.k_proj.bias", kv}, {p + "self_attn.v_proj.bias", kv}}});
  if (l.qk_norm) {
    s.push_back({"q_norm", {{p + "self_attn.q_norm.weight", l.head_dim}}});
    s.push_back({"k_norm", {{p + "self_attn.k_norm.weight", l.head_dim}}});
  }
  return s;
}

std::vector<ParamSource> embed_param_sources(const ModelConfig& c) {
  return {{"embed_tokens", {{"model.embed_tokens.weight", c.vocab}}}};
}

std::vector<ParamSource> head_param_sources(const ModelConfig& c) {
  return {{"norm", {{"model.norm.weight", c.layer.hidden}}},
          {"lm_head", {{c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", c.vocab}}}};
}

std::vector<ParamBytes> resolve_params(const Graph& g, const std::vector<ParamSource>& sources, const Checkpoint& ck) {
  std::vector<ParamBytes> out;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    if (!info.is_param) continue;
    const ParamSource* src = nullptr;
    for (const ParamSource& s : sources)
      if (s.param == info.name) src = &s;
    LJ_ASSERT(src != nullptr, "no checkpoint source for %{} of @{}", info.name, g.name());
    ParamBytes pb;
    pb.param = v;
    pb.name = info.name;
    pb.type = info.type;
    std::vector<int64_t> rest;  // the param's shape after axis 0, which every part shares
    for (size_t i = 1; i < info.type.shape.size(); ++i) rest.push_back(info.type.shape[i].value());
    const int64_t row_bytes = numel(rest) * dtype_bytes(info.type.dtype);
    for (const TensorPart& part : src->parts) {
      const std::string why = src->parts.size() == 1 ? fmt::format("the weight %{} of @{}", info.name, g.name())
                                                     : fmt::format("part of the weight %{} of @{}", info.name, g.name());
      const CheckpointTensor t = ck.take(part.name, why);
      std::vector<int64_t> want = {part.rows};
      want.insert(want.end(), rest.begin(), rest.end());
      LJ_CHECK(t.tensor->dtype == info.type.dtype && t.tensor->shape == want, SourceLoc{},
               "{}: tensor '{}' is {}[{}] but the config makes it {}[{}] ({})", t.file->path(), part.name, dtype_name(t.tensor->dtype),
               fmt::join(t.tensor->shape, ", "), dtype_name(info.type.dtype), fmt::join(want, ", "), why);
      pb.parts.push_back({t.file->mapped(*t.tensor), pb.bytes});
      pb.bytes += static_cast<uint64_t>(part.rows * row_bytes);
    }
    LJ_ASSERT(pb.bytes == static_cast<uint64_t>(numel(resolve(info.type.shape, Bindings{})) * dtype_bytes(info.type.dtype)),
              "the parts of %{} do not fill it", info.name);
    out.push_back(std::move(pb));
  }
  return out;
}

HostTensor to_host(const ParamBytes& p) {
  std::vector<int64_t> shape;
  for (const Dim& d : p.type.shape) shape.push_back(d.value());
  HostTensor h(p.type.dtype, shape);
  const size_t eb = static_cast<size_t>(dtype_bytes(p.type.dtype));
  for (const ParamBytes::Part& part : p.parts) {
    const size_t first = static_cast<size_t>(part.offset) / eb;
    for (size_t i = 0; i < part.data.size() / eb; ++i) h.data[first + i] = rt::decode_element(p.type.dtype, part.data.data() + i * eb);
  }
  return h;
}

}  // namespace lj::models
