// compile_cached: NVRTC behind the kernel cache.
#include "cache/compile_cached.h"

#include "runtime/embedded_headers.h"

namespace lj::cache {

KeyComponents key_components(const rt::CompileJob& job) {
  KeyComponents c;
  c.source = job.source;
  c.options = rt::nvrtc_options(job.options, job.target);
  c.arch = job.target.name();
  c.nvrtc_version = rt::nvrtc_version();
  // compile() passes the runtime's embedded headers to every program, then the job's own.
  std::vector<std::pair<std::string_view, std::string_view>> headers(rt::embedded_headers().begin(),
                                                                     rt::embedded_headers().end());
  headers.insert(headers.end(), job.options.headers.begin(), job.options.headers.end());
  c.device_headers_hash = hash_device_headers(headers);
  c.env = capture_code_env();
  return c;
}

rt::Result<CachedCompile> compile_cached(KernelCache& cache, const rt::CompileJob& job, std::string_view kernel_name) {
  const KeyComponents c = key_components(job);
  CachedCompile out;
  out.key = compute_key(c);
  if (!job.options.want_ptx && !job.target.ptx_only) {
    LoadResult r = cache.get(out.key);
    if (r.status == LoadStatus::kHit) {
      out.hit = true;
      out.program.target = job.target;
      out.program.cubin = r.entry->cubin;
      out.program.options = c.options;
      return out;
    }
  }
  auto prog = rt::compile(job.source, job.options, job.target);
  if (!prog.ok()) return prog.status();
  out.program = std::move(*prog);
  if (!out.program.cubin.empty()) cache.put(c, out.program.cubin, KernelInfo{std::string(kernel_name), out.program.seconds, {}, {}});
  return out;
}

std::vector<rt::Result<CachedCompile>> compile_many_cached(KernelCache& cache, std::span<const rt::CompileJob> jobs,
                                                           std::span<const std::string> kernel_names) {
  std::vector<rt::Result<CachedCompile>> out(jobs.size(), rt::Error{"not compiled"});
  std::vector<KeyComponents> comps;
  std::vector<rt::CompileJob> misses;
  std::vector<size_t> miss_index;
  for (size_t i = 0; i < jobs.size(); ++i) {
    comps.push_back(key_components(jobs[i]));
    CachedCompile c;
    c.key = compute_key(comps.back());
    if (!jobs[i].options.want_ptx && !jobs[i].target.ptx_only) {
      LoadResult r = cache.get(c.key);
      if (r.status == LoadStatus::kHit) {
        c.hit = true;
        c.program.target = jobs[i].target;
        c.program.cubin = r.entry->cubin;
        c.program.options = comps.back().options;
        out[i] = std::move(c);
        continue;
      }
    }
    misses.push_back(jobs[i]);
    miss_index.push_back(i);
  }
  auto compiled = rt::compile_parallel(misses);
  for (size_t m = 0; m < misses.size(); ++m) {
    const size_t i = miss_index[m];
    if (!compiled[m].ok()) {
      out[i] = compiled[m].status();
      continue;
    }
    CachedCompile c;
    c.key = compute_key(comps[i]);
    c.program = std::move(*compiled[m]);
    if (!c.program.cubin.empty())
      cache.put(comps[i], c.program.cubin, KernelInfo{kernel_names[i], c.program.seconds, {}, {}});
    out[i] = std::move(c);
  }
  return out;
}

}  // namespace lj::cache
