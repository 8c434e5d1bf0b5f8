// Compiling generated kernels with NVRTC.
#include "runtime/kernel_compile.h"

#include <fmt/format.h>

#include "codegen/device_headers.h"

namespace lj::rt {

CompileJob compile_job(const GeneratedKernel& k, const Target& target, bool want_ptx) {
  CompileJob job;
  job.source = k.source;
  job.options.program_name = k.name + ".cu";
  job.options.headers = codegen_device_headers();
  job.options.want_ptx = want_ptx;
  job.target = target;
  // A kernel emitted for sm_XYa (wgmma) compiles only for that target; sm_XYa code runs on exactly
  // the devices sm_XY code runs on, so the rest of the plan may keep the plain target.
  if (k.arch_specific && !target.ptx_only) job.target.arch_specific = true;
  return job;
}

EmitOptions device_emit_options(const Context& ctx, const Target& target, const Bindings& hint) {
  EmitOptions eo;
  eo.sm = target.sm;
  eo.arch_specific = target.arch_specific;
  eo.hint = hint;
  eo.max_shared_bytes = ctx.info().max_smem_per_block_optin;
  eo.sm_count = ctx.info().sm_count;
  return eo;
}

Result<CompiledProgram> compile_kernel(const GeneratedKernel& k, const Target& target, bool want_ptx) {
  CompileJob job = compile_job(k, target, want_ptx);
  auto r = compile(job.source, job.options, job.target);
  if (!r.ok()) return Error{fmt::format("fusion group {} ({}) failed to compile for {}:\n{}", k.group, k.name, job.target.name(), r.message())};
  return r;
}

}  // namespace lj::rt
