// Kernel launch (see launch.h).
#include "runtime/launch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runtime/graph.h"

namespace lj::rt {
namespace {

bool debug_default() {
#ifndef NDEBUG
  return true;
#else
  const char* env = std::getenv("LAYERJIT_SYNC_LAUNCHES");
  return env != nullptr && std::strcmp(env, "1") == 0;
#endif
}

std::atomic<bool>& debug_flag() {
  static std::atomic<bool> flag{debug_default()};
  return flag;
}

}  // namespace

bool debug_launch_checks() { return debug_flag().load(std::memory_order_relaxed); }
void set_debug_launch_checks(bool on) { debug_flag().store(on, std::memory_order_relaxed); }

void** KernelArgs::pointers() {
  pointers_.resize(offsets_.size());
  for (size_t i = 0; i < offsets_.size(); ++i) pointers_[i] = storage_.data() + offsets_[i];
  return pointers_.data();
}

Status check_kernel_args(const Kernel& kernel, const KernelArgs& args) {
  if (!kernel.param_sizes_known()) return {};
  const std::vector<size_t>& want = kernel.param_sizes();
  if (want.size() != args.count()) {
    return Error{fmt::format("kernel `{}` takes {} argument(s) but the launch passes {}", kernel.name(),
                             want.size(), args.count())};
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != args.sizes()[i]) {
      return Error{fmt::format("kernel `{}` argument {} is {} bytes but the launch passes {} bytes", kernel.name(),
                               i, want[i], args.sizes()[i])};
    }
  }
  return {};
}

Status launch(Stream& stream, Kernel& kernel, const LaunchConfig& config, KernelArgs& args) {
  const Driver& drv = stream.context().driver();
  LJ_RT_TRY(check_kernel_args(kernel, args));
  LJ_RT_TRY(kernel.allow_dynamic_smem(static_cast<int>(config.dynamic_smem)));

  CUlaunchConfig lc{};
  lc.gridDimX = config.grid.x;
  lc.gridDimY = config.grid.y;
  lc.gridDimZ = config.grid.z;
  lc.blockDimX = config.block.x;
  lc.blockDimY = config.block.y;
  lc.blockDimZ = config.block.z;
  lc.sharedMemBytes = config.dynamic_smem;
  lc.hStream = stream.handle();
  CUlaunchAttribute attr{};
  if (config.programmatic) {
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &attr;
    lc.numAttrs = 1;
  }
  if (CUresult r = drv.api().cuLaunchKernelEx_(&lc, kernel.handle(), args.pointers(), nullptr); r != CUDA_SUCCESS) {
    return Error{fmt::format("launching `{}` (grid {}x{}x{}, block {}x{}x{}, {} bytes dynamic shared memory): {}",
                             kernel.name(), config.grid.x, config.grid.y, config.grid.z, config.block.x,
                             config.block.y, config.block.z, config.dynamic_smem,
                             drv.describe(r, "cuLaunchKernelEx"))};
  }
  if (std::vector<CapturedLaunch>* log = stream.capture_log(); log != nullptr) {
    // While capturing, the stream's only dependency after a launch is the node the launch became.
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode* deps = nullptr;
    size_t ndeps = 0;
    LJ_CU(drv, cuStreamGetCaptureInfo, stream.handle(), &status, nullptr, nullptr, &deps, nullptr, &ndeps);
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || ndeps != 1) {
      return Error{fmt::format("internal error: capturing `{}` left {} dependencies (please report)",
                               kernel.name(), ndeps)};
    }
    log->push_back(CapturedLaunch{deps[0], kernel.name(), kernel.param_sizes(), kernel.param_sizes_known()});
    return {};
  }
  if (debug_launch_checks()) {
    LJ_RT_ASSIGN(bool capturing, stream.capturing());
    if (!capturing) {
      if (CUresult r = drv.api().cuStreamSynchronize_(stream.handle()); r != CUDA_SUCCESS) {
        return Error{fmt::format("kernel `{}` failed: {}", kernel.name(), drv.describe(r, "cuStreamSynchronize"))};
      }
    }
  }
  return {};
}

}  // namespace lj::rt
