// `layerjit devices` (see cmd_devices.h).
#include "tools/cmd_devices.h"

#include <cstdio>
#include <string_view>

#include <fmt/format.h>

#include "runtime/device_info.h"
#include "runtime/driver.h"
#include "runtime/nvrtc.h"

int cmd_devices(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      fmt::print("usage: layerjit devices\n  lists the CUDA devices and the NVRTC target for each\n");
      return 0;
    }
    fmt::print(stderr, "error: layerjit devices takes no arguments, got `{}`\n", arg);
    return 2;
  }
  auto drv = lj::rt::Driver::get();
  if (!drv.ok()) {
    fmt::print(stderr, "error: {}\n", drv.message());
    return 1;
  }
  auto count = lj::rt::device_count(**drv);
  if (!count.ok()) {
    fmt::print(stderr, "error: {}\n", count.message());
    return 1;
  }
  if (*count == 0) {
    fmt::print(stderr, "error: no CUDA device: the CUDA driver ({}) is loaded but sees no GPU\n",
               lj::rt::format_cuda_version((*drv)->version()));
    return 1;
  }
  auto archs = lj::rt::supported_archs();
  const std::string nvrtc = lj::rt::nvrtc_version();
  fmt::print("CUDA driver {} ({}), NVRTC {}\n", lj::rt::format_cuda_version((*drv)->version()),
             (*drv)->library(), nvrtc);
  for (int d = 0; d < *count; ++d) {
    auto info = lj::rt::query_device(**drv, d);
    if (!info.ok()) {
      fmt::print(stderr, "error: device {}: {}\n", d, info.message());
      return 1;
    }
    fmt::print("{}", info->format());
    if (archs.ok()) {
      // Hopper and later have arch-specific instructions layerjit uses where it can (sm_90a).
      auto choice = lj::rt::choose_target(info->cc(), info->cc_major >= 9, *archs, nvrtc);
      if (choice.ok()) {
        fmt::print("  NVRTC target         {}\n", choice->target.name());
        if (!choice->warning.empty()) fmt::print("  {}\n", choice->warning);
      } else {
        fmt::print("  NVRTC target         none: {}\n", choice.message());
      }
    }
  }
  return 0;
}
