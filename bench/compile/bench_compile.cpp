// The cold-start report: what the first and later builds of the built-in Llama-3-8B layer (both
// graphs, fused, at the --bind sizes) cost without a GPU, through the one compile path.
//   cold       jit::compile_plan into an empty cache: every kernel through NVRTC (worker processes
//              where layerjit-compile-worker is found), cubin and PTX stored
//   warm       the same in a fresh cache object (a new process's): every cubin and PTX read, no NVRTC
//   prepare    what Executable::build does before module load, warm: plan, emit, cubins from the cache
//   bundle     write: the layer into an AOT bundle from the warm cache; load: read and check the
//              bundle, then plan and emit with every image from it (Executable::build with a bundle,
//              up to module load)
// Warm and bundle rows are the median of --repeat runs. Prints a table (docs/perf.md records it).
//
// usage: bench_compile [--arch sm_90a] [--bind T=4096,B=1,C=4096] [--repeat 5]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cache/kernel_cache.h"
#include "cache/location.h"
#include "jit/bundle.h"
#include "jit/compile_plan.h"
#include "layerjit/llama.h"
#include "runtime/nvrtc.h"

using namespace lj;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_compile: %s\n", what.c_str());
  std::exit(1);
}

Bindings parse_bind(const std::string& text) {
  Bindings b;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("--bind expects S=V,S=V, got '" + text + "'");
    b.set(item.substr(0, eq), std::stoll(item.substr(eq + 1)));
    at = comma + 1;
  }
  return b;
}

// Every graph's plan compiled (or loaded) through `cache` or `bundle`; returns the kernel count.
size_t build_all(const std::vector<Graph>& graphs, const jit::JitTarget& t, const Bindings& hint, cache::KernelCache* cache,
                 bool want_ptx, const jit::Bundle* bundle = nullptr) {
  std::vector<Lowered> lowered;
  for (const Graph& g : graphs) lowered.push_back(jit::plan(g, {}, hint));
  jit::PlanCompileOptions po;
  po.hint = hint;
  po.cache = cache;
  po.want_ptx = want_ptx;
  po.bundle = bundle;
  size_t kernels = 0;
  for (auto& r : jit::compile_plans(t, lowered, po)) {  // one batch, as `layerjit compile` does
    if (!r.ok()) fail(r.message());
    kernels += r->groups.size();
  }
  return kernels;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "sm_90a", bind = "T=4096,B=1,C=4096";
  int repeat = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (a == "--bind" && i + 1 < argc) bind = argv[++i];
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else fail("usage: bench_compile [--arch sm_90a] [--bind T=4096,B=1,C=4096] [--repeat 5]");
  }
  // NVRTC in the worker processes, as the CLI runs it, unless the caller says otherwise.
  if (!std::getenv("LAYERJIT_COMPILE_WORKER")) ::setenv("LAYERJIT_COMPILE_WORKER", LAYERJIT_COMPILE_WORKER_PATH, 1);
  auto target = jit::JitTarget::of_arch(arch);
  if (!target.ok()) fail(target.message());
  const Bindings hint = parse_bind(bind);
  const LlamaConfig config;
  const std::vector<Graph> graphs = {llama_prefill(config), llama_decode(config)};

  std::string templ = (std::filesystem::temp_directory_path() / "layerjit-bench-compile-XXXXXX").string();
  if (!::mkdtemp(templ.data())) fail("mkdtemp failed");
  const std::filesystem::path dir = templ;
  cache::CacheOptions co = cache::cache_options_from_env();
  co.root = dir / "cache";
  auto fresh_cache = [&] { return cache::KernelCache(cache::DiskCache::open(co)); };

  auto t = Clock::now();
  const int64_t n0 = rt::nvrtc_compile_count();
  cache::KernelCache cold_cache = fresh_cache();
  const size_t kernels = build_all(graphs, *target, hint, &cold_cache, true);
  const double cold = since(t);
  const int64_t cold_nvrtc = rt::nvrtc_compile_count() - n0;

  std::vector<double> warm, prepare, bundle_load;
  for (int r = 0; r < repeat; ++r) {
    cache::KernelCache c = fresh_cache();
    t = Clock::now();
    build_all(graphs, *target, hint, &c, true);
    warm.push_back(since(t));
    cache::KernelCache p = fresh_cache();
    t = Clock::now();
    build_all(graphs, *target, hint, &p, false);
    prepare.push_back(since(t));
  }
  const int64_t warm_nvrtc = rt::nvrtc_compile_count() - n0 - cold_nvrtc;

  const std::string file = (dir / "layer.ljb").string();
  jit::BundleWriteOptions bo;
  bo.targets = {*target};
  bo.hint = hint;
  cache::KernelCache bc = fresh_cache();
  bo.cache = &bc;
  t = Clock::now();
  auto rep = jit::write_bundle(file, graphs, bo);
  if (!rep.ok()) fail(rep.message());
  const double bundle_write = since(t);
  const int64_t n1 = rt::nvrtc_compile_count();
  for (int r = 0; r < repeat; ++r) {
    t = Clock::now();
    auto b = jit::Bundle::read(file);
    if (!b.ok()) fail(b.message());
    if (rt::Status s = b->check_compatible(); !s.ok()) fail(s.message());
    build_all(graphs, jit::bundle_jit_target(b->targets[0]), hint, nullptr, false, &*b);
    bundle_load.push_back(since(t));
  }
  const int64_t bundle_nvrtc = rt::nvrtc_compile_count() - n1;
  std::filesystem::remove_all(dir);

  std::printf("built-in Llama-3-8B layer, both graphs fused at %s: %zu kernels for %s, NVRTC %s, %ld hardware threads\n\n",
              bind.c_str(), kernels, arch.c_str(), rt::nvrtc_version().c_str(), ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("| step | wall | NVRTC compiles | x cold |\n|---|---|---|---|\n");
  std::printf("| cold: compile_plan into an empty cache (cubin + PTX) | %.3f s | %lld | 1 |\n", cold, static_cast<long long>(cold_nvrtc));
  std::printf("| warm: the same from the cache (median of %d) | %.1f ms | %lld | %.0fx |\n", repeat, median(warm) * 1e3,
              static_cast<long long>(warm_nvrtc), cold / median(warm));
  std::printf("| prepare: plan, emit, cubins from the cache (median of %d) | %.1f ms | 0 | %.0fx |\n", repeat, median(prepare) * 1e3,
              cold / median(prepare));
  std::printf("| bundle write from the warm cache (%s) | %.1f ms | %d | |\n", fmt::format("{:.1f} MiB", rep->bytes / 1048576.0).c_str(),
              bundle_write * 1e3, 0);
  std::printf("| bundle load: read, check, plan, emit, images (median of %d) | %.1f ms | %lld | %.0fx |\n", repeat,
              median(bundle_load) * 1e3, static_cast<long long>(bundle_nvrtc), cold / median(bundle_load));
  return warm_nvrtc == 0 && bundle_nvrtc == 0 ? 0 : 1;
}
