// A Model over tp GPUs of this machine (tensor parallelism, docs/tp.md). The two layer graphs are
// sharded (exec::TpExecutable: one process, a thread per rank for every step that makes NCCL calls,
// one binding set per layer), each rank holding its share of every layer's weights, cut from the
// mapped checkpoint as they are uploaded, and of every layer's KV caches (its heads). The embedding
// and the head run whole on every rank: they are small next to the layers, and each rank then holds
// the hidden state and the chosen token itself, so no step needs a broadcast; rank 0's token is
// reported. generate() works as DeviceModel's: the prefill, then decode steps, the first eager and
// the rest replays of one CUDA graph per rank (its NCCL calls included).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "exec/tp_executable.h"
#include "models/device_model.h"
#include "models/generate.h"

namespace lj::models {

struct TpModelOptions {
  DeviceModelOptions model;  ///< build options, cache capacity, CUDA graphs (as for one GPU)
  int tp = 2;
  std::vector<int> devices;  ///< the ranks' GPUs; empty: 0 .. tp - 1
  ShardOptions shard;
};

class TpModel {
 public:
  /// Shards and compiles the layer graphs, compiles the embedding and head on every rank, uploads
  /// every rank's share of the weights and allocates its caches. An Error where the model does not
  /// shard over tp (naming the op and why), where there are fewer GPUs, or without NCCL. `m` must
  /// outlive it.
  static rt::Result<std::unique_ptr<TpModel>> open(const Model& m, const TpModelOptions& o);
  ~TpModel();

  /// Greedy generation with DeviceModel::generate's checks and result (tokens as rank 0 chose them).
  rt::Result<GenerateResult> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts);

  int ranks() const { return static_cast<int>(ranks_.size()); }
  int64_t capacity() const { return capacity_; }
  double compile_seconds() const { return compile_seconds_; }
  /// What one decode step launches on each rank: kernels and NCCL calls.
  size_t launches_per_decode_step() const;

 private:
  struct Rank;
  TpModel();
  rt::Status bind_layer(exec::TpExecutable& e, int64_t layer);
  rt::Status prefill(int64_t t_len);
  rt::Status sync_all();

  const Model* model_ = nullptr;
  TpModelOptions opts_;
  int64_t capacity_ = 0;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::unique_ptr<exec::TpExecutable> decode_, prefill_;
  int64_t prefill_len_ = 0;
  double compile_seconds_ = 0;
};

}  // namespace lj::models
