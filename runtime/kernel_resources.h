// What a compiled kernel uses per thread and per block, as ptxas reports it when asked
// (`--ptxas-options=-v`): registers, stack, spill traffic, static shared memory, named barriers.
// A spill in a tensor-core kernel is a performance bug that no output check sees, and so are ptxas's
// "Potential Performance Loss" notes on Hopper: setmaxnreg ignored (C7507, C7508: every thread then
// keeps the launch's cap, 168 registers in a 384-thread CTA) and wgmma serialized (C7510, C7511...).
// The tests check for all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/nvrtc.h"
#include "runtime/result.h"

namespace lj::rt {

struct KernelResources {
  int registers = 0;  ///< per thread
  int64_t stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0;
  int64_t static_shared_bytes = 0;
  int barriers = 0;
  bool setmaxnreg_ignored = false;  ///< ptxas dropped the kernel's register re-allocation
  bool wgmma_serialized = false;    ///< ptxas made the kernel wait for each wgmma
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
  /// Any of ptxas's performance-loss notes above.
  bool performance_loss() const { return setmaxnreg_ignored || wgmma_serialized; }
  /// "168 registers, no spills, 0 bytes stack, 0 bytes static shared memory, 1 barrier", then
  /// "; setmaxnreg ignored by ptxas" / "; wgmma serialized by ptxas" where those happened.
  std::string str() const;
};

/// The resources of entry `kernel` in a ptxas verbose log (the lines from "Compiling entry function
/// 'kernel'" to the next entry), or nullopt when the log does not report that kernel.
std::optional<KernelResources> parse_ptxas_info(std::string_view log, std::string_view kernel);

/// Compiles `job` with ptxas reporting and returns what its entry `kernel` uses. A compile failure
/// is returned as compile() gives it (the caller names the group).
Result<KernelResources> kernel_resources(CompileJob job, std::string_view kernel);

}  // namespace lj::rt
