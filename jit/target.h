// What the JIT compiles for: the NVRTC target and the device facts that shape generated code (SM
// count, opt-in shared memory) and key its tuning records (the driver version). Taken from a device
// (`of_device`), or from an arch name alone on a machine without one (`of_arch`: the H200's counts,
// no driver, so no tuning record can match).
#pragma once

#include <string>
#include <string_view>

#include "codegen/kernel.h"
#include "runtime/context.h"
#include "runtime/nvrtc.h"

namespace lj::jit {

struct JitTarget {
  rt::Target target;
  int sm_count = 132;
  int max_shared_bytes = 227 * 1024;
  /// "13.0": the CUDA driver's version, part of every tuning key; empty without a device.
  std::string driver_version;

  /// `ctx`'s device: a cubin for its arch (arch-specific, sm_90a, where asked and NVRTC has it; PTX
  /// for a device newer than NVRTC), its SMs and shared-memory limit, its driver.
  static rt::Result<JitTarget> of_device(const rt::Context& ctx, bool arch_specific = true);
  /// `arch` ("sm_90a", "sm_80") with no device. A PTX-only target (compute_XY) is refused: the JIT
  /// writes cubins.
  static rt::Result<JitTarget> of_arch(std::string_view arch);

  /// Emission for this target, the kernels chosen for the symbol values `hint`.
  EmitOptions emit_options(const Bindings& hint = {}) const;
};

}  // namespace lj::jit
