// A Model on the GPU: its four graphs compiled once (through the kernel cache), every layer's
// weights uploaded into buffers of its own (q/k/v and gate/up stacked as they are copied from the
// mapped checkpoint), one binding set per layer in the prefill and decode executables (the kernels
// and the arena shared, the weights, their folded-norm preparations and the KV caches per layer).
//
// generate(): the prefill (embedding, every layer over the prompt with its K and V rows stored as
// cache positions 0 .. T-1, the head on the last position), then the decode steps. The first decode
// step runs eagerly (it sizes every buffer); the whole step - embedding of the previous step's
// token read from the device, every layer, the head writing the next token - is then captured as one
// CUDA graph and each further step is one replay after the new position is written.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "exec/executable.h"
#include "models/generate.h"
#include "runtime/context.h"
#include "runtime/memory.h"
#include "runtime/stream.h"

namespace lj::models {

struct DeviceModelOptions {
  exec::BuildOptions build;  ///< fusion, cache, tuned configs (the hint is set per graph)
  int64_t capacity = 0;      ///< KV-cache positions per layer (0: the config's max_position_embeddings, at most 4096)
  bool graphs = true;        ///< decode steps as CUDA-graph replays (false: every step eagerly)
};

class DeviceModel {
 public:
  /// Compiles the embedding, decode and head graphs, uploads every weight and allocates the caches.
  /// `m` must outlive it.
  static rt::Result<DeviceModel> open(rt::Context& ctx, const Model& m, const DeviceModelOptions& opts);

  /// Greedy generation as generate_reference does it (same request checks, same result), on the GPU.
  /// The prefill executable is built for the prompt's length on first use of that length.
  rt::Result<GenerateResult> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts);

  int64_t capacity() const { return capacity_; }
  /// Kernels one decode step launches (embedding + layers x decode kernels + head).
  size_t launches_per_decode_step() const;
  double compile_seconds() const { return compile_seconds_; }

 private:
  DeviceModel() = default;
  rt::Status bind_layer(exec::Executable& e, int64_t layer);
  rt::Status bind_caches(exec::Executable& e, int64_t layer);
  rt::Status prefill(int64_t t_len);  // builds the prefill executable for t_len if needed

  rt::Context* ctx_ = nullptr;
  const Model* model_ = nullptr;
  DeviceModelOptions opts_;
  int64_t capacity_ = 0;
  std::optional<rt::Stream> stream_;
  std::optional<exec::Executable> embed_, decode_, head_, prefill_;
  int64_t prefill_len_ = 0;
  std::vector<rt::DeviceBuffer> weights_;                     // every uploaded param
  std::vector<std::map<std::string, CUdeviceptr>> layer_w_;   // per layer: param name -> buffer
  std::map<std::string, CUdeviceptr> embed_w_, head_w_;
  std::vector<rt::DeviceBuffer> k_cache_, v_cache_;
  std::optional<rt::DeviceBuffer> ids_, pos_, x_[2], logits_, next_;
  bool copied_[2] = {false, false};  // the prefill's K / V output stays a view: copied into the caches
  double compile_seconds_ = 0;
};

}  // namespace lj::models
