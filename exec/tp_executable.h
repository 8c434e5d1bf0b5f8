// Tensor parallelism on one host: one process drives the tp GPUs (docs/tp.md). The graph is sharded
// once (shard()), the rank graph built as an Executable on each device with its rank's NCCL
// communicator (ncclCommInitAll), and every step that makes NCCL calls (a run, a capture) runs on a
// thread per rank, since NCCL needs the ranks' calls issued concurrently. Inputs are given whole and
// cut per rank at bind time (shard_bytes); outputs come back whole (gathered, or rank 0's copy of a
// replicated one). One process rather than one per GPU: no id exchange, one place for errors, and a
// rank that fails stops the others at once; NCCL's traffic is the same either way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exec/executable.h"
#include "layerjit/shard.h"
#include "runtime/nccl.h"

namespace lj::exec {

struct TpOptions {
  int tp = 2;
  /// The ranks' device ordinals; empty: 0 .. tp - 1.
  std::vector<int> devices;
  /// Each rank's build (its comm is set per rank).
  BuildOptions build;
  /// How the graph is sharded (residual adds folded before the all_reduces or not).
  ShardOptions shard;
};

class TpExecutable {
 public:
  /// Shards `g` (UserError where it does not shard), opens the devices (an Error naming how many
  /// there are when fewer than tp), creates the communicators and builds every rank (one compile:
  /// the ranks' kernels are the same, the kernel cache serves the others). `g` must outlive it.
  static rt::Result<std::unique_ptr<TpExecutable>> build(const Graph& g, const TpOptions& o);
  ~TpExecutable();

  int ranks() const { return static_cast<int>(ranks_.size()); }
  const ShardedGraph& sharded() const { return sharded_; }
  /// Rank r's executable (its graph is the rank graph), context and stream.
  Executable& rank(int r) { return *ranks_[static_cast<size_t>(r)]->exe; }
  const Executable& rank(int r) const { return *ranks_[static_cast<size_t>(r)]->exe; }
  rt::Context& context(int r) const { return *ranks_[static_cast<size_t>(r)]->ctx; }
  rt::Stream& stream(int r) { return ranks_[static_cast<size_t>(r)]->stream; }

  /// Input `name` of the unsharded graph given whole (its raw little-endian elements at sizes `b`):
  /// each rank's share uploaded into a buffer the executable owns and bound.
  rt::Status upload(std::string_view name, std::span<const unsigned char> full, const Bindings& b);

  /// Binding sets on every rank (Executable::add_binding_set): a model's layers, each with its own
  /// weights and caches, sharing the kernels and the arena. upload() binds into the current set.
  size_t add_binding_set();
  rt::Status use_binding_set(size_t i);

  /// Runs every rank on its stream (asynchronously, from a thread per rank) and waits for all.
  rt::Status run(const Bindings& b);
  /// f(r) for every rank on a thread of its own with rank r's context current, concurrently (NCCL
  /// needs the ranks' calls issued together); the first error, after which every communicator is
  /// aborted so no rank waits in an all_reduce another never reaches.
  rt::Status on_ranks(const std::function<rt::Status(int)>& f);
  /// Each rank's run at `b` recorded as a CUDA graph (NCCL calls included); replay() launches them.
  rt::Status capture(const Bindings& b);
  /// Launches every rank's captured graph on its stream (graph launches do not block: one thread).
  rt::Status replay();
  /// Only the all_reduces of a run at `b`, captured per rank (for timing the communication alone);
  /// replay_collectives() launches them.
  rt::Status capture_collectives(const Bindings& b);
  rt::Status replay_collectives();
  rt::Status synchronize();
  /// Fills every output buffer of every rank that is not an input (a cache updated in place) with
  /// NaN bit patterns, so a replay that writes nothing cannot pass for one that wrote the same values.
  rt::Status poison_outputs(const Bindings& b);
  /// Output `i` of the unsharded graph after a run: gathered from the ranks, or rank 0's where every
  /// rank holds it whole (`rank` >= 0: that rank's copy of a replicated output, to compare them).
  rt::Result<HostTensor> download(size_t i, const Bindings& b, int rank = -1);

 private:
  struct Rank {
    rt::Context* ctx = nullptr;
    rt::Stream stream;
    rt::NcclComm comm;
    std::optional<Executable> exe;  // built after comm has its final address (the build keeps a pointer)
    std::vector<rt::DeviceBuffer> owned;  // uploaded inputs
    std::optional<rt::Graph> graph, collectives;
  };
  TpExecutable() = default;
  rt::Result<ValueId> rank_value(int r, std::string_view name) const;
  rt::Status replay_each(std::optional<rt::Graph> Rank::*which, const char* what);
  ShardedGraph sharded_;
  const Graph* source_ = nullptr;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace lj::exec
