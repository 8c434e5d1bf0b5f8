// The graphs of a whole decoder-only model, built from its ModelConfig: the embedding lookup, the
// decoder layer (prefill over T tokens and decode of one token per sequence over a KV cache, the
// same graphs as the built-in layer's with the family's options), and the head (final RMSNorm, LM
// head in f32, greedy argmax). Every layer runs the same two layer graphs with its own weights and
// caches, so a model of N layers compiles the kernels of one.
//
//   @<m>_embed(%ids: i32[N], %embed_tokens: param [V, H]) -> [N, H]
//   @<m>_prefill / @<m>_decode: examples/llama3_decoder.cpp (the prefill returns the prompt's K and V
//                 rows; the caller stores them as cache rows 0 .. T-1)
//   @<m>_head(%x: [B, H], %norm: param [H], %lm_head: param [V, H]) -> f32[B, V], i32[B]
#pragma once

#include "layerjit/graph.h"
#include "models/hf_config.h"

namespace lj::models {

struct ModelGraphs {
  Graph embed;
  Graph prefill;
  Graph decode;
  Graph head;
};

ModelGraphs model_graphs(const ModelConfig& c);

/// The four graphs as a module, in the order above (what `layerjit plan MODEL_DIR` shows).
Module model_module(const ModelConfig& c);

}  // namespace lj::models
