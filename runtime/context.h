// A device's primary context, made current on the calling thread, with the device's DeviceInfo.
// layerjit uses the primary context (the one the CUDA runtime and PyTorch also use), so buffers and
// modules interoperate with other libraries in the same process.
#pragma once

#include "runtime/device_info.h"
#include "runtime/driver.h"

namespace lj::rt {

class Context {
 public:
  /// Retains device `ordinal`'s primary context (once per process; never released, like the
  /// driver) and makes it current on the calling thread. Fails with the no-driver message when
  /// there is no driver, and with "no CUDA device" when the driver sees none.
  static Result<Context*> get(int ordinal = 0);

  const Driver& driver() const { return *drv_; }
  const DriverApi& api() const { return drv_->api(); }
  const DeviceInfo& info() const { return info_; }
  CUcontext handle() const { return ctx_; }
  /// Makes this context current on the calling thread (e.g. a worker thread).
  Status make_current() const;
  /// Waits for all work on the device.
  Status synchronize() const;

 private:
  Context() = default;
  const Driver* drv_ = nullptr;
  CUcontext ctx_ = nullptr;
  DeviceInfo info_;
};

}  // namespace lj::rt
