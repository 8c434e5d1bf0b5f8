#include "models/model.h"

#include <fmt/format.h>

#include "layerjit/check.h"
#include "layerjit/error.h"

namespace lj::models {

namespace {

// No dtype in the config: the embedding table's is the model's.
void take_dtype_from_weights(ModelConfig& c, const Checkpoint& ck) {
  if (!c.dtype_from_weights) return;
  const CheckpointTensor t = ck.find("model.embed_tokens.weight");
  LJ_CHECK(t.tensor != nullptr, SourceLoc{}, "{}: config.json names no dtype and the checkpoint has no model.embed_tokens.weight to take it from",
           ck.dir());
  LJ_CHECK(t.tensor->dtype == DType::BF16 || t.tensor->dtype == DType::F16 || t.tensor->dtype == DType::F32, SourceLoc{},
           "{}: config.json names no dtype and model.embed_tokens.weight is {}, not a dtype layerjit runs", ck.dir(),
           dtype_name(t.tensor->dtype));
  c.layer.dtype = t.tensor->dtype;
}

}  // namespace

ModelConfig read_model_config_with_dtype(const std::string& dir) {
  ModelConfig c = read_model_config(dir);
  if (c.dtype_from_weights || c.layer.quant) {
    const Checkpoint ck = Checkpoint::open(dir);
    take_dtype_from_weights(c, ck);
    take_scale_dtype(c, ck);
  }
  return c;
}

Model Model::open(const std::string& dir) {
  Model m;
  m.config_ = read_model_config(dir);
  m.checkpoint_ = std::make_unique<Checkpoint>(Checkpoint::open(dir));
  take_dtype_from_weights(m.config_, *m.checkpoint_);
  take_scale_dtype(m.config_, *m.checkpoint_);
  m.graphs_ = model_graphs(m.config_);
  m.embed_ = resolve_params(m.graphs_.embed, embed_param_sources(m.config_), *m.checkpoint_, m.config_);
  m.head_ = resolve_params(m.graphs_.head, head_param_sources(m.config_), *m.checkpoint_, m.config_);
  for (int64_t l = 0; l < m.config_.n_layers; ++l)
    m.layers_.push_back(resolve_params(m.graphs_.prefill, layer_param_sources(m.config_, l), *m.checkpoint_, m.config_));
  return m;
}

uint64_t Model::weight_bytes() const {
  uint64_t n = 0;
  for (const ParamBytes& p : embed_) n += p.bytes;
  for (const auto& layer : layers_)
    for (const ParamBytes& p : layer) n += p.bytes;
  for (const ParamBytes& p : head_)
    if (!(config_.tie_embeddings && p.name == "lm_head")) n += p.bytes;
  return n;
}

void check_generate_request(const ModelConfig& c, const std::vector<int32_t>& prompt, int64_t new_tokens,
                            const std::vector<int32_t>& forced) {
  LJ_CHECK(!prompt.empty(), SourceLoc{}, "the prompt has no token ids");
  for (size_t i = 0; i < prompt.size(); ++i)
    LJ_CHECK(prompt[i] >= 0 && prompt[i] < c.vocab, SourceLoc{}, "token {} of the prompt is {}, outside the vocabulary [0, {})", i,
             prompt[i], c.vocab);
  LJ_CHECK(new_tokens >= 1, SourceLoc{}, "the number of new tokens must be at least 1, got {}", new_tokens);
  for (int32_t id : forced)
    LJ_CHECK(id >= 0 && id < c.vocab, SourceLoc{}, "a forced token is {}, outside the vocabulary [0, {})", id, c.vocab);
  LJ_CHECK(forced.empty() || static_cast<int64_t>(forced.size()) == new_tokens - 1, SourceLoc{},
           "{} forced tokens for {} new ones (one per decode step: {})", forced.size(), new_tokens, new_tokens - 1);
  const int64_t total = static_cast<int64_t>(prompt.size()) + new_tokens;
  LJ_CHECK(total <= c.max_positions, SourceLoc{},
           "{} prompt tokens and {} new ones make {} positions, more than the model's max_position_embeddings ({})", prompt.size(),
           new_tokens, total, c.max_positions);
}

}  // namespace lj::models
