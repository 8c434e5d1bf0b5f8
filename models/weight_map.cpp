// The Hugging Face names of the four families (they share Llama's), and the checks of each part.
#include "models/weight_map.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "layerjit/check.h"
#include "layerjit/error.h"
#include "models/quant_repack.h"
#include "runtime/host_values.h"

namespace lj::models {

std::vector<ParamSource> layer_param_sources(const ModelConfig& c, int64_t layer) {
  const LlamaConfig& l = c.layer;
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t q = l.n_heads * l.head_dim, kv = l.n_kv_heads * l.head_dim;
  struct Projection {
    std::string param;
    std::vector<TensorPart> parts;
    int64_t k;
  };
  const std::vector<Projection> projections = {
      {"w_qkv", {{p + "self_attn.q_proj", q}, {p + "self_attn.k_proj", kv}, {p + "self_attn.v_proj", kv}}, l.hidden},
      {"w_o", {{p + "self_attn.o_proj", l.hidden}}, q},
      {"w_gate_up", {{p + "mlp.gate_proj", l.ffn}, {p + "mlp.up_proj", l.ffn}}, l.hidden},
      {"w_down", {{p + "mlp.down_proj", l.hidden}}, l.ffn},
  };
  std::vector<ParamSource> s = {
      {"attn_norm", {{p + "input_layernorm.weight", l.hidden}}},
      {"mlp_norm", {{p + "post_attention_layernorm.weight", l.hidden}}},
  };
  for (const auto& [name, parts, k] : projections) {
    if (l.quant) {
      s.push_back({name + "_q", parts, ParamSource::Quant::Codes, k});
      s.push_back({name + "_s", parts, ParamSource::Quant::Scales, k});
      if (l.quant->zero_points) s.push_back({name + "_z", parts, ParamSource::Quant::Zeros, k});
    } else {
      std::vector<TensorPart> weights = parts;
      for (TensorPart& t : weights) t.name += ".weight";
      s.push_back({name, weights});
    }
  }
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

namespace {

// One checkpoint tensor of a 4-bit projection, checked against the shape its layout implies.
std::span<const unsigned char> quant_tensor(const Checkpoint& ck, const std::string& name, DType want_dtype, std::vector<int64_t> want,
                                           std::string_view why, DType* dtype_out = nullptr) {
  const CheckpointTensor t = ck.take(name, why);
  const bool dtype_ok = dtype_out ? (t.tensor->dtype == DType::F16 || t.tensor->dtype == DType::BF16 || t.tensor->dtype == DType::F32)
                                  : t.tensor->dtype == want_dtype;
  LJ_CHECK(dtype_ok && t.tensor->shape == want, SourceLoc{}, "{}: tensor '{}' is {}[{}] but the config makes it {}[{}] ({})",
           t.file->path(), name, dtype_name(t.tensor->dtype), fmt::join(t.tensor->shape, ", "),
           dtype_out ? "f16/bf16/f32" : dtype_name(want_dtype), fmt::join(want, ", "), why);
  if (dtype_out) *dtype_out = t.tensor->dtype;
  return t.file->mapped(*t.tensor);
}

// The repacked codes, scales and zero points of projection `prefix` ([rows, k]).
RepackedWeight repack_projection(const ModelConfig& c, const Checkpoint& ck, const std::string& prefix, int64_t rows, int64_t k,
                                 std::string_view why) {
  const LlamaConfig::WeightQuant& q = *c.layer.quant;
  const QuantLayout layout = c.quant_method == ModelConfig::QuantMethod::Awq ? QuantLayout::Awq : QuantLayout::Gptq;
  QuantTensors t;
  t.name = prefix;
  t.n = rows;
  t.k = k;
  t.group = q.group;
  const int64_t groups = q.group ? k / q.group : 1;
  LJ_CHECK(rows % 8 == 0 && k % 8 == 0 && (q.group == 0 || k % q.group == 0), SourceLoc{},
           "{}: a 4-bit projection of {} outputs and {} inputs does not pack into 8-nibble words{}", prefix, rows, k,
           q.group ? fmt::format(" in groups of {}", q.group) : "");
  if (layout == QuantLayout::Awq) t.qweight = quant_tensor(ck, prefix + ".qweight", DType::I32, {k, rows / 8}, why);
  else t.qweight = quant_tensor(ck, prefix + ".qweight", DType::I32, {k / 8, rows}, why);
  t.qzeros = quant_tensor(ck, prefix + ".qzeros", DType::I32, {groups, rows / 8}, why);
  t.scales = quant_tensor(ck, prefix + ".scales", DType::F16, {groups, rows}, why, &t.scale_dtype);
  LJ_CHECK(t.scale_dtype == q.scale_dtype, SourceLoc{}, "{}.scales is {} but the model's first q_proj.scales is {}", prefix,
           dtype_name(t.scale_dtype), dtype_name(q.scale_dtype));
  if (layout == QuantLayout::Gptq) {
    if (ck.find(prefix + ".g_idx").tensor) t.g_idx = quant_tensor(ck, prefix + ".g_idx", DType::I32, {k}, why);
    t.zeros_minus_one = c.gptq_zeros_minus_one;
  }
  return repack(layout, t);
}

}  // namespace

void take_scale_dtype(ModelConfig& c, const Checkpoint& ck) {
  if (!c.layer.quant) return;
  const std::string name = "model.layers.0.self_attn.q_proj.scales";
  const CheckpointTensor t = ck.find(name);
  LJ_CHECK(t.tensor != nullptr, SourceLoc{}, "{}: a 4-bit checkpoint (quantization_config) without {}", ck.dir(), name);
  c.layer.quant->scale_dtype = t.tensor->dtype;
}

std::vector<ParamBytes> resolve_params(const Graph& g, const std::vector<ParamSource>& sources, const Checkpoint& ck,
                                       const ModelConfig& c) {
  std::vector<ParamBytes> out;
  std::map<std::string, RepackedWeight> repacked;  // by projection prefix: its three params share one repack
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
    if (src->quant != ParamSource::Quant::None) {
      const int64_t k = src->k;
      auto bytes = std::make_shared<std::vector<unsigned char>>();
      for (const TensorPart& part : src->parts) {
        auto it = repacked.find(part.name);
        if (it == repacked.end())
          it = repacked.emplace(part.name, repack_projection(c, ck, part.name, part.rows, k,
                                                             fmt::format("the 4-bit weight %{} of @{}", info.name, g.name()))).first;
        const RepackedWeight& r = it->second;
        const std::vector<unsigned char>& b = src->quant == ParamSource::Quant::Codes    ? r.codes
                                              : src->quant == ParamSource::Quant::Scales ? r.scales
                                                                                         : r.zeros;
        bytes->insert(bytes->end(), b.begin(), b.end());
      }
      pb.bytes = bytes->size();
      pb.parts.push_back({std::span<const unsigned char>(*bytes), 0});
      pb.owned = std::move(bytes);
      LJ_ASSERT(pb.bytes == static_cast<uint64_t>(tensor_bytes(info.type.dtype, resolve(info.type.shape, Bindings{}))),
                "the repacked parts of %{} do not fill it", info.name);
      out.push_back(std::move(pb));
      continue;
    }
    std::vector<int64_t> rest;  // the param's shape after axis 0, which every part shares
    for (size_t i = 1; i < info.type.shape.size(); ++i) rest.push_back(info.type.shape[i].value());
    const int64_t row_bytes = tensor_bytes(info.type.dtype, rest);
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
    LJ_ASSERT(pb.bytes == static_cast<uint64_t>(tensor_bytes(info.type.dtype, resolve(info.type.shape, Bindings{}))),
              "the parts of %{} do not fill it", info.name);
    out.push_back(std::move(pb));
  }
  return out;
}

HostTensor to_host(const ParamBytes& p) {
  std::vector<int64_t> shape;
  for (const Dim& d : p.type.shape) shape.push_back(d.value());
  HostTensor h(p.type.dtype, shape);
  const auto bits = static_cast<size_t>(dtype_bits(p.type.dtype));
  for (const ParamBytes::Part& part : p.parts) {
    const size_t first = static_cast<size_t>(part.offset) * 8 / bits;
    for (size_t i = 0; i < part.data.size() * 8 / bits; ++i) h.data[first + i] = rt::decode_at(p.type.dtype, part.data.data(), i);
  }
  return h;
}

}  // namespace lj::models
