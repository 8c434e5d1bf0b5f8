// A Hugging Face model directory opened: its config read, its graphs built, every weight of every
// layer found in the checkpoint and checked against the config (names, dtypes, shapes), nothing
// copied yet (the data stays memory-mapped until a run binds it).
#pragma once

#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/hf_config.h"
#include "models/model_graphs.h"
#include "models/weight_map.h"

namespace lj::models {

class Model {
 public:
  /// Throws UserError: a missing or refused config field, a missing shard or tensor, a tensor whose
  /// dtype or shape is not what the config makes of it.
  static Model open(const std::string& dir);

  const ModelConfig& config() const { return config_; }
  const ModelGraphs& graphs() const { return graphs_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  /// The params of the embedding graph, of the layer graphs for layer l (both layer graphs have the
  /// same params), and of the head graph.
  const std::vector<ParamBytes>& embed_params() const { return embed_; }
  const std::vector<ParamBytes>& layer_params(int64_t l) const { return layers_.at(static_cast<size_t>(l)); }
  const std::vector<ParamBytes>& head_params() const { return head_; }
  /// Checkpoint tensors the model does not use (sorted): a note for the user, not an error (old
  /// checkpoints carry rotary_emb.inv_freq, tied ones may carry lm_head.weight).
  std::vector<std::string> unused_tensors() const { return checkpoint_->unused(); }
  /// Bytes of every distinct weight (a tied LM head counted once).
  uint64_t weight_bytes() const;

 private:
  ModelConfig config_;
  ModelGraphs graphs_;
  std::unique_ptr<Checkpoint> checkpoint_;  // stable address: ParamBytes point into its files
  std::vector<ParamBytes> embed_, head_;
  std::vector<std::vector<ParamBytes>> layers_;
};

/// The model's config as its graphs need it: read_model_config, and where config.json names no
/// dtype, the embedding table's dtype from the checkpoint's header (no weight data is read).
ModelConfig read_model_config_with_dtype(const std::string& dir);

/// Checks a prompt and a generation length against the model: a non-empty prompt, every id in
/// [0, vocab), new >= 1, and prompt + new within max_position_embeddings; forced tokens (teacher
/// forcing, GenerateOptions::forced) in the vocabulary, one per decode step. Throws UserError.
void check_generate_request(const ModelConfig& c, const std::vector<int32_t>& prompt, int64_t new_tokens,
                            const std::vector<int32_t>& forced = {});

}  // namespace lj::models
