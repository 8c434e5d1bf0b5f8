// `layerjit compile [FILE] --emit DIR [--arch sm_90a]`: generates and compiles (NVRTC, no GPU needed)
// every kernel of each graph's fusion plan and writes, per kernel, the .cu source, .ptx and .cubin,
// plus a manifest.json describing the kernels, their parameters and launch rules.
//
// Cubins go through the kernel cache, which holds cubins but not PTX. A kernel the cache lacks is
// compiled once for both; a cached kernel skips NVRTC for its cubin and gets its PTX from a PTX-only
// compile for the compute_XY target (no ptxas), whose text NVRTC makes identical to the PTX of the
// cubin compile, so a warm run writes the same files as a cold one.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cache/compile_cached.h"
#include "compiler/dump.h"
#include "runtime/kernel_compile.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kCompileUsage =
    "usage: layerjit compile [FILE] [--graph NAME] --emit DIR [--arch sm_XY[a]] [--no-fuse]\n"
    "\n"
    "Generates the kernels of every fusion group of each graph (default: the built-in Llama-3-8B layer)\n"
    "and compiles them with NVRTC for --arch (default sm_90; no GPU needed), in parallel, through the\n"
    "kernel cache (`layerjit cache`): a kernel compiled before loads its cubin from the cache. Writes\n"
    "DIR/<kernel>.cu, .ptx and .cubin for every kernel and DIR/manifest.json (kernels, files,\n"
    "parameters, launch rules, cache hits, compile times, and the groups whose kernel generators are\n"
    "not written yet). The cache keeps cubins only, so the PTX of a cached kernel comes from a\n"
    "PTX-only NVRTC compile (no ptxas), identical to the PTX of its cubin compile.\n";

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
                    {"swizzle", "128B"}});
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

int cmd_compile(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  FusionOptions fo;
  std::string arch = "sm_90";
  std::optional<std::string> dir;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--no-fuse") {
      fo.fuse = false;
    } else if (a == "--emit" || a == "--arch") {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      if (a == "--emit") dir = args[++i];
      else arch = args[++i];
    } else {
      rest.push_back(a);
    }
  }
  GraphOptions o = parse_graph_options(rest);
  if (o.help) {
    std::fputs(kCompileUsage, stdout);
    return kExitOk;
  }
  if (!dir) throw UsageError{"--emit DIR is required"};
  auto target = rt::Target::parse(arch);
  if (!target.ok() || target->ptx_only) throw UsageError{"--arch expects sm_XY or sm_XYa (e.g. sm_90a), got '" + arch + "'"};
  EmitOptions eo;
  eo.sm = target->sm;
  eo.arch_specific = target->arch_specific;
  eo.hint = o.bindings;  // --bind picks each matmul's kernel (GEMV for a few rows, else the GEMM)
  Module m = load_module(o);

  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  LJ_CHECK(!ec, SourceLoc{}, "cannot create {}: {}", *dir, ec.message());

  std::vector<GeneratedKernel> kernels;
  std::vector<std::shared_ptr<const Graph>> owner;
  nlohmann::json manifest = {{"arch", target->name()}, {"nvrtc", rt::nvrtc_version()}, {"fused", fo.fuse}};
  nlohmann::json skipped = nlohmann::json::array();
  for (const Graph& source : m.graphs) {
    const Lowered l = plan_graph(source, fo, o.bindings);
    const Graph& g = *l.graph;
    for (const FusionGroup& grp : l.plan.groups) {
      if (!has_emitter(grp.kind)) {
        skipped.push_back({{"graph", g.name()}, {"group", grp.id}, {"kind", std::string(group_kind_name(grp.kind))},
                           {"reason", "kernel generator not written yet"}});
        continue;
      }
      kernels.push_back(emit_kernel(g, grp, eo));
      owner.push_back(l.graph);
    }
  }
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> names;
  for (const auto& k : kernels) {
    jobs.push_back(rt::compile_job(k, *target));
    names.push_back(k.name);
  }
  cache::KernelCache kcache = cache::KernelCache::open_default();
  const auto t0 = std::chrono::steady_clock::now();
  // A job that asks for PTX always compiles, so ask only where the cubin must be compiled anyway.
  // The probe leaves hits in the cache's memory layer, where compile_many_cached finds them.
  for (rt::CompileJob& job : jobs)
    job.options.want_ptx = kcache.get(cache::compute_key(cache::key_components(job))).status != cache::LoadStatus::kHit;
  auto results = cache::compile_many_cached(kcache, jobs, names);
  // Cubins from the cache (also one that vanished between the probe and the compile) need their PTX.
  std::vector<rt::CompileJob> ptx_jobs;
  std::vector<size_t> ptx_of;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i].ok() || !results[i]->program.ptx.empty()) continue;
    rt::CompileJob job = jobs[i];
    job.target.ptx_only = true;
    job.options.want_ptx = false;
    ptx_jobs.push_back(std::move(job));
    ptx_of.push_back(i);
  }
  auto ptx = rt::compile_parallel(ptx_jobs);
  for (size_t j = 0; j < ptx_jobs.size(); ++j) {
    const GeneratedKernel& k = kernels[ptx_of[j]];
    if (!ptx[j].ok())
      throw InternalError(fmt::format("fusion group {} ({}): its cubin came from the cache but its PTX failed to "
                                      "compile for {}:\n{}",
                                      k.group, k.name, ptx_jobs[j].target.name(), ptx[j].message()));
    results[ptx_of[j]]->program.ptx = std::move(ptx[j]->ptx);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t hits = 0;

  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < kernels.size(); ++i) {
    const GeneratedKernel& k = kernels[i];
    if (!results[i].ok())
      throw InternalError(fmt::format("fusion group {} ({}) failed to compile for {}:\n{}", k.group, k.name, target->name(),
                                      results[i].message()));
    const rt::CompiledProgram& p = results[i]->program;
    hits += results[i]->hit;
    dump(DumpStage::Ptx, k.name, p.ptx);
    const std::filesystem::path base = std::filesystem::path(*dir) / k.name;
    const nlohmann::json files = {k.name + ".cu", k.name + ".ptx", k.name + ".cubin"};
    write_file(base.string() + ".cu", k.source);
    write_file(base.string() + ".ptx", p.ptx);
    write_file(base.string() + ".cubin", p.cubin);
    list.push_back({{"graph", owner[i]->name()},
                    {"group", k.group},
                    {"kernel", k.name},
                    {"cache", results[i]->hit ? "hit" : "compiled"},
                    {"cache_key", results[i]->key.hex()},
                    {"files", files},
                    {"params", params_json(*owner[i], k)},
                    {"launch", {{"grid_x", k.launch.str()},
                                {"threads", k.launch.threads},
                                {"dynamic_shared_bytes", k.launch.shared_bytes}}},
                    {"compile_ms", p.seconds * 1e3},
                    {"cubin_bytes", p.cubin.size()}});
  }
  manifest["kernels"] = list;
  manifest["not_generated"] = skipped;
  write_file(std::filesystem::path(*dir) / "manifest.json", manifest.dump(2) + "\n");
  std::printf("%zu kernels for %s in %.2f s (%zu from the cache, %zu compiled; PTX-only compiles for %zu) into %s (%zu "
              "groups without a generator yet: see manifest.json)\n",
              kernels.size(), target->name().c_str(), wall, hits, kernels.size() - hits, ptx_jobs.size(), dir->c_str(),
              skipped.size());
  return kExitOk;
}

}  // namespace lj::cli
