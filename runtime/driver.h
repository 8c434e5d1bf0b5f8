// The CUDA driver, loaded at run time: dlopen("libcuda.so.1") (or $LAYERJIT_LIBCUDA), then every
// entry point of driver_fns.def resolved through cuGetProcAddress at its cudaTypedefs.h version.
// Nothing in layerjit links libcuda, so every command that needs no GPU (check, plan, compile) runs on
// a machine without a driver, and every command that needs one gets a single clear message.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "runtime/result.h"

namespace lj::rt {

/// The message every GPU-needing command prints when the driver library cannot be loaded.
inline constexpr const char* kNoDriverMessage =
    "no CUDA driver found: libcuda.so.1 could not be loaded";

/// The resolved driver entry points. Members are named <entry point>_ (e.g. cuMemAlloc_) because
/// cuda.h #defines many plain names (cuMemAlloc -> cuMemAlloc_v2).
struct DriverApi {
#define LJ_DRIVER_FN(name, version) PFN_##name##_v##version name##_ = nullptr;
#include "runtime/driver_fns.def"
#undef LJ_DRIVER_FN
};

/// The loaded, initialised driver. One per process; never unloaded (kernels and buffers may still be
/// released during static destruction, and the OS reclaims the rest at exit).
class Driver {
 public:
  /// Loads and initialises the driver on first call (thread-safe); later calls return the same
  /// outcome. Fails with a message that starts with kNoDriverMessage when the library is missing.
  static Result<const Driver*> get();

  const DriverApi& api() const { return api_; }
  /// The driver's CUDA version, e.g. 13000.
  int version() const { return version_; }
  /// Path or soname that was loaded.
  const std::string& library() const { return library_; }

  /// Success, or an Error naming the call and the driver's error name and description:
  /// "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  Status check(CUresult r, const char* call) const;
  /// The same text as check() produces, for a result already known to be an error.
  std::string describe(CUresult r, const char* call) const;

 private:
  Driver() = default;
  static Result<const Driver*> load();

  DriverApi api_;
  int version_ = 0;
  std::string library_;
  void* handle_ = nullptr;
};

/// Calls a driver entry point and returns its error from the enclosing function:
/// `LJ_CU(drv, cuMemAlloc, &ptr, bytes);`
#define LJ_CU(drv, fn, ...) LJ_RT_TRY((drv).check((drv).api().fn##_(__VA_ARGS__), #fn))

}  // namespace lj::rt
