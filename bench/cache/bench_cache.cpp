// Cold vs warm kernel cache. Cold: every kernel of the built-in Llama-3-8B layers (prefill and decode,
// fused and unfused, every group with an emitter) is compiled with NVRTC and stored in an empty cache.
// Warm: a fresh cache object (an empty memory layer, as in a new process) loads each one from disk,
// verifying sizes, checksums and the key. Both include computing the key. NVRTC needs no GPU.
//
// usage: bench_cache [--arch sm_90a] [--keep DIR]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cache/disk_cache.h"
#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"
#include "jit/compile_kernels.h"
#include "layerjit/llama.h"
#include "runtime/nvrtc.h"

using namespace lj;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Job {
  std::string name;
  rt::CompileJob compile;
};

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "sm_90a";
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (a == "--keep" && i + 1 < argc) keep = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_cache [--arch sm_90a] [--keep DIR]\n");
      return 2;
    }
  }
  auto target = rt::Target::parse(arch);
  if (!target.ok()) {
    std::fprintf(stderr, "bench_cache: %s\n", target.message().c_str());
    return 2;
  }

  std::vector<Job> jobs;
  LlamaConfig config;
  for (const Graph& g : {llama_prefill(config), llama_decode(config)}) {
    for (bool fuse : {true, false}) {
      FusionPlan plan = plan_fusion(g, FusionOptions{fuse});
      for (const FusionGroup& grp : plan.groups) {
        if (!has_emitter(grp.kind)) continue;
        GeneratedKernel k = emit_group(g, grp, EmitOptions{target->sm});
        jobs.push_back({k.name, jit::compile_job(k, *target)});
      }
    }
  }
  // The unfused and fused plans share some single-op groups: identical sources are one cache entry.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.compile.source < b.compile.source; });
  jobs.erase(std::unique(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.compile.source == b.compile.source; }),
             jobs.end());

  std::string dir = keep;
  if (dir.empty()) {
    std::string templ = (std::filesystem::temp_directory_path() / "layerjit-bench-cache-XXXXXX").string();
    if (!::mkdtemp(templ.data())) return 1;
    dir = templ;
  }
  cache::CacheOptions opts;
  opts.root = std::filesystem::path(dir) / "root";

  // Cold: key, miss, compile, store.
  auto cold_cache = cache::DiskCache::open(opts);
  if (!cold_cache->enabled()) return 1;
  double compile_total = 0;
  auto t0 = Clock::now();
  for (const Job& j : jobs) {
    cache::KeyComponents c = jit::key_components(j.compile);  // the key the executable computes
    if (cold_cache->load(cache::compute_key(c)).status != cache::LoadStatus::kMiss) return 1;
    auto prog = rt::compile(j.compile.source, j.compile.options, j.compile.target);
    if (!prog.ok()) {
      std::fprintf(stderr, "bench_cache: %s\n", prog.message().c_str());
      return 1;
    }
    compile_total += prog->seconds;
    if (!cold_cache->store(c, prog->cubin, {j.name, prog->seconds}).ok) return 1;
  }
  double cold = seconds_since(t0);

  // Warm: a new cache object, as a new process would open it; every kernel must hit.
  auto warm_cache = cache::DiskCache::open(opts);
  size_t bytes = 0;
  auto t1 = Clock::now();
  for (const Job& j : jobs) {
    cache::LoadResult r = warm_cache->load(cache::compute_key(jit::key_components(j.compile)));
    if (r.status != cache::LoadStatus::kHit) {
      std::fprintf(stderr, "bench_cache: warm load of %s: %s\n", j.name.c_str(), std::string(cache::to_string(r.status)).c_str());
      return 1;
    }
    bytes += r.entry->cubin.size();
  }
  double warm = seconds_since(t1);

  std::printf("kernels        %zu distinct (built-in Llama-3-8B prefill + decode, fused and unfused), %s, NVRTC %s\n",
              jobs.size(), target->name().c_str(), rt::nvrtc_version().c_str());
  std::printf("cubin bytes    %zu total\n", bytes);
  std::printf("cold           %8.1f ms  (%.1f ms in nvrtcCompileProgram; %.2f ms per kernel)\n", cold * 1e3,
              compile_total * 1e3, cold * 1e3 / static_cast<double>(jobs.size()));
  std::printf("warm           %8.2f ms  (%.3f ms per kernel: open, flock, read, checksum, key check)\n", warm * 1e3,
              warm * 1e3 / static_cast<double>(jobs.size()));
  std::printf("speed-up       %.0fx\n", cold / warm);
  if (keep.empty()) std::filesystem::remove_all(dir);
  return cold / warm >= 20 ? 0 : 1;
}
