#include "jit/target.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/device_info.h"

namespace lj::jit {

namespace {

// cp.async, ldmatrix and bf16 mma.sync: every kernel family's floor (Ampere).
constexpr int kOldestSm = 80;

// The targets layerjit can compile for with this NVRTC: its archs from sm_80, each Hopper-or-newer one
// also with its arch-specific (a) variant.
std::string supported_list(const std::vector<int>& archs) {
  std::string out;
  for (int sm : archs) {
    if (sm < kOldestSm) continue;
    out += fmt::format("{}sm_{}", out.empty() ? "" : ", ", sm);
    if (sm >= 90) out += fmt::format(", sm_{}a", sm);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

rt::Result<JitTarget> JitTarget::of_device(const rt::Context& ctx, bool arch_specific) {
  LJ_RT_ASSIGN(std::vector<int> archs, rt::supported_archs());
  if (ctx.info().cc() < kOldestSm)
    return rt::Error{fmt::format("this GPU ({}, sm_{}) is older than layerjit's kernels need (sm_{} or newer: cp.async and bf16 tensor cores)",
                                 ctx.info().name, ctx.info().cc(), kOldestSm)};
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
  // Refused here, before any kernel reaches NVRTC or ptxas (whose errors would read as layerjit's bugs).
  LJ_RT_ASSIGN(std::vector<int> archs, rt::supported_archs());
  const std::string supported = fmt::format("supported with NVRTC {}: {}", rt::nvrtc_version(), supported_list(archs));
  if (target.sm < kOldestSm)
    return rt::Error{fmt::format("{}: layerjit's kernels need sm_{} or newer (cp.async and bf16 tensor cores); {}", arch, kOldestSm, supported)};
  if (std::find(archs.begin(), archs.end(), target.sm) == archs.end())
    return rt::Error{fmt::format("{}: not an architecture this NVRTC compiles for; {}", arch, supported)};
  if (target.arch_specific && target.sm < 90)
    return rt::Error{fmt::format("{}: arch-specific (a) targets start with sm_90a; {}", arch, supported)};
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
