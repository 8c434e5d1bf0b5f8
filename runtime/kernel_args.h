// Packing a generated kernel's arguments for a launch: one place that knows every parameter kind
// (layerjit/kernel_abi.h), so the executable, the tests, the benchmarks and the autotuner agree on the ABI.
#pragma once

#include <functional>

#include "layerjit/kernel_abi.h"
#include "runtime/context.h"
#include "runtime/launch.h"

namespace lj::rt {

/// Where the memory comes from; the caller owns it.
struct ArgSources {
  /// The device memory of a graph value (for Buffer and TensorMap parameters).
  std::function<Result<CUdeviceptr>(ValueId)> buffer;
  /// Zeroed scratch of `bytes` (Scratch parameters; see KernelParam::Kind::Scratch).
  std::function<Result<CUdeviceptr>(size_t bytes)> scratch;
};

/// The arguments of `k` in parameter order for the symbol values `b`: symbols as int64, buffers and
/// scratch from `src`, tensor maps encoded over the memory `src.buffer` gives (an encoding error
/// names the kernel and the parameter).
Result<KernelArgs> pack_kernel_args(const Context& ctx, const KernelAbi& k, const Bindings& b, const ArgSources& src);

}  // namespace lj::rt
