#include "jit/target.h"

#include <fmt/format.h>

#include "runtime/device_info.h"

namespace lj::jit {

rt::Result<JitTarget> JitTarget::of_device(const rt::Context& ctx, bool arch_specific) {
  LJ_RT_ASSIGN(std::vector<int> archs, rt::supported_archs());
  LJ_RT_ASSIGN(rt::TargetChoice choice, rt::choose_target(ctx.info().cc(), arch_specific, archs, rt::nvrtc_version()));
  JitTarget t;
  t.target = choice.target;
  t.sm_count = ctx.info().sm_count;
  t.max_shared_bytes = ctx.info().max_smem_per_block_optin;
  t.driver_version = rt::format_cuda_version(ctx.info().driver_version);
  return t;
}

rt::Result<JitTarget> JitTarget::of_arch(std::string_view arch) {
  LJ_RT_ASSIGN(rt::Target target, rt::Target::parse(arch));
  if (target.ptx_only) return rt::Error{fmt::format("{}: expected a cubin target sm_XY or sm_XYa (e.g. sm_90a)", arch)};
  JitTarget t;
  t.target = target;
  return t;
}

EmitOptions JitTarget::emit_options(const Bindings& hint) const {
  EmitOptions eo;
  eo.sm = target.sm;
  eo.arch_specific = target.arch_specific;
  eo.hint = hint;
  eo.max_shared_bytes = max_shared_bytes;
  eo.sm_count = sm_count;
  return eo;
}

}  // namespace lj::jit
