// Loading libcuda with dlopen and resolving its entry points with cuGetProcAddress (see driver.h).
#include "runtime/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

namespace lj::rt {

std::string Driver::describe(CUresult r, const char* call) const {
  const char* name = nullptr;
  const char* text = nullptr;
  // Both calls can fail for codes newer than this driver knows; fall back to the number.
  if (api_.cuGetErrorName_ == nullptr || api_.cuGetErrorName_(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (api_.cuGetErrorString_ == nullptr || api_.cuGetErrorString_(r, &text) != CUDA_SUCCESS) text = nullptr;
  return fmt::format("{} failed: {} ({})", call,
                     name != nullptr ? name : fmt::format("CUresult {}", static_cast<int>(r)),
                     text != nullptr ? text : "no description");
}

Status Driver::check(CUresult r, const char* call) const {
  if (r == CUDA_SUCCESS) return {};
  return Error{describe(r, call)};
}

Result<const Driver*> Driver::load() {
  const char* env = std::getenv("LAYERJIT_LIBCUDA");
  std::string path = (env != nullptr && env[0] != '\0') ? env : "libcuda.so.1";
  // RTLD_LOCAL keeps the driver's symbols out of the global namespace: we only reach them through
  // cuGetProcAddress, never by name.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{fmt::format("{} (dlopen(\"{}\"): {})", kNoDriverMessage, path,
                             why != nullptr ? why : "unknown error")};
  }
  // cuGetProcAddress is the one symbol found with dlsym; "_v2" is the CUDA 12 ABI with the
  // symbol-found out-parameter (cuda.h maps cuGetProcAddress to it).
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    dlclose(handle);
    return Error{fmt::format("{}: {} has no cuGetProcAddress_v2, so the driver is older than CUDA 12",
                             kNoDriverMessage, path)};
  }

  // Released (never deleted) on success: the driver lives for the whole process (see the class comment).
  std::unique_ptr<Driver> drv(new Driver());
  drv->handle_ = handle;
  drv->library_ = path;
  std::string missing;
#define LJ_DRIVER_FN(name, version)                                                               \
  {                                                                                               \
    void* fn = nullptr;                                                                           \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                  \
    CUresult r = get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);              \
    if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {             \
      drv->api_.name##_ = reinterpret_cast<PFN_##name##_v##version>(fn);                          \
    } else {                                                                                      \
      missing += fmt::format("{}{} (v{})", missing.empty() ? "" : ", ", #name, version);          \
    }                                                                                             \
  }
#include "runtime/driver_fns.def"
#undef LJ_DRIVER_FN
  if (!missing.empty()) {
    return Error{fmt::format("the CUDA driver at {} lacks entry points layerjit needs: {}; "
                             "update the NVIDIA driver", path, missing)};
  }
  if (CUresult r = drv->api_.cuInit_(0); r != CUDA_SUCCESS) {
    return Error{fmt::format("the CUDA driver was found but could not start: {}", drv->describe(r, "cuInit"))};
  }
  LJ_RT_TRY(drv->check(drv->api_.cuDriverGetVersion_(&drv->version_), "cuDriverGetVersion"));
  return static_cast<const Driver*>(drv.release());
}

Result<const Driver*> Driver::get() {
  // The outcome, success or not, is computed once: the driver cannot appear mid-process.
  static std::once_flag once;
  static std::optional<Result<const Driver*>> outcome;
  std::call_once(once, [] { outcome.emplace(load()); });
  return *outcome;
}

}  // namespace lj::rt
