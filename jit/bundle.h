// AOT bundles (`layerjit bundle`): the kernels of one or more plans compiled ahead of time for a
// list of archs, with their configs (tuned ones with the tuner's measurement), in one checksummed
// file (jit/bundle_file.h), so an Executable starts with no NVRTC call. Each kernel is stored under
// its cache key (source, NVRTC options, arch, NVRTC version, device headers, code environment): a
// build from a bundle re-emits every group with the config the bundle recorded and takes the image
// whose key matches, so a bundle can only ever serve the kernel this layerjit generates for that
// group; anything else is an error naming the group. docs/cache.md describes the file.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cache/env_registry.h"
#include "cache/kernel_cache.h"
#include "cache/key.h"
#include "compiler/fusion/fusion_group.h"
#include "jit/compile_kernels.h"
#include "jit/target.h"

namespace lj::jit {

/// What the kernels of one arch were chosen for.
struct BundleTarget {
  std::string arch;            ///< "sm_90a", "sm_80"
  int sm_count = 0;            ///< the SMs and opt-in shared memory the kernels were chosen for
  int max_shared_bytes = 0;
  std::string driver_version;  ///< the GPU's driver where it was written on one (tuned configs apply), else ""
};

struct BundleKernel {
  int group = 0;  ///< FusionGroup::id
  std::string name;
  std::string config;         ///< the tunable choice it was generated with ("" for kernels without one)
  std::string config_source;  ///< where that came from when written: "default", "tuned (B<=1,C<=4096)", ...
  std::string tuned;          ///< for a tuned config, the tuner's figure ("12.3 us, spread 0.1 us"), else ""
  cache::CacheKey key;        ///< of its cubin compile (compile_kernels' key)
  size_t cubin = 0, ptx = 0;  ///< payload indices
};

/// One graph's plan for one target at one hint.
struct BundlePlan {
  std::string graph;       ///< its name
  std::string graph_hash;  ///< of the lowered graph's canonical text
  std::string plan_hash;   ///< of its fusion groups (kinds and nodes): what the fusion options decided
  std::string hint;        ///< "B=1,C=4096": the symbol values the kernels were chosen for
  size_t target = 0;       ///< into Bundle::targets
  std::vector<BundleKernel> kernels;  ///< in plan order
};

struct Bundle {
  std::string path;
  std::string layerjit_version, nvrtc_version, device_headers_hash;
  std::vector<cache::EnvSetting> env;
  int64_t created_unix = 0;
  std::vector<BundleTarget> targets;
  std::vector<BundlePlan> plans;
  std::vector<std::string> payloads;

  /// Reads `path` and checks every byte (checksums) and every manifest field; an error says what is
  /// wrong. Compatibility with this build is check_compatible's.
  static rt::Result<Bundle> read(const std::string& path);
  /// Whether this layerjit can load it: the same layerjit version, device headers and code
  /// environment as the bundle was written with (its kernels' keys depend on them). The NVRTC
  /// version need not match: nothing is compiled.
  rt::Status check_compatible() const;
  /// Lines for `layerjit bundle --verify`: versions, targets, plans and kernels.
  std::string describe() const;
};

/// The bundle target a device of compute capability `cc` (90 for 9.0) runs, in this order: the
/// cubin of its exact arch (the arch-specific one, sm_90a, first when `arch_specific`); a cubin of
/// the same major and a lower minor (binary compatible: sm_80 on sm_86); the PTX of the highest arch
/// below it, which the driver compiles (an arch-specific target's PTX runs only on its own arch).
struct BundleChoice {
  size_t target = 0;
  bool ptx = false;  ///< load each kernel's PTX (the driver JIT) rather than its cubin
  std::string why;   ///< "cubin sm_90a (this GPU's arch)", for the dispatch log
};
rt::Result<BundleChoice> choose_bundle_target(const Bundle& b, int cc, bool arch_specific);

/// The JIT target of a bundle target: its arch, SM count and shared memory, so that emission makes
/// the kernels it holds.
JitTarget bundle_jit_target(const BundleTarget& t);

/// "B=1,C=4096": `hint`'s values of `g`'s symbols, in graph order.
std::string hint_text(const Graph& g, const Bindings& hint);

/// The plan of `g` (lowered) and `plan` at `hint` for target `t` in `b`, or an error saying what the
/// bundle holds for that graph instead.
rt::Result<const BundlePlan*> find_bundle_plan(const Bundle& b, const Graph& g, const FusionPlan& plan, const Bindings& hint,
                                               const JitTarget& t);
/// The image of `k` (emitted for `target` with the config the plan recorded): its cubin, or its PTX
/// when `ptx`. An error names the group when the bundle holds no kernel of `k`'s key.
rt::Result<CompiledKernel> bundle_kernel(const Bundle& b, const BundlePlan& p, const GeneratedKernel& k, const rt::Target& target,
                                         bool ptx);

struct BundleWriteOptions {
  std::vector<JitTarget> targets;  ///< one plan per graph and target
  FusionOptions fusion;
  Bindings hint;  ///< the symbol values the kernels are chosen for (each graph takes its own symbols')
  bool use_tuned = true;  ///< tuned configs where a target has a driver (written on its GPU)
  cache::KernelCache* cache = nullptr;  ///< compiles through it; nullptr: the environment's cache
  std::function<void(const CompileProgress&)> progress;
};

struct BundleWriteReport {
  size_t plans = 0, kernels = 0, payloads = 0, bytes = 0;
  int cache_hits = 0;
  double compile_seconds = 0;
};

/// Plans, compiles (cubin and PTX, through the kernel cache) and writes every graph of `graphs` for
/// every target into one bundle at `path` (written whole or not at all). An error names the group.
rt::Result<BundleWriteReport> write_bundle(const std::string& path, std::span<const Graph> graphs, const BundleWriteOptions& o);

}  // namespace lj::jit
