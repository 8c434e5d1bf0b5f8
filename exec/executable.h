// An executable plan of one graph: its fusion groups in order, each compiled (through the kernel
// cache) and loaded, with the device memory of every intermediate laid out by liveness in one arena.
// The caller owns the graph's inputs (weights included) and outputs and binds them by value; symbol
// values are given per run, and a run with new values re-lays out the arena (kernels never change:
// symbols are kernel arguments). Weights the plan prepares (a folded norm's W * w: the plan's
// `prepare` groups) live in buffers of the executable's own, computed before the first run after the
// params they read are bound.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "compiler/fusion/tensor_layout.h"
#include "layerjit/reference.h"
#include "runtime/context.h"
#include "runtime/graph.h"
#include "runtime/memory.h"
#include "runtime/module.h"
#include "runtime/stream.h"
#include "exec/memory_plan.h"

namespace lj::rt {
class NcclComm;
}

namespace lj::jit {
struct Bundle;
struct CompileProgress;
}

namespace lj::exec {

struct BuildOptions {
  FusionOptions fusion;
  /// Symbol values the kernels are chosen for (matmul family, decode attention chunks); any value
  /// runs correctly.
  Bindings hint;
  /// Compile through the kernel cache (LAYERJIT_CACHE_DIR); false: always NVRTC.
  bool use_cache = true;
  /// Use the device's arch-specific target where it has one (sm_90a: the wgmma GEMM); false: sm_XY.
  bool arch_specific = true;
  /// Programmatic dependent launch where the device has it (sm_90+), for the kernels marked
  /// LaunchRule::early (GEMVs, row, RoPE and elementwise kernels): each launches as the previous
  /// kernel's CTAs exit (after a row kernel: as it starts) and waits for its writes. Other kernels,
  /// and the first of each call, launch as without it. On by default since the trigger moved out
  /// of the many-CTA kernels (H100, docs/perf.md: decode at B = 1 0.6-3.4 % faster, bf16 B = 32
  /// level, prefill 1 % faster). LAYERJIT_PDL=0, 1 or all (every kernel, to measure) overrides this.
  bool programmatic_launch = true;
  /// Matmul configs from the tuning DB (`layerjit tune`'s winners for the hint's bucket on this
  /// device and target) where a record exists and still fits the problem; else the defaults.
  bool use_tuned = true;
  /// Kernels from this AOT bundle (`layerjit bundle`, jit::Bundle::read): no NVRTC, no kernel cache,
  /// no tuning DB. The image for the device is chosen by jit::choose_bundle_target (its own arch's
  /// cubin, else a compatible cubin, else PTX the driver compiles); a bundle this build cannot use
  /// (another layerjit version, no plan of this graph at `hint`, a kernel whose key differs) is an
  /// error saying why. The plan is fused by `fusion` as the bundle's was.
  std::shared_ptr<const jit::Bundle> bundle;
  /// This rank's communicator, for a rank graph of tensor parallelism (shard()): each all_reduce
  /// group is an ncclAllReduce on the run's stream (captured into its CUDA graph like a kernel). A
  /// plan with an all_reduce and no communicator, or one whose rank count differs from the op's, does
  /// not build. Must outlive the executable.
  const rt::NcclComm* comm = nullptr;
  /// Hears of each kernel as it finishes compiling (a cached one at once), for progress lines; the
  /// argument is a jit::CompileProgress.
  std::function<void(const jit::CompileProgress&)> progress;
};

/// Where each kernel's choices came from, for LAYERJIT_LOG=dispatch and `layerjit run`.
struct KernelOrigin {
  std::string config_source;  ///< "default", "tuned (T<=4096)" or why a stored tuning was not used
  bool cache_hit = false;     ///< the cubin came from the kernel cache (no NVRTC)
  /// "compiled", "cubin from the cache", "cubin from bundle B" or "PTX from bundle B (driver JIT)".
  std::string image;
};

class Executable {
 public:
  /// Plans, generates, compiles (in parallel, cached) and loads every group of `g`. Errors: a group
  /// without a kernel generator, a compile or load failure (naming the group). `g` must outlive it.
  static rt::Result<Executable> build(rt::Context& ctx, const Graph& g, const BuildOptions& opts);

  /// The graph the plan covers: the caller's after the graph passes (norm folding), every value id of
  /// the caller's graph meaning the same value here.
  const Graph& graph() const { return *graph_; }
  const FusionPlan& plan() const { return plan_; }
  const std::vector<GeneratedKernel>& kernels() const { return kernels_; }
  /// Kernels a run launches: all but the weight-preparation ones.
  size_t launches_per_run() const;
  /// Per kernel: where its config came from and whether the cubin was cached.
  const std::vector<KernelOrigin>& origins() const { return origins_; }
  double compile_seconds() const { return compile_seconds_; }
  int cache_hits() const { return cache_hits_; }

