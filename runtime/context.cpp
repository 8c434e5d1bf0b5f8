// Primary-context handling (see context.h).
#include "runtime/context.h"

#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace lj::rt {

Result<Context*> Context::get(int ordinal) {
  static std::mutex mu;
  static std::map<int, Context*> contexts;  // never freed: contexts live for the process
  LJ_RT_ASSIGN(const Driver* drv, Driver::get());
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = contexts.find(ordinal); it != contexts.end()) {
    LJ_RT_TRY(it->second->make_current());
    return it->second;
  }
  LJ_RT_ASSIGN(int count, device_count(*drv));
  if (count == 0) return Error{"no CUDA device: the CUDA driver is loaded but sees no GPU"};
  if (ordinal < 0 || ordinal >= count) {
    return Error{fmt::format("no CUDA device {}: the driver sees {} device(s)", ordinal, count)};
  }
  std::unique_ptr<Context> c(new Context());
  c->drv_ = drv;
  CUdevice dev = 0;
  LJ_CU(*drv, cuDeviceGet, &dev, ordinal);
  LJ_CU(*drv, cuDevicePrimaryCtxRetain, &c->ctx_, dev);
  LJ_RT_TRY(c->make_current());
  LJ_RT_ASSIGN(c->info_, query_device(*drv, ordinal));
  Context* raw = c.release();
  contexts.emplace(ordinal, raw);
  return raw;
}

Status Context::make_current() const {
  LJ_CU(*drv_, cuCtxSetCurrent, ctx_);
  return {};
}

Status Context::synchronize() const {
  LJ_CU(*drv_, cuCtxSynchronize);
  return {};
}

}  // namespace lj::rt
