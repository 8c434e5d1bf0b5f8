// `layerjit compile [FILE] --emit DIR [--arch sm_90a]`: generates and compiles (NVRTC, no GPU needed)
// every kernel of each graph's fusion plan and writes, per kernel, the .cu source, .ptx and .cubin,
// plus a manifest.json describing the kernels, their parameters and launch rules.
//
// Cubins and PTX go through the kernel cache (the PTX under the key of the kernel's compute_XY
// twin). A kernel the cache lacks is compiled once for both; a cached one is read, so a warm run
// writes the same files as a cold one with no NVRTC call. A cubin cached without its PTX (by `run`,
// say) gets it from a PTX-only compile (no ptxas), whose text NVRTC makes identical to the cubin
// compile's, stored for next time.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cache/location.h"
#include "runtime/context.h"
#include "runtime/nvrtc.h"
#include "tools/tp_report.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "layerjit/check.h"

namespace lj::cli {

const char* const kCompileUsage =
    "usage: layerjit compile [FILE] [--graph NAME] --emit DIR [--arch sm_XY[a]] [--ptx-only] [--no-fuse] [--tp N] [--quiet]\n"
    "\n"
    "Generates the kernels of every fusion group of each graph (default: the built-in Llama-3-8B layer)\n"
    "and compiles them with NVRTC for --arch (default: GPU 0's arch, else sm_90a; no GPU needed), in parallel, through the\n"
    "kernel cache (`layerjit cache`): a kernel compiled before loads its cubin from the cache. Writes\n"
    "DIR/<kernel>.cu, .ptx and .cubin for every kernel and DIR/manifest.json (kernels, files,\n"
    "parameters, launch rules, cache hits, compile times, and the groups whose kernel generators are\n"
    "not written yet). The cache keeps the PTX beside each cubin, so a second run makes no NVRTC call;\n"
    "the summary line counts the NVRTC compiles made. NVRTC runs in layerjit-compile-worker processes\n"
    "where that binary sits beside this one (LAYERJIT_COMPILE_WORKER, _JOBS, _TIMEOUT: docs/cache.md).\n"
    "On a machine whose GPU is the --arch target, the kernels are those `layerjit run` launches there:\n"
    "chosen for its SM count and shared memory, with `layerjit tune`'s stored winners for the --bind\n"
    "sizes (manifest.json names each kernel's config and where it came from).\n"
    "Every graph's kernels compile as one batch, the biggest first. Each kernel NVRTC compiles prints a\n"
    "progress line to stderr as it finishes ([k/N] over the batch, its time; the cache's kernels count as\n"
    "done at once); --quiet leaves only the summary line.\n"
    "--ptx-only: the PTX without ptxas (compute_XY[a]: the text a cubin compile gives, in about 60 % of\n"
    "the time), no .cubin files: for reading and diffing the PTX (the golden kernel check uses it).\n"
    "--tp N: the kernels of each graph's rank graph in an N-way tensor-parallel group (`layerjit plan\n"
    "--tp N`; docs/tp.md), the same on every rank; its all_reduces are NCCL calls, not kernels.\n";

namespace {
void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  LJ_CHECK(out.good(), SourceLoc{}, "cannot write {}", p.string());
}

nlohmann::json params_json(const Graph& g, const GeneratedKernel& k) {
  nlohmann::json ps = nlohmann::json::array();
  for (const KernelParam& p : k.params) {
    if (p.kind == KernelParam::Kind::Symbol) {
      ps.push_back({{"name", p.name}, {"kind", "symbol"}, {"type", "int64"}});
    } else if (p.kind == KernelParam::Kind::Scratch) {
      ps.push_back({{"name", p.name}, {"kind", "scratch"}, {"bytes_per_block", p.scratch_per_block}, {"zeroed", true}});
    } else if (p.kind == KernelParam::Kind::TensorMap) {
      ps.push_back({{"name", p.name},
                    {"kind", "tensor_map"},
                    {"value", "%" + g.value(p.buffer).name},
                    {"rows", p.tmap.rows.str()},
                    {"cols", p.tmap.cols},
                    {"row_stride", p.tmap.row_stride},
                    {"offset", p.tmap.offset},
                    {"box", {p.tmap.box_rows, p.tmap.box_cols}},
                    {"swizzle", p.tmap.swizzle_bytes > 0 ? fmt::format("{}B", p.tmap.swizzle_bytes) : "none"}});
    } else {
      ps.push_back({{"name", p.name},
                    {"kind", "buffer"},
                    {"value", "%" + g.value(p.buffer).name},
                    {"type", g.value(p.buffer).type.str()},
                    {"access", p.read && p.written ? "read_write" : p.written ? "write" : "read"}});
    }
  }
  return ps;
}
}  // namespace

jit::JitTarget target_for_arch(const std::string& arch) {
  auto t = jit::JitTarget::of_arch(arch);
  if (!t.ok()) throw UsageError{"--arch " + t.message()};
  // On a machine with a GPU of this arch: its SM count, shared memory and driver, so the kernels (and
  // the tuned configs) are those `layerjit run` launches there.
  if (auto ctx = rt::Context::get(0); ctx.ok())
    if (auto dev = jit::JitTarget::of_device(**ctx, t->target.arch_specific); dev.ok() && dev->target == t->target) return *dev;
  return *t;
}

jit::JitTarget target_for_arch(const std::optional<std::string>& arch) {
  if (arch) return target_for_arch(*arch);
  // No --arch: this machine's GPU, else the arch every figure in the README is for. Said on stderr,
  // so that output piped elsewhere stays the kernel's alone.
  if (auto ctx = rt::Context::get(0); ctx.ok())
    if (auto dev = jit::JitTarget::of_device(**ctx); dev.ok()) {
      std::fprintf(stderr, "layerjit: --arch %s (GPU 0's; --arch picks another)\n", dev->target.name().c_str());
      return *dev;
    }
  std::fprintf(stderr, "layerjit: --arch sm_90a (no GPU here; --arch picks another)\n");
  return target_for_arch(std::string("sm_90a"));
}

