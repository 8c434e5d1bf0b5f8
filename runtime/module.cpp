// Module loading and kernel lookup (see module.h).
#include "runtime/module.h"

#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace lj::rt {

Result<Module> Module::load(const Context& ctx, const std::string& image) {
  if (image.empty()) return Error{"cannot load an empty module image"};
  CUmodule m = nullptr;
  // PTX must be NUL-terminated text; std::string guarantees the terminator after size().
  if (CUresult r = ctx.api().cuModuleLoadData_(&m, image.c_str()); r != CUDA_SUCCESS) {
    return Error{fmt::format("loading a {}-byte module: {}", image.size(),
                             ctx.driver().describe(r, "cuModuleLoadData"))};
  }
  return Module(&ctx, m);
}

Module::Module(Module&& o) noexcept : ctx_(o.ctx_), mod_(std::exchange(o.mod_, nullptr)) {}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    this->~Module();
    ctx_ = o.ctx_;
    mod_ = std::exchange(o.mod_, nullptr);
  }
  return *this;
}

Module::~Module() {
  if (mod_ == nullptr) return;
  if (CUresult r = ctx_->api().cuModuleUnload_(mod_); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "layerjit: %s\n", ctx_->driver().describe(r, "cuModuleUnload").c_str());
  }
  mod_ = nullptr;
}

Result<Kernel> Module::kernel(const std::string& name) const {
  Kernel k;
  k.ctx_ = ctx_;
  k.name_ = name;
  if (CUresult r = ctx_->api().cuModuleGetFunction_(&k.fn_, mod_, name.c_str()); r != CUDA_SUCCESS) {
    return Error{fmt::format("kernel `{}`: {}", name, ctx_->driver().describe(r, "cuModuleGetFunction"))};
  }
  // Parameter sizes let launch() reject a wrong argument list before the GPU reads garbage.
  // The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter; any other failure leaves
  // the sizes unknown and the check off, rather than failing a kernel that may well be fine.
  constexpr size_t kMaxParams = 4096;
  for (size_t i = 0; i < kMaxParams; ++i) {
    size_t offset = 0;
    size_t size = 0;
    CUresult r = ctx_->api().cuFuncGetParamInfo_(k.fn_, i, &offset, &size);
    if (r != CUDA_SUCCESS) {
      k.param_sizes_known_ = r == CUDA_ERROR_INVALID_VALUE;
      break;
    }
    k.param_sizes_.push_back(size);
  }
  if (!k.param_sizes_known_) k.param_sizes_.clear();
  return k;
}

Result<int> Kernel::attribute(CUfunction_attribute attr) const {
  int v = 0;
  LJ_CU(ctx_->driver(), cuFuncGetAttribute, &v, attr, fn_);
  return v;
}

Status Kernel::allow_dynamic_smem(int bytes) {
  if (bytes <= dynamic_smem_limit_) return {};
  LJ_RT_ASSIGN(int static_smem, attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  // Without the attribute raised, static + dynamic must fit 48 KiB: 48 KiB of dynamic memory plus a
  // split-K kernel's 4 static bytes failed to launch (CUDA_ERROR_INVALID_VALUE).
  if (dynamic_smem_limit_ < 0) {
    dynamic_smem_limit_ = 48 * 1024 - static_smem;
    if (bytes <= dynamic_smem_limit_) return {};
  }
  const int optin = ctx_->info().max_smem_per_block_optin;
  if (bytes + static_smem > optin) {
    return Error{fmt::format("kernel `{}` asks for {} bytes of dynamic shared memory plus {} static, more than "
                             "the {} bytes a block of {} may use",
                             name_, bytes, static_smem, optin, ctx_->info().name)};
  }
  if (CUresult r = ctx_->api().cuFuncSetAttribute_(fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
      r != CUDA_SUCCESS) {
    return Error{fmt::format("kernel `{}`: {}", name_,
                             ctx_->driver().describe(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))};
  }
  dynamic_smem_limit_ = bytes;
  return {};
}

}  // namespace lj::rt
