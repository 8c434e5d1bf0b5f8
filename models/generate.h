// Greedy generation over a Model: the prompt's tokens through every layer at once (prefill), the
// next token the argmax of the last position's logits, then one decode step per further token over
// the KV caches the prefill filled. Token ids in, token ids out: tokenizing is the caller's.
//
// generate_reference runs the graphs through the CPU reference (double precision, every store
// rounded as the GPU rounds): the oracle the GPU run is checked against, for small models only.
#pragma once

#include <cstdint>
#include <vector>

#include "layerjit/host_tensor.h"
#include "models/model.h"

namespace lj::models {

struct GenerateOptions {
  int64_t new_tokens = 1;
  bool keep_logits = false;  ///< fill GenerateResult::logits
  /// Teacher forcing (for comparisons): when not empty (new_tokens - 1 ids), decode step s is fed
  /// forced[s - 1] instead of the token step s - 1 chose; `tokens` still reports each step's choice.
  std::vector<int32_t> forced;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  ///< the new tokens, in order
  /// With keep_logits: f32 [new_tokens, vocab], row s the logits that chose token s (row 0: after
  /// the prompt).
  HostTensor logits;
  /// Wall time of each step in milliseconds: step 0 is the prefill (with its head), the others one
  /// decode step each.
  std::vector<double> step_ms;
};

/// Throws UserError for a bad request (check_generate_request) or a model too large for the
/// reference (its weights as doubles over 4 GiB). `tp` > 1: every layer runs sharded over tp ranks
/// (shard(), run_reference_ranks: each rank's share of the weights and caches, the all-reduces done
/// on the host), the embedding and the head whole: what TpModel computes, for checking the sharding
/// of a whole model on the CPU; a layer that does not shard is the UserError shard() throws.
GenerateResult generate_reference(const Model& m, const std::vector<int32_t>& prompt, const GenerateOptions& opts, int tp = 1);

}  // namespace lj::models
