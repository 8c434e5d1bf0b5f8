// What layerjit needs to know about a GPU to pick targets, prune tile configurations and compute
// rooflines: read once from the driver per device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/driver.h"

namespace lj::rt {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  /// Largest dynamic shared memory a block may opt into (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
  int max_smem_per_block_optin = 0;
  /// Shared memory a block gets without opting in (48 KB on every current GPU).
  int max_smem_per_block_default = 0;
  int max_smem_per_sm = 0;
  int regs_per_sm = 0;
  int regs_per_block = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
  int l2_bytes = 0;
  int sm_clock_khz = 0;
  int mem_clock_khz = 0;
  int mem_bus_bits = 0;
  std::uint64_t total_mem_bytes = 0;
  int driver_version = 0;  ///< e.g. 13000

  /// Compute capability as one number: 90 for 9.0.
  int cc() const { return cc_major * 10 + cc_minor; }
  /// Theoretical DRAM bandwidth, bytes/s: two transfers per memory clock (DDR) across the bus.
  double theoretical_bandwidth() const {
    return 2.0 * static_cast<double>(mem_clock_khz) * 1e3 * static_cast<double>(mem_bus_bits) / 8.0;
  }
  /// A multi-line, human-readable description (what `layerjit devices` prints).
  std::string format() const;
};

/// Number of CUDA devices the driver sees.
Result<int> device_count(const Driver& drv);
/// Reads every field of DeviceInfo for one device.
Result<DeviceInfo> query_device(const Driver& drv, int ordinal);
/// "13.0" from 13000.
std::string format_cuda_version(int version);

}  // namespace lj::rt