  /// Device memory for graph input or output `v` (its buffer: an input updated in place, such as a
  /// KV cache, is bound once). At least the value's size at the symbol values of each run. An output
  /// left unbound lives in the arena until the run ends. A returned view the plan copies
  /// (FusionPlan::output_views) has a buffer of its own and binds like any output; one that stays a
  /// view of an intermediate cannot be bound and keeps that whole buffer in the arena to the end.
  /// Binding a buffer to the address it already has changes nothing (the weights stay prepared).
  rt::Status bind(ValueId v, CUdeviceptr ptr);
  /// Where `v` lives: its buffer's address for a run with symbol values `b` (after build, bound or
  /// in the arena) and its layout in that buffer (offset and strides, symbolic).
  rt::Result<CUdeviceptr> buffer_address(ValueId v, const Bindings& b) const;
  const TensorLayout& layout(ValueId v) const { return layouts_[static_cast<size_t>(v)]; }
  /// The value of `v` (an output, or any input) after a run with symbol values `b`: its buffer
  /// downloaded and read through its layout (a view of an intermediate included). Synchronizes.
  rt::Result<HostTensor> download(rt::Stream& stream, ValueId v, const Bindings& b) const;
  /// Graph inputs whose memory the graph writes (KV caches updated in place).
  std::vector<ValueId> written_inputs() const;
  /// The arena layout for the symbol values in `b`.
  MemoryPlan memory_plan(const Bindings& b) const;
  /// Device memory of a run at `b`: bound inputs and outputs, the arena, scratch.
  Footprint footprint(const Bindings& b) const;
  /// Binding sets: one compiled plan bound to several sets of memory (a model's layers, each with its
  /// own weights and KV caches, sharing the kernels and the arena). Set 0 exists from build();
  /// add_binding_set() adds an empty set and returns its index; use_binding_set(i) makes bind(),
  /// run(), capture(), download() and the rest act on set i. Each set keeps its own prepared weights
  /// (a folded norm's W * w per layer). Runs of different sets on one stream may share the arena
  /// because they run one after another.
  size_t add_binding_set();
  rt::Status use_binding_set(size_t i);
  size_t binding_set() const { return current_; }

  /// Runs every group in order on `stream` (asynchronous). Every input and output must be bound.
  /// Prepares the weights first where they are not (prepare_weights).
  rt::Status run(rt::Stream& stream, const Bindings& b);
  /// Runs the weight-preparation groups (FusionGroup::prepare) into the executable's own buffers.
  /// run() calls it after a param they read is bound; call it after changing such a param's memory in
  /// place. Nothing to do when the plan prepares nothing.
  rt::Status prepare_weights(rt::Stream& stream, const Bindings& b);
  /// Launches kernel `i` of the plan alone, over the same memory as run() (for timing one kernel;
  /// its inputs are whatever the buffers hold). A weight-preparation kernel is not part of a run.
  rt::Status run_step(rt::Stream& stream, size_t i, const Bindings& b);
  /// One run at symbol values `b` recorded as a CUDA graph: one launch call replays the whole plan.
  /// Runs once first (eagerly, synchronized) so that the arena and scratch buffers exist; the graph
  /// holds their addresses, so a later run with larger symbol values needs a new capture.
  rt::Result<rt::Graph> capture(rt::Stream& stream, const Bindings& b);

 private:
  Executable() = default;
  rt::Status prepare(const Bindings& b);  // the memory plan and arena for `b`
  std::set<ValueId> outside_arena() const;  // bound buffers and prepared weights
  /// after_kernel: a kernel of the same call was launched before this one on `stream`.
  rt::Status launch(rt::Stream& stream, size_t i, const Bindings& b, bool after_kernel);
  struct Step {
    std::optional<rt::Module> module;  // none for a collective
    rt::Kernel kernel;
    bool collective = false;  // an all_reduce: comm_ runs it
  };
  rt::Status launch_collective(rt::Stream& stream, size_t i, const Bindings& b);
  rt::Status check_collectives(const rt::NcclComm* comm) const;  // every all_reduce has a communicator of its rank count
  const rt::NcclComm* comm_ = nullptr;
  rt::Context* ctx_ = nullptr;
  std::shared_ptr<const Graph> graph_;
  FusionPlan plan_;
  std::vector<GeneratedKernel> kernels_;
  std::vector<Step> steps_;
  std::vector<TensorLayout> layouts_;          // per value, as a run leaves it (plan_layouts): buffer, offset, strides
  struct BindingSet {
    std::map<ValueId, CUdeviceptr> external;     // bound inputs and outputs, by buffer
    std::map<ValueId, rt::DeviceBuffer> prepared;  // outputs of the prepare groups, by value
    bool weights_ready = false;                  // prepared holds what the bound params give
    std::map<ValueId, size_t> prepared_bytes;    // each prepared value's size when it was prepared
  };
  std::vector<BindingSet> sets_ = std::vector<BindingSet>(1);
  size_t current_ = 0;
  BindingSet& cur() { return sets_[current_]; }
  const BindingSet& cur() const { return sets_[current_]; }
  bool weights_current(const Bindings& b) const;  // ready, and no prepared value's size changed with `b`
  std::optional<rt::DeviceBuffer> arena_;
  // The layout of the last run's symbol values: a decode loop calls run() with the same sizes.
  std::vector<std::pair<std::string, int64_t>> planned_for_;
  MemoryPlan planned_;
  // Per step, zeroed when allocated and whenever a launch asks for a different size: split-K and
  // stream-K GEMMs and split-KV attention place their completion counters after the partials of
  // gridDim.x CTAs, so a smaller grid would find its counters in old partials.
  std::vector<std::optional<rt::DeviceBuffer>> scratch_;
  std::vector<size_t> scratch_used_;  // the bytes the step's last launch asked for
  double compile_seconds_ = 0;
  int cache_hits_ = 0;
  std::vector<KernelOrigin> origins_;
  bool log_dispatch_ = false;  // LAYERJIT_LOG=dispatch
  bool programmatic_ = false;      // BuildOptions::programmatic_launch (or LAYERJIT_PDL) on an sm_90+ device
  bool programmatic_all_ = false;  // LAYERJIT_PDL=all: every kernel early, not only LaunchRule::early ones
  std::vector<std::pair<std::string, int64_t>> logged_for_;  // the symbol values last logged
};

}  // namespace lj::exec
