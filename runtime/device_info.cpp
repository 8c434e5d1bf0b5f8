// Device attributes read through the driver (see device_info.h).
#include "runtime/device_info.h"

#include <array>

#include <fmt/format.h>

namespace lj::rt {

std::string format_cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

Result<int> device_count(const Driver& drv) {
  int n = 0;
  LJ_CU(drv, cuDeviceGetCount, &n);
  return n;
}

Result<DeviceInfo> query_device(const Driver& drv, int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  CUdevice dev = 0;
  LJ_CU(drv, cuDeviceGet, &dev, ordinal);
  std::array<char, 256> name{};
  LJ_CU(drv, cuDeviceGetName, name.data(), static_cast<int>(name.size()), dev);
  info.name = name.data();
  struct Attr {
    CUdevice_attribute attr;
    int* out;
  };
  const Attr attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.sm_count},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info.max_smem_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &info.max_smem_per_block_default},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &info.max_smem_per_sm},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &info.regs_per_sm},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &info.regs_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info.max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &info.warp_size},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &info.l2_bytes},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &info.sm_clock_khz},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &info.mem_clock_khz},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &info.mem_bus_bits},
  };
  for (const Attr& a : attrs) {
    LJ_CU(drv, cuDeviceGetAttribute, a.out, a.attr, dev);
  }
  size_t total = 0;
  LJ_CU(drv, cuDeviceTotalMem, &total, dev);
  info.total_mem_bytes = total;
  info.driver_version = drv.version();
  return info;
}

std::string DeviceInfo::format() const {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return fmt::format(
      "device {}: {}\n"
      "  compute capability   {}.{} (sm_{})\n"
      "  multiprocessors      {}\n"
      "  shared memory/block  {} KiB opt-in ({} KiB default), {} KiB per SM\n"
      "  registers            {} per SM, {} per block\n"
      "  L2 cache             {:.1f} MiB\n"
      "  memory               {:.1f} GiB, {} MHz x {}-bit bus = {:.0f} GB/s theoretical\n"
      "  SM clock             {} MHz\n"
      "  driver               CUDA {}\n",
      ordinal, name, cc_major, cc_minor, cc(), sm_count, max_smem_per_block_optin / 1024,
      max_smem_per_block_default / 1024, max_smem_per_sm / 1024, regs_per_sm, regs_per_block,
      l2_bytes / (1024.0 * 1024.0), static_cast<double>(total_mem_bytes) / kGiB, mem_clock_khz / 1000,
      mem_bus_bits, theoretical_bandwidth() / 1e9, sm_clock_khz / 1000, format_cuda_version(driver_version));
}

}  // namespace lj::rt
