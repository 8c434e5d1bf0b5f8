// The built-in Llama-style decoder layer (examples/llama3_decoder.cpp), in two forms:
//   prefill: T tokens of one sequence, causal attention; returns the layer output and the new
//            (rotated) K and V entries for the KV cache;
//   decode:  one token for each of B sequences over a KV cache of capacity C, the new token of
//            sequence b at position pos[b]; returns the output and the updated caches.
#pragma once

#include <string>

#include <optional>

#include "layerjit/graph.h"
#include "layerjit/op_attrs.h"

namespace lj {

struct LlamaConfig {
  std::string name = "llama3_8b";
  int64_t hidden = 4096;
  int64_t n_heads = 32;
  int64_t n_kv_heads = 8;
  int64_t head_dim = 128;
  int64_t ffn = 14336;
  double eps = 1e-5;
  double rope_theta = 500000.0;
  DType dtype = DType::BF16;
  // What the other model families change (models/hf_config.h reads them from a Hugging Face
  // config); the defaults are Llama's, and a config that keeps them builds the graphs it always did.
  attr::RopeScaling rope_scaling;         ///< Llama-3.1's "llama3" bands, or linear
  std::optional<int64_t> sliding_window;  ///< Mistral: each query sees its last W positions
  bool qkv_bias = false;                  ///< Qwen2: %b_qkv [q + 2 kv widths] added to the QKV projection
  bool qk_norm = false;                   ///< Qwen3: RMSNorm of each q and k head (%q_norm, %k_norm [head_dim]) before RoPE
  /// Quantized projection weights (AutoAWQ / GPTQ checkpoints): each of %w_qkv, %w_o, %w_gate_up and
  /// %w_down is then the group-wise dequantize of params %<w>_q (codes [N, K]), %<w>_s (scales
  /// [N, K / group]) and, with zero points, %<w>_z; unset: bf16 / f16 params as always.
  struct WeightQuant {
    DType codes = DType::U4;      ///< u4 (with zero points) or i4 (symmetric)
    int64_t group = 128;          ///< 32, 64 or 128; 0: one group per row (a scale per output channel)
    DType scale_dtype = DType::F16;
    bool zero_points = true;      ///< u4 codes only
  };
  std::optional<WeightQuant> quant;

  static LlamaConfig llama3_8b() { return {}; }
  /// A small config for CPU reference runs: hidden 64, 4 query heads, 2 KV heads, head_dim 16, FFN 160.
  static LlamaConfig small() { return {"llama_small", 64, 4, 2, 16, 160, 1e-5, 500000.0, DType::BF16}; }
};

Graph llama_prefill(const LlamaConfig& c);
Graph llama_decode(const LlamaConfig& c);

}  // namespace lj
