#include "jit/compile_kernels.h"

#include "compiler/dump.h"

#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "codegen/device_headers.h"
#include "runtime/embedded_headers.h"
#include "runtime/kernel_resources.h"

namespace lj::jit {

rt::CompileJob compile_job(const GeneratedKernel& k, const rt::Target& target) {
  rt::CompileJob job;
  job.source = k.source;
  job.options.program_name = k.name + ".cu";
  job.options.headers = codegen_device_headers();
  job.target = target;
  if (k.arch_specific && !target.ptx_only) job.target.arch_specific = true;
  return job;
}

std::string current_device_headers_hash() { return key_components(compile_job(GeneratedKernel{}, rt::Target{90})).device_headers_hash; }

cache::KeyComponents key_components(const rt::CompileJob& job) {
  cache::KeyComponents c;
  c.source = job.source;
  c.options = rt::nvrtc_options(job.options, job.target);
  c.arch = job.target.name();
  c.nvrtc_version = rt::nvrtc_version();
  // compile() passes the runtime's embedded headers to every program, then the job's own.
  std::vector<std::pair<std::string_view, std::string_view>> headers(rt::embedded_headers().begin(), rt::embedded_headers().end());
  headers.insert(headers.end(), job.options.headers.begin(), job.options.headers.end());
  c.device_headers_hash = cache::hash_device_headers(headers);
  c.env = cache::capture_code_env();
  return c;
}

namespace {

// The PTX-only twin of a cubin job: NVRTC's text for it is the cubin compile's PTX, so the cache
// keeps a kernel's PTX under this job's key (arch compute_XY) beside its cubin.
rt::CompileJob ptx_job(rt::CompileJob job) {
  job.target.ptx_only = true;
  job.options.want_ptx = false;
  return job;
}

}  // namespace

std::vector<rt::Result<CompiledKernel>> compile_jobs(std::span<const rt::CompileJob> jobs, std::span<const std::string> names,
                                                     const KernelCompileOptions& options) {
  std::vector<rt::Result<CompiledKernel>> out(jobs.size(), rt::Error{"not compiled"});
  // What NVRTC must still do: the cubin (and PTX) of a miss, or only the PTX of a cubin hit whose
  // PTX is not cached either. A PTX-only target's image is its PTX, cached under its own key.
  struct Todo {
    size_t index;
    rt::CompileJob job;
    bool ptx_of_hit = false;             // the cubin came from the cache: this compile is for its PTX
    cache::KeyComponents store;          // what the result is stored under (cubin, or PTX-only image)
    std::optional<cache::KeyComponents> store_ptx;  // and the PTX of a cubin compile, under its twin's key
  };
  std::vector<Todo> todo;
  auto cached = [&](const cache::KeyComponents& c, const std::string& name) -> std::optional<std::string> {
    const cache::CacheKey key = cache::compute_key(c);
    cache::LoadResult r = options.cache->get(key);
    if (log_enabled(LogCategory::Cache))
      log_line(LogCategory::Cache, fmt::format("{} {} {} ({}){}", r.status == cache::LoadStatus::kHit ? "hit " : "miss", key.hex(), name,
                                               c.arch, r.detail.empty() ? "" : ": " + r.detail));
    if (r.status != cache::LoadStatus::kHit) return std::nullopt;
    return r.entry->cubin;
  };
  auto store = [&](const cache::KeyComponents& c, std::string_view image, const cache::KernelInfo& info) {
    const cache::StoreResult r = options.cache->put(c, image, info);
    if (log_enabled(LogCategory::Cache))
      log_line(LogCategory::Cache, fmt::format("{} {} {} ({}){}", r.error.empty() ? "stored" : "not stored", r.key.hex(), info.kernel_name, c.arch,
                                               r.error.empty() ? "" : ": " + r.error));
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    rt::CompileJob job = jobs[i];
    job.options.want_ptx = (job.options.want_ptx || options.want_ptx) && !job.target.ptx_only;
    CompiledKernel c;
    c.program.target = job.target;
    if (!options.cache) {
      out[i] = std::move(c);
      todo.push_back(Todo{i, std::move(job)});
      continue;
    }
    const cache::KeyComponents comps = key_components(jobs[i]);  // want_ptx changes nothing NVRTC is told for the cubin
    c.key = cache::compute_key(comps);
    c.program.options = comps.options;
    if (std::optional<std::string> image = cached(comps, names[i])) {
      c.cache_hit = true;
      (job.target.ptx_only ? c.program.ptx : c.program.cubin) = std::move(*image);
      if (job.options.want_ptx) {
        rt::CompileJob pj = ptx_job(job);
        cache::KeyComponents pc = key_components(pj);
        if (std::optional<std::string> ptx = cached(pc, names[i])) {
          c.program.ptx = std::move(*ptx);
        } else {
          out[i] = std::move(c);
          todo.push_back(Todo{i, std::move(pj), true, std::move(pc)});
          continue;
        }
      }
      out[i] = std::move(c);
      continue;
    }
    out[i] = std::move(c);
    Todo t{i, job, false, comps};
    if (job.options.want_ptx) t.store_ptx = key_components(ptx_job(job));
    todo.push_back(std::move(t));
  }
  // Progress: the hits are done now; each compile as it finishes (serialised here).
  std::mutex progress_mutex;
  size_t finished = 0;
  auto report = [&](size_t i, bool hit, bool ok, double seconds) {
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex);
    options.progress(CompileProgress{++finished, jobs.size(), names[i], hit, ok, seconds, i});
  };
  {
    std::vector<bool> pending(jobs.size(), false);
    for (const Todo& t : todo) pending[t.index] = true;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!pending[i]) report(i, true, true, 0);
  }
  std::vector<rt::CompileJob> batch;
  for (const Todo& t : todo) batch.push_back(t.job);
  auto compiled = rt::compile_parallel(batch, options.workers, [&](size_t n, const rt::Result<rt::CompiledProgram>& r) {
    if (log_enabled(LogCategory::Compile))
      log_line(LogCategory::Compile, r.ok() ? fmt::format("{} for {}{}: {:.3f} s", names[todo[n].index], batch[n].target.name(),
                                                          todo[n].ptx_of_hit ? " (PTX only)" : "", r->seconds)
                                            : fmt::format("{} for {}: failed", names[todo[n].index], batch[n].target.name()));
    report(todo[n].index, todo[n].ptx_of_hit, r.ok(), r.ok() ? r->seconds : 0);
  });
  for (size_t n = 0; n < todo.size(); ++n) {
    const Todo& t = todo[n];
    const size_t i = t.index;
    if (!compiled[n].ok()) {
      out[i] = t.ptx_of_hit ? rt::Error{fmt::format("the PTX-only compile (its cubin came from the cache) failed:\n{}", compiled[n].message())}
                            : compiled[n].status();
      continue;
    }
    rt::CompiledProgram& p = *compiled[n];
    cache::KernelInfo info{names[i], p.seconds, {}, {}};
    if (std::optional<rt::KernelResources> res = rt::parse_ptxas_info(p.log, names[i])) {
      info.registers = res->registers;
      info.spill_bytes = static_cast<int>(res->spill_store_bytes + res->spill_load_bytes);
    }
    if (t.ptx_of_hit) {
      if (options.cache) store(t.store, p.ptx, info);
      out[i]->program.ptx = std::move(p.ptx);
      continue;
    }
    if (options.cache) {
      if (!p.image().empty()) store(t.store, p.image(), info);
      if (t.store_ptx && !p.ptx.empty()) store(*t.store_ptx, p.ptx, info);
    }
    out[i]->program = std::move(p);
  }
  return out;
}

std::vector<rt::Result<CompiledKernel>> compile_kernels(std::span<const GeneratedKernel> kernels, const rt::Target& target,
                                                        const KernelCompileOptions& options) {
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> names;
  for (const GeneratedKernel& k : kernels) {
    jobs.push_back(compile_job(k, target));
    names.push_back(k.name);
  }
  auto out = compile_jobs(jobs, names, options);
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].ok())
      out[i] = rt::Error{fmt::format("fusion group {} ({}{}) failed to compile for {}:\n{}", kernels[i].group, kernels[i].name,
                                     kernels[i].config.empty() ? "" : fmt::format(", config '{}'", kernels[i].config),
                                     jobs[i].target.name(), out[i].message())};
  return out;
}

rt::Result<rt::KernelResources> kernel_resources(const GeneratedKernel& k, const rt::Target& target) {
  auto r = rt::kernel_resources(compile_job(k, target), k.name);
  if (!r.ok()) return rt::Error{fmt::format("fusion group {} ({}) for {}: {}", k.group, k.name, target.name(), r.message())};
  return r;
}

}  // namespace lj::jit
