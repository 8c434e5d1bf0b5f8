// Hugging Face models through the public API: a model directory (config.json plus model.safetensors,
// or shards through model.safetensors.index.json) opened and checked, its graphs to plan, compile and
// inspect like any other, and greedy generation on the CPU reference or on a device. Token ids in,
// token ids out: tokenizing is the caller's. docs/models.md lists the architectures and the config
// fields honoured and refused.
//
//   lj::Model m = lj::Model::open("/models/Llama-3.2-1B");
//   lj::ModelRunner r = lj::ModelRunner::open(lj::Device::open(0), m);
//   lj::Generation out = r.generate({128000, 791, 6864, 315}, {.new_tokens = 32});
//
// Errors as in layerjit.h: UserError for the directory or the request (a refused config field, a
// missing shard or tensor, a tensor of the wrong shape, a token outside the vocabulary, a sequence
// past max_position_embeddings), RuntimeError for the machine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/host_tensor.h"
#include "layerjit/layerjit.h"
#include "layerjit/types.h"

namespace lj {

/// What a model directory's config.json made of the model.
struct ModelInfo {
  std::string name;          ///< the graphs' prefix: @<name>_embed, _prefill, _decode, _head
  std::string architecture;  ///< "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0, vocab = 0;
  int64_t max_positions = 0;   ///< max_position_embeddings: prompt plus generated tokens at most
  int64_t sliding_window = 0;  ///< Mistral's window of keys per query (0: none)
  bool tied_embeddings = false;
  bool qkv_bias = false;  ///< Qwen2
  bool qk_norm = false;   ///< Qwen3
  DType dtype = DType::BF16;
  uint64_t weight_bytes = 0;  ///< every distinct weight (a tied head counted once)
};

struct GenerateSettings {
  int64_t new_tokens = 8;
  bool keep_logits = false;  ///< fill Generation::logits
};

struct Generation {
  std::vector<int32_t> tokens;  ///< the new tokens, in order
  HostTensor logits;            ///< with keep_logits: f32 [new_tokens, vocab], row 0 after the prompt
  std::vector<double> step_ms;  ///< wall time per step: [0] the prefill, then one per decode step
};

class Model {
 public:
  /// Reads and checks config.json and every header of the checkpoint; the weights stay mapped.
  static Model open(const std::string& dir);
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelInfo& info() const;
  /// The embedding, prefill, decode and head graphs (what `layerjit print MODEL_DIR` prints), to
  /// plan or compile like any graph. A layer graph's params are one layer's weights.
  std::vector<Graph> graphs() const;
  /// Checkpoint tensors the model does not use (old checkpoints carry rotary_emb.inv_freq).
  std::vector<std::string> unused_tensors() const;
  /// Greedy generation through the CPU reference (double precision, rounded as the GPU rounds):
  /// small models only (UserError past 4 GiB of weights as doubles); needs no GPU.
  /// `tensor_parallel` > 1: every layer sharded over that many ranks, the all-reduces done on the
  /// host (docs/tp.md): what a tensor-parallel ModelRunner computes, to check a model shards.
  Generation generate_cpu(const std::vector<int32_t>& prompt, const GenerateSettings& settings = {}, int tensor_parallel = 1) const;

 private:
  friend class ModelRunner;
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ModelRunnerSettings {
  /// KV-cache positions per layer (0: max_position_embeddings, at most 4096).
  int64_t capacity = 0;
  bool cuda_graphs = true;  ///< each decode step after the first a CUDA-graph replay
  bool fuse = true;
  bool use_tuned = true;  ///< `layerjit tune`'s stored winners
  /// Tensor parallelism over this many GPUs, the device given and the ones after it (docs/tp.md):
  /// every layer sharded, NCCL between the GPUs (loaded at run time; LAYERJIT_NCCL names it).
  int tensor_parallel = 1;
};

/// A Model on a device: its kernels compiled (through the kernel cache), every weight uploaded, the
/// KV caches allocated. The Model must outlive it.
class ModelRunner {
 public:
  static ModelRunner open(const Device& device, const Model& model, const ModelRunnerSettings& settings = {});
  ModelRunner(ModelRunner&&) noexcept;
  ModelRunner& operator=(ModelRunner&&) noexcept;
  ~ModelRunner();

  /// Prefill of the prompt, then new_tokens - 1 decode steps; the same request checks and result
  /// as Model::generate_cpu. The prefill kernels are built for each new prompt length.
  Generation generate(const std::vector<int32_t>& prompt, const GenerateSettings& settings = {});
  int64_t capacity() const;
  size_t launches_per_decode_step() const;
  double compile_seconds() const;  ///< compiling and loading at open

 private:
  struct Impl;
  explicit ModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lj
