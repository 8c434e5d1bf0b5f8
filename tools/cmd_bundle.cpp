// `layerjit bundle`: writes an AOT bundle (jit/bundle.h) of every graph's fused plan for a list of
// archs, or checks one (`--verify`), with no GPU.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cache/location.h"
#include "jit/bundle.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kBundleUsage =
    "usage: layerjit bundle [FILE] [--graph NAME] [--bind T=4096,B=1,C=4096] --arch sm_80,sm_90a -o OUT.ljb\n"
    "                       [--no-fuse] [--no-tuned] [--quiet]\n"
    "       layerjit bundle --verify BUNDLE\n"
    "\n"
    "Writes one file holding the kernels of each graph's fused plan (default: the built-in Llama-3-8B\n"
    "layer, both graphs) for every --arch (comma-separated, repeatable), compiled ahead of time: the\n"
    "cubin and the PTX of each kernel, its config (and the tuner's figure where it was tuned) and a\n"
    "manifest (layerjit and NVRTC versions, each graph's hash, each payload's checksum). --bind gives\n"
    "the sizes the kernels are chosen for, each graph taking its own symbols (a plan built for other\n"
    "sizes will not find its kernels). Compiles through the kernel cache, NVRTC in worker processes as\n"
    "`layerjit compile` does; on a machine whose GPU is an --arch target the kernels are chosen for it,\n"
    "with `layerjit tune`'s winners unless --no-tuned; elsewhere for the arch alone (the H200's SM count\n"
    "and shared memory, default configs). The file is written beside OUT and renamed into place.\n"
    "`layerjit run --bundle OUT.ljb` (and BuildOptions::bundle) then loads every kernel from it with no\n"
    "NVRTC call: the cubin of the GPU's arch, else a compatible cubin (sm_80 on sm_86), else PTX that\n"
    "the driver compiles; a bundle of another layerjit version or graph is refused, naming why.\n"
    "--verify: checks every checksum and manifest field and that this layerjit can load it, lists the\n"
    "plans and kernels; exit 0 when sound, 1 with the reason when not.\n";

namespace {

std::vector<std::string> split_archs(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string a = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (a.empty()) throw UsageError{"--arch expects a comma-separated list such as sm_80,sm_90a, got '" + text + "'"};
    out.push_back(a);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

int verify(const std::string& path) {
  auto b = jit::Bundle::read(path);
  if (!b.ok()) throw UserError(b.message());
  std::fputs(b->describe().c_str(), stdout);
  if (rt::Status s = b->check_compatible(); !s.ok()) throw UserError(s.message());
  std::printf("bundle %s: sound (every checksum matches; this layerjit can load it)\n", path.c_str());
  return kExitOk;
}

}  // namespace

int cmd_bundle(const std::vector<std::string>& args) {
  GraphOptions o;
  jit::BundleWriteOptions bo;
  std::vector<std::string> archs;
  std::optional<std::string> out, verify_path;
  bool quiet = false;
  CommandLine cl("bundle", kBundleUsage);
  cl.graph_options(o);
  cl.option("--arch", [&archs](const std::string& v) { for (std::string& s : split_archs(v)) archs.push_back(std::move(s)); },
            "sm_XY[a],...", "the archs to compile for (required; repeatable)");
  cl.option("-o", out, "OUT.ljb", "the bundle to write (required)");
  cl.option("--verify", verify_path, "BUNDLE", "check a bundle instead of writing one");
  cl.flag("--no-tuned", [&bo] { bo.use_tuned = false; }, "default configs even where `layerjit tune` stored winners");
  cl.flag("--quiet", quiet, "no progress lines, only the summary");
  fusion_flags(cl, bo.fusion);
  if (!cl.parse(args)) return kExitOk;
  if (verify_path) {
    if (out || !archs.empty() || o.file || o.graph || !o.bindings.values.empty())
      throw UsageError{"--verify takes only the bundle to check"};
    return verify(*verify_path);
  }
  if (!out) throw UsageError{"-o OUT.ljb is required"};
  if (archs.empty()) throw UsageError{"--arch is required (e.g. --arch sm_90a or --arch sm_80,sm_90a)"};
  for (const std::string& a : archs) bo.targets.push_back(target_for_arch(a));
  for (size_t i = 0; i < bo.targets.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (bo.targets[i].target == bo.targets[j].target) throw UsageError{"--arch names " + bo.targets[i].target.name() + " twice"};
  bo.hint = o.bindings;
  const Module m = load_module(o);
  cache::KernelCache kcache(cache::DiskCache::open(cache::cache_options_from_env()));
  bo.cache = &kcache;
  if (!quiet)
    bo.progress = [](const jit::CompileProgress& p) {
      if (p.cache_hit) return;
      std::fprintf(stderr, "  [%zu/%zu] %s %s (%.2f s)\n", p.done, p.total, p.name.c_str(), p.ok ? "compiled" : "FAILED", p.seconds);
    };
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t nvrtc_before = rt::nvrtc_compile_count();
  auto rep = jit::write_bundle(*out, m.graphs, bo);
  if (!rep.ok()) throw UserError(rep.message());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("layerjit bundle: wrote %s: %zu plan(s), %zu kernels, %zu payloads (%s) for %zu arch(s); %d from the cache, %lld NVRTC "
              "compiles, %.2f s\n",
              out->c_str(), rep->plans, rep->kernels, rep->payloads, format_bytes(static_cast<double>(rep->bytes)).c_str(),
              bo.targets.size(), rep->cache_hits, static_cast<long long>(rt::nvrtc_compile_count() - nvrtc_before), wall);
  return kExitOk;
}

}  // namespace lj::cli
