// Compiling through the kernel cache: the key covers everything that decides the cubin (source,
// exact NVRTC options, target, NVRTC version, embedded device headers, registered environment); a hit
// skips NVRTC, a miss (or a corrupt entry, already reported and removed) compiles and stores.
#pragma once

#include "cache/kernel_cache.h"
#include "runtime/nvrtc.h"

namespace lj::cache {

struct CachedCompile {
  rt::CompiledProgram program;  // cubin set; ptx only when the job asked for it and NVRTC ran
  bool hit = false;
  CacheKey key;
};

/// The key components of one NVRTC job.
KeyComponents key_components(const rt::CompileJob& job);

/// Loads the job's cubin from the cache or compiles and stores it. A job that asks for PTX always
/// compiles (the cache holds cubins), but still stores the cubin.
rt::Result<CachedCompile> compile_cached(KernelCache& cache, const rt::CompileJob& job, std::string_view kernel_name);

/// The same for many jobs: hits come from the cache, the misses are compiled on the parallel pool
/// (rt::compile_parallel) and stored. Results are in job order.
std::vector<rt::Result<CachedCompile>> compile_many_cached(KernelCache& cache, std::span<const rt::CompileJob> jobs,
                                                           std::span<const std::string> kernel_names);

}  // namespace lj::cache
