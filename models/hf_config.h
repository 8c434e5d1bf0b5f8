// A Hugging Face model's config.json read into the decoder layer's config (LlamaConfig) and the
// model's own sizes, for the four architectures layerjit builds: LlamaForCausalLM (Llama 2, 3, 3.1,
// 3.2), MistralForCausalLM (sliding-window attention), Qwen2ForCausalLM (QKV bias) and
// Qwen3ForCausalLM (per-head q/k RMSNorm). Every field that changes the computation is either
// honoured or refused by name (docs/models.md lists which); fields that do not (token ids,
// initializer_range, ...) are ignored. Never a silently different model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerjit/llama.h"

namespace lj::models {

enum class Architecture { Llama, Mistral, Qwen2, Qwen3 };

/// The `architectures` entry ("LlamaForCausalLM", ...).
std::string_view architecture_name(Architecture a);

struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  /// The decoder layer: shapes, eps, RoPE, the family's options; `layer.name` is the model's name
  /// (graphs are @<name>_prefill, @<name>_decode, @<name>_embed, @<name>_head).
  LlamaConfig layer;
  int64_t n_layers = 0;
  int64_t vocab = 0;
  /// max_position_embeddings: the longest sequence (prompt and generated tokens) a run may reach.
  int64_t max_positions = 0;
  /// tie_word_embeddings: the LM head is the embedding table.
  bool tie_embeddings = false;
  /// The dtype was not in the config: the caller takes it from the embedding table's tensor.
  bool dtype_from_weights = false;
  /// quantization_config of a 4-bit checkpoint (layer.quant holds what the graphs need; its
  /// scale_dtype is the checkpoint's scales', set by the caller from the first q_proj.scales).
  enum class QuantMethod { None, Awq, Gptq };
  QuantMethod quant_method = QuantMethod::None;
  /// GPTQ's v1 format ("checkpoint_format": "gptq", the default) stores each zero point minus one.
  bool gptq_zeros_minus_one = true;
};

/// Parses config.json text. `where` names the file in errors ("dir/config.json: field 'x': ...");
/// `name` becomes layer.name (an identifier: the directory's name, sanitised). Throws UserError.
ModelConfig parse_model_config(const std::string& json_text, const std::string& where, const std::string& name);

/// Reads DIR/config.json (the model's name from the directory's). Throws UserError.
ModelConfig read_model_config(const std::string& dir);

/// A graph-name stem from a directory path: its last component, with every character outside
/// [A-Za-z0-9_] replaced by '_' and a leading digit prefixed ("Llama-3.2-1B" -> "Llama_3_2_1B").
std::string model_name_from_dir(const std::string& dir);

}  // namespace lj::models
