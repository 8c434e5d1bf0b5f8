#include "jit/compile_kernels.h"

#include <fmt/format.h>

#include "codegen/device_headers.h"
#include "runtime/embedded_headers.h"

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

std::vector<rt::Result<CompiledKernel>> compile_jobs(std::span<const rt::CompileJob> jobs, std::span<const std::string> names,
                                                     const KernelCompileOptions& options) {
  std::vector<rt::Result<CompiledKernel>> out(jobs.size(), rt::Error{"not compiled"});
  std::vector<cache::KeyComponents> comps(jobs.size());
  // NVRTC work: the cubin (and PTX) of a miss, or only the PTX of a hit.
  std::vector<rt::CompileJob> todo;
  std::vector<size_t> todo_of;
  std::vector<bool> ptx_of_hit;
  for (size_t i = 0; i < jobs.size(); ++i) {
    rt::CompileJob job = jobs[i];
    job.options.want_ptx = job.options.want_ptx || options.want_ptx;
    CompiledKernel c;
    if (options.cache) {
      comps[i] = key_components(jobs[i]);  // want_ptx changes nothing NVRTC is told for the cubin
      c.key = cache::compute_key(comps[i]);
      if (!job.target.ptx_only) {
        cache::LoadResult r = options.cache->get(c.key);
        if (r.status == cache::LoadStatus::kHit) {
          c.cache_hit = true;
          c.program.target = job.target;
          c.program.cubin = r.entry->cubin;
          c.program.options = comps[i].options;
          out[i] = std::move(c);
          if (job.options.want_ptx) {
            job.target.ptx_only = true;
            job.options.want_ptx = false;
            todo.push_back(std::move(job));
            todo_of.push_back(i);
            ptx_of_hit.push_back(true);
          }
          continue;
        }
      }
    }
    out[i] = std::move(c);
    todo.push_back(std::move(job));
    todo_of.push_back(i);
    ptx_of_hit.push_back(false);
  }
  auto compiled = rt::compile_parallel(todo, options.workers);
  for (size_t t = 0; t < todo.size(); ++t) {
    const size_t i = todo_of[t];
    if (!compiled[t].ok()) {
      out[i] = ptx_of_hit[t] ? rt::Error{fmt::format("the PTX-only compile (its cubin came from the cache) failed:\n{}", compiled[t].message())}
                             : compiled[t].status();
      continue;
    }
    if (ptx_of_hit[t]) {
      out[i]->program.ptx = std::move(compiled[t]->ptx);
      continue;
    }
    out[i]->program = std::move(*compiled[t]);
    const rt::CompiledProgram& p = out[i]->program;
    if (options.cache && !p.cubin.empty())
      options.cache->put(comps[i], p.cubin, cache::KernelInfo{names[i], p.seconds, {}, {}});
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
      out[i] = rt::Error{fmt::format("fusion group {} ({}) failed to compile for {}:\n{}", kernels[i].group, kernels[i].name,
                                     jobs[i].target.name(), out[i].message())};
  return out;
}

rt::Result<rt::KernelResources> kernel_resources(const GeneratedKernel& k, const rt::Target& target) {
  auto r = rt::kernel_resources(compile_job(k, target), k.name);
  if (!r.ok()) return rt::Error{fmt::format("fusion group {} ({}) for {}: {}", k.group, k.name, target.name(), r.message())};
  return r;
}

}  // namespace lj::jit
