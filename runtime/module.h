// Loaded code: a Module is a cubin (or PTX the driver JIT-compiles) loaded into a context; a Kernel
// is one __global__ function in it, with what launch() needs to check arguments and shared memory.
// Generated kernels are `extern "C"`, so they are looked up by their plain name.
#pragma once

#include <string>
#include <vector>

#include "runtime/context.h"

namespace lj::rt {

class Kernel {
 public:
  CUfunction handle() const { return fn_; }
  const std::string& name() const { return name_; }
  const Context& context() const { return *ctx_; }
  /// The size in bytes of each parameter, from the driver (cuFuncGetParamInfo); empty and
  /// param_sizes_known() false when the driver could not say.
  const std::vector<size_t>& param_sizes() const { return param_sizes_; }
  bool param_sizes_known() const { return param_sizes_known_; }
  Result<int> attribute(CUfunction_attribute attr) const;
  /// Lets launches use up to `bytes` of dynamic shared memory (needed above 48 KB). A no-op when the
  /// limit is already that high; an error naming the device limit when it cannot be.
  Status allow_dynamic_smem(int bytes);

 private:
  friend class Module;
  const Context* ctx_ = nullptr;
  CUfunction fn_ = nullptr;
  std::string name_;
  std::vector<size_t> param_sizes_;
  bool param_sizes_known_ = false;
  // Dynamic shared memory a launch may use without raising the limit: every GPU's default 48 KiB less
  // the kernel's static shared memory (the sum counts); -1 until the first launch asks.
  int dynamic_smem_limit_ = -1;
};

class Module {
 public:
  /// Loads a cubin, or PTX text, which the driver then compiles for the current GPU.
  static Result<Module> load(const Context& ctx, const std::string& image);
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  /// The kernel `name` (an extern "C" __global__ function). The module must outlive it.
  Result<Kernel> kernel(const std::string& name) const;
  CUmodule handle() const { return mod_; }

 private:
  Module(const Context* ctx, CUmodule m) : ctx_(ctx), mod_(m) {}
  const Context* ctx_ = nullptr;
  CUmodule mod_ = nullptr;
};

}  // namespace lj::rt