int cmd_compile(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  std::optional<std::string> arch;
  std::optional<std::string> dir;
  bool quiet = false;
  CommandLine cl("compile", kCompileUsage);
  cl.graph_options(o);
  cl.option("--emit", dir, "DIR", "where the .cu, .ptx, .cubin files and manifest.json go (required)");
  cl.option("--arch", arch, "sm_XY[a]", "the target (default: GPU 0's, else sm_90a)");
  cl.flag("--quiet", quiet, "no progress lines, only the summary");
  bool ptx_only = false;
  cl.flag("--ptx-only", ptx_only, "PTX without ptxas (compute_XY[a]), no .cubin files");
  int tp = 1;
  cl.option("--tp", [&tp](const std::string& v) { tp = parse_tp(v); }, "N", "the rank graph of an N-way tensor-parallel group (1-64)");
  fusion_flags(cl, fo);
  if (!cl.parse(args)) return kExitOk;
  if (!dir) throw UsageError{"--emit DIR is required"};
  jit::JitTarget target = target_for_arch(arch);
  // The kernels are emitted for the arch as ever; only NVRTC's output stops at the PTX.
  target.target.ptx_only = ptx_only;
  Module m = load_module(o);
  shard_module(m, tp);

  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  LJ_CHECK(!ec, SourceLoc{}, "cannot create {}: {}", *dir, ec.message());

  jit::PlanCompileOptions po;
  po.hint = o.bindings;  // --bind picks each matmul's kernel (GEMV for a few rows, else the GEMM)
  po.want_ptx = true;
  po.skip_ungenerated = true;
  if (!quiet)
    po.progress = [](const jit::CompileProgress& p) {
      if (p.cache_hit) return;  // counted in [k/N]; the summary says how many
      std::fprintf(stderr, "  [%zu/%zu] %s %s (%.2f s)\n", p.done, p.total, p.name.c_str(), p.ok ? "compiled" : "FAILED", p.seconds);
    };
  cache::KernelCache kcache(cache::DiskCache::open(cache::cache_options_from_env()));
  po.cache = &kcache;  // one memory layer for every graph of the module
  nlohmann::json manifest = {{"arch", target.target.name()}, {"nvrtc", rt::nvrtc_version()}, {"fused", fo.fuse}};
  nlohmann::json list = nlohmann::json::array();
  nlohmann::json skipped = nlohmann::json::array();
  size_t kernels = 0, hits = 0;
  double wall = 0;
  const int64_t nvrtc_before = rt::nvrtc_compile_count();
  // Every graph's kernels in one batch (one pool of compile workers, the biggest kernels first).
  std::vector<Lowered> lowered;
  for (const Graph& source : m.graphs) lowered.push_back(jit::plan(source, fo, o.bindings));
  std::vector<rt::Result<jit::CompiledPlan>> all = jit::compile_plans(target, lowered, po);
  for (size_t gi = 0; gi < lowered.size(); ++gi) {
    const Graph& g = *lowered[gi].graph;
    auto& compiled = all[gi];
    if (!compiled.ok()) throw InternalError(compiled.message());  // generated code must compile: a layerjit bug
    wall = compiled->compile_seconds;  // the batch's
    for (const jit::NotGenerated& n : compiled->not_generated)
      skipped.push_back({{"graph", g.name()}, {"group", n.group}, {"kind", std::string(group_kind_name(n.kind))}, {"reason", n.reason}});
    for (const jit::CompiledGroup& cg : compiled->groups) {
      const GeneratedKernel& k = cg.kernel;
      const rt::CompiledProgram& p = cg.compiled.program;
      ++kernels;
      hits += cg.compiled.cache_hit;
      const std::filesystem::path base = std::filesystem::path(*dir) / k.name;
      nlohmann::json files = {k.name + ".cu", k.name + ".ptx"};
      write_file(base.string() + ".cu", k.source);
      write_file(base.string() + ".ptx", p.ptx);
      if (!ptx_only) {
        files.push_back(k.name + ".cubin");
        write_file(base.string() + ".cubin", p.cubin);
      }
      list.push_back({{"graph", g.name()},
                      {"group", k.group},
                      {"kernel", k.name},
                      {"config", k.config},
                      {"config_source", cg.config_source},
                      {"cache", cg.compiled.cache_hit ? "hit" : "compiled"},
                      {"cache_key", cg.compiled.key.hex()},
                      {"files", files},
                      {"params", params_json(g, k)},
                      {"launch", {{"grid_x", k.launch.str()},
                                  {"threads", k.launch.threads},
                                  {"dynamic_shared_bytes", k.launch.shared_bytes}}},
                      {"compile_ms", p.seconds * 1e3},
                      {"cubin_bytes", p.cubin.size()}});
    }
  }
  manifest["kernels"] = list;
  manifest["not_generated"] = skipped;
  write_file(std::filesystem::path(*dir) / "manifest.json", manifest.dump(2) + "\n");
  std::printf("%zu kernels for %s in %.2f s (%zu from the cache, %zu compiled; %lld NVRTC compiles) into %s (%zu "
              "groups without a generator yet: see manifest.json)\n",
              kernels, target.target.name().c_str(), wall, hits, kernels - hits,
              static_cast<long long>(rt::nvrtc_compile_count() - nvrtc_before), dir->c_str(), skipped.size());
  return kExitOk;
}

}  // namespace lj::cli
