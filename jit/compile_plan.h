// The JIT: a lowered plan's fusion groups, each with its config chosen (given, else tuned, else the
// emitter's default), emitted, compiled through the kernel cache, and reported. The executable,
// `layerjit compile`, `inspect`, the benchmarks and the tests all come through here, so what
// `compile --emit` writes is what `run` launches. The stage dumps (LAYERJIT_DUMP=fusion,source,ptx)
// happen here too, so a program using the library gets them as the CLI does.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kernel_cache.h"
#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"
#include "jit/compile_kernels.h"
#include "jit/target.h"

namespace lj::jit {

struct Bundle;

/// lower() (the graph passes, then the fusion plan), printed under LAYERJIT_DUMP=fusion with the
/// sizes in `hint`.
Lowered plan(const Graph& g, const FusionOptions& fo, const Bindings& hint = {});

struct PlanCompileOptions {
  /// Symbol values the kernels are chosen for (GEMV or GEMM, decode chunks) and the tuning bucket
  /// looked up; any value runs correctly.
  Bindings hint;
  /// Look up `layerjit tune`'s winners for the hint's bucket (needs a target with a driver version).
  bool use_tuned = true;
  /// Compile through the kernel cache: `cache`, or when null the one the environment names
  /// (LAYERJIT_CACHE_DIR), opened for this call. false: always NVRTC.
  bool use_cache = true;
  cache::KernelCache* cache = nullptr;
  /// The PTX of every kernel too (compile_kernels' want_ptx).
  bool want_ptx = false;
  /// false: emit only (sources, configs, launch rules); no NVRTC.
  bool compile = true;
  /// Configs the caller gives every matmul / attention group (bench sweeps, `inspect --config`):
  /// they win over tuned and default configs. An emitter refusing one is a UserError.
  std::optional<MatmulConfig> matmul;
  std::optional<AttentionConfig> attention;
  /// Only this group (FusionGroup::id); unset: every group.
  std::optional<int> only_group;
  /// Groups without a kernel generator are listed in CompiledPlan::not_generated; false: a UserError.
  bool skip_ungenerated = false;
  /// Hears of each kernel as it finishes compiling (KernelCompileOptions::progress).
  std::function<void(const CompileProgress&)> progress;
  /// Kernels from this AOT bundle (jit/bundle.h) instead of NVRTC and the cache: each group gets the
  /// config the bundle recorded for it (tuned and given configs are not consulted), and its image
  /// must be the bundle's under the key of the kernel emitted here; any mismatch is an error. `t`
  /// must be a target of the bundle (bundle_jit_target).
  const Bundle* bundle = nullptr;
  /// With a bundle: load each kernel's PTX (the driver compiles it) rather than its cubin.
  bool bundle_ptx = false;
};

/// Where a kernel's config came from.
enum class ConfigOrigin { Default, Tuned, Given, Bundle };

struct CompiledGroup {
  int group = 0;  ///< FusionGroup::id
  GeneratedKernel kernel;
  ConfigOrigin origin = ConfigOrigin::Default;
  /// "default", "tuned (T<=4096)", "given", "default (the stored tuning 'X' does not apply: why)", or
  /// with a bundle, what the bundle recorded followed by " (bundle)".
  std::string config_source;
  CompiledKernel compiled;  ///< empty when PlanCompileOptions::compile is false
};

struct NotGenerated {
  int group = 0;
  GroupKind kind = GroupKind::Elementwise;
  std::string reason;
};

struct CompiledPlan {
  JitTarget target;
  std::vector<CompiledGroup> groups;  ///< in plan order
  std::vector<NotGenerated> not_generated;
  /// The groups NCCL runs (all_reduce: codegen/collective_call.h), in plan order: their ABIs, no
  /// source, nothing compiled; not in `groups`.
  std::vector<GeneratedKernel> collectives;
  /// Wall time of the compiles (cache lookups included); for plans compiled together
  /// (compile_plans), the batch's, the same in each.
  double compile_seconds = 0;
  int cache_hits = 0;
};

/// Chooses, emits and compiles the kernels of `plan` over `g` (a Lowered's graph) for `t`. Throws
/// UserError where the input is at fault (a group without a generator, a given config an emitter
/// refuses); returns an Error when a kernel fails to compile (naming the group and its lines).
rt::Result<CompiledPlan> compile_plan(const JitTarget& t, const Graph& g, const FusionPlan& plan, const PlanCompileOptions& o = {});

struct PlanToCompile {
  const Graph* graph = nullptr;  ///< a Lowered's graph
  const FusionPlan* plan = nullptr;
};

/// compile_plan over several plans (a module's graphs) with their kernels compiled as one batch: one
/// pool of compile workers for all, the biggest kernels first, so a module compiles in about the
/// time of its total NVRTC work divided among the workers rather than graph after graph. Results in
/// the order of `plans`; a kernel's compile error fails only its own plan. Progress counts the batch.
std::vector<rt::Result<CompiledPlan>> compile_plans(const JitTarget& t, std::span<const PlanToCompile> plans, const PlanCompileOptions& o = {});
/// The same over lowered graphs (plan()'s results), each with its own plan.
std::vector<rt::Result<CompiledPlan>> compile_plans(const JitTarget& t, std::span<const Lowered> lowered, const PlanCompileOptions& o = {});

}  // namespace lj::jit
