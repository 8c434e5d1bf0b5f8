// Writes Hugging Face model directories with random weights, as save_pretrained lays them out:
// config.json, the safetensors shards and model.safetensors.index.json (or one model.safetensors),
// tensors under their Hugging Face names. The model-import tests and the GPU tests build their
// models with it; make_hf_model (beside it) wraps it for the CLI tests and scripts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "models/hf_config.h"

namespace lj::testing {

struct HfModelSpec {
  models::Architecture arch = models::Architecture::Llama;
  int64_t hidden = 72;
  int64_t layers = 3;
  int64_t heads = 6;
  int64_t kv_heads = 2;
  std::optional<int64_t> head_dim;  ///< written to the config when set (else hidden / heads)
  int64_t ffn = 100;
  int64_t vocab = 301;
  int64_t max_positions = 512;
  double rope_theta = 10000.0;
  bool llama3_rope = false;  ///< rope_scaling {"rope_type": "llama3", factor 8, low 1, high 4, original 32}
  bool tied = false;
  std::optional<int64_t> sliding_window;  ///< Mistral: written as given (null when unset)
  std::string dtype = "bfloat16";
  int shards = 2;  ///< 1: one model.safetensors
  uint64_t seed = 1;
};

/// The tiny model of each family: hidden 72, 3 layers, 6 query / 2 KV heads, head_dim 12,
/// vocab 301, 2 shards; Llama with Llama-3.1 RoPE, Mistral with a window of 5, Qwen2 with its QKV
/// bias, Qwen3 with head_dim 16 (so heads * head_dim != hidden) and tied embeddings.
HfModelSpec tiny_spec(models::Architecture a);

/// The Llama-3-8B shapes (hidden 4096, 32/8 heads, FFN 14336, vocab 128256) with `layers` layers.
HfModelSpec llama3_8b_spec(int64_t layers);

nlohmann::json hf_config_json(const HfModelSpec& s);

/// Creates `dir` (and parents) and writes the model. Weights: uniform in +-1/sqrt(fan_in) for
/// projections, 1 +- 0.2 for norms, +-0.5 for biases, +-1 for the embedding table.
void write_hf_model(const std::string& dir, const HfModelSpec& s);

/// The tiny model of `a` at shapes whose every projection packs into 8-nibble words and groups of
/// 32 and 64: hidden 128, 4 query / 2 KV heads of 32, FFN 192, 2 layers.
HfModelSpec quant_tiny_spec(models::Architecture a);

/// A 4-bit checkpoint's layout and quantization_config.
struct QuantSpec {
  enum class Format { Awq, Gptq } format = Format::Awq;
  int64_t group = 64;          ///< -1: one group per row (GPTQ's per-channel)
  bool gptq_v1 = true;         ///< checkpoint_format "gptq" (zero points stored minus one) or "gptq_v2"
  bool desc_act = false;       ///< written to the config as given
  bool permuted_g_idx = false; ///< a g_idx that is not k / group (what act-order writes)
  bool zero_of_zero = false;   ///< one zero point 0 (stored as 15 in GPTQ's v1 format)
};

/// Writes `dir` as a 4-bit checkpoint of `s` (every q/k/v/o/gate/up/down projection as qweight,
/// qzeros and f16 scales in the layout, packed as AutoAWQ's and GPTQ's packers do; one shard) and
/// `ref_dir` as the plain checkpoint with the same tensors, except that each projection's weight is
/// the 4-bit one dequantized (round_to(dtype, f32((q - zero) * scale))): the two models compute the
/// same. Codes, zero points (1..14) and scales are random.
void write_quantized_hf_model(const std::string& dir, const std::string& ref_dir, const HfModelSpec& s, const QuantSpec& q);

}  // namespace lj::testing
