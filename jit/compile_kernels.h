// Compiling generated kernels: the one place a GeneratedKernel becomes an NVRTC job and a cubin,
// through the kernel cache where one is given. The cache key covers everything that decides the
// cubin (source, exact NVRTC options, target, NVRTC version, every device header's text, the
// registered environment); a hit skips NVRTC, a miss (or a corrupt entry, already reported and
// removed) compiles (in worker processes where the worker is found, runtime/compile_workers.h) and
// stores. A kernel's PTX is cached too, under the key of its PTX-only twin (arch compute_XY), so a
// warm compile that asks for PTX calls NVRTC not at all.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cache/kernel_cache.h"
#include "codegen/kernel.h"
#include "runtime/kernel_resources.h"
#include "runtime/nvrtc.h"

namespace lj::jit {

/// The NVRTC job of `k` for `target`: its source, the embedded device headers, and a program name
/// (the kernel's) that makes compile errors name it. A kernel emitted for sm_XYa (wgmma) compiles
/// for that target, which runs on exactly the devices sm_XY code runs on.
rt::CompileJob compile_job(const GeneratedKernel& k, const rt::Target& target);

/// The hash of the device headers every compile_job carries (the runtime's embedded ones, then
/// codegen's): what a cache key's device_headers_hash is for a generated kernel.
std::string current_device_headers_hash();

/// The cache key components of one NVRTC job.
cache::KeyComponents key_components(const rt::CompileJob& job);

struct CompiledKernel {
  rt::CompiledProgram program;  ///< the cubin (PTX for a PTX-only target), and the PTX when asked
  bool cache_hit = false;       ///< the cubin came from the cache (no NVRTC for it)
  cache::CacheKey key;          ///< set when compiled through a cache
};

/// One kernel's compile finished (a cache hit finishes at once), for progress lines.
struct CompileProgress {
  size_t done = 0, total = 0;  ///< kernels finished so far, this one included, of all
  std::string name;            ///< the kernel
  bool cache_hit = false;      ///< nothing compiled for it
  bool ok = true;
  double seconds = 0;          ///< NVRTC's time for it
  size_t index = 0;            ///< its position in the jobs compiled (kernels of one group share a name)
};

struct KernelCompileOptions {
  cache::KernelCache* cache = nullptr;  ///< nullptr: always NVRTC, nothing stored
  /// The PTX of every kernel too: from its cubin compile on a miss, from the cache on a hit, or
  /// where a cached cubin's PTX was never stored, from a PTX-only compile (no ptxas; NVRTC makes its
  /// text identical to the cubin compile's), then stored.
  bool want_ptx = false;
  int workers = 0;  ///< parallel NVRTC compiles; 0: LAYERJIT_COMPILE_JOBS, else the default
  /// Called once per kernel as it finishes, one call at a time (from compile threads).
  std::function<void(const CompileProgress&)> progress;
};

/// Compiles `jobs` (their kernels named by `names`, for the cache's manifest), results in job order.
std::vector<rt::Result<CompiledKernel>> compile_jobs(std::span<const rt::CompileJob> jobs, std::span<const std::string> names,
                                                     const KernelCompileOptions& options);

/// compile_jobs over compile_job(k, target) of each kernel; an error starts with the fusion group,
/// kernel and config ("fusion group 3 (lj_decode_g3_matmul, config 'gemv mt=1 u=4 warps=8') failed
/// to compile for sm_90a:").
std::vector<rt::Result<CompiledKernel>> compile_kernels(std::span<const GeneratedKernel> kernels, const rt::Target& target,
                                                        const KernelCompileOptions& options);

/// What `k` uses per thread and block compiled for `target` (ptxas's report), never cached.
rt::Result<rt::KernelResources> kernel_resources(const GeneratedKernel& k, const rt::Target& target);

}  // namespace lj::jit
