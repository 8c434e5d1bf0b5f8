#include "runtime/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lj::rt {

std::string Nccl::version_str() const {
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

std::vector<std::string> nccl_search_path() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("LAYERJIT_NCCL"); env && *env) names.emplace_back(env);
  names.emplace_back("libnccl.so.2");
  names.emplace_back("libnccl.so");
  std::vector<std::string> homes;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) homes.emplace_back(home);
  homes.emplace_back("/usr/local/cuda");
  for (const std::string& h : homes)
    for (const char* dir : {"lib", "lib64"}) names.push_back(fmt::format("{}/{}/libnccl.so.2", h, dir));
  return names;
}

Result<Nccl> load_nccl(const std::vector<std::string>& names) {
  void* lib = nullptr;
  std::string tried, last_error;
  Nccl api;
  for (const std::string& n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      api.path = n;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n;
    if (const char* e = dlerror()) last_error = e;
  }
  if (!lib)
    return Error{fmt::format("no NCCL: libnccl could not be loaded (tried {}; last error: {}). Tensor parallelism runs its "
                             "all_reduces on NCCL: install it (Debian: libnccl2) or set LAYERJIT_NCCL to the library's path",
                             tried, last_error)};
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && missing.empty()) missing = name;
  };
  sym(api.get_version, "ncclGetVersion");
  sym(api.get_unique_id, "ncclGetUniqueId");
  sym(api.comm_init_rank, "ncclCommInitRank");
  sym(api.comm_init_all, "ncclCommInitAll");
  sym(api.comm_count, "ncclCommCount");
  sym(api.comm_user_rank, "ncclCommUserRank");
  sym(api.comm_async_error, "ncclCommGetAsyncError");
  sym(api.comm_destroy, "ncclCommDestroy");
  sym(api.comm_abort, "ncclCommAbort");
  sym(api.all_reduce, "ncclAllReduce");
  sym(api.group_start, "ncclGroupStart");
  sym(api.group_end, "ncclGroupEnd");
  sym(api.error_string, "ncclGetErrorString");
  if (!missing.empty()) {
    dlclose(lib);
    return Error{fmt::format("NCCL at {} has no {}: not the NCCL 2 layerjit needs", api.path, missing)};
  }
  if (api.get_version(&api.version) != ncclSuccess || api.version < 20900) {
    dlclose(lib);
    return Error{fmt::format("NCCL at {} reports version code {}: layerjit needs NCCL 2.9 or newer", api.path, api.version)};
  }
  return api;
}

Result<const Nccl*> nccl() {
  static const Result<Nccl> loaded = load_nccl(nccl_search_path());
  if (!loaded.ok()) return Error{loaded.error().message};
  return &*loaded;
}

Result<ncclDataType_t> nccl_dtype(DType t) {
  switch (t) {
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::F32: return ncclFloat32;
    case DType::I8: return ncclInt8;
    case DType::I32: return ncclInt32;
    default: break;
  }
  return Error{fmt::format("NCCL does not sum {} values: an all_reduce takes bf16, f16, f32, i8 or i32", dtype_name(t))};
}

namespace {

Status nccl_check(const Nccl& api, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return {};
  return Error{fmt::format("{} failed: {} (NCCL {}; NCCL_DEBUG=WARN says more)", what, api.error_string(r), api.version_str())};
}

}  // namespace

Result<std::vector<NcclComm>> NcclComm::init_all(const Nccl& api, const std::vector<int>& ordinals) {
  if (ordinals.empty()) return Error{"NCCL: a communicator needs at least one device"};
  std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
  std::vector<int> devs(ordinals);
  LJ_RT_TRY(nccl_check(api, api.comm_init_all(comms.data(), static_cast<int>(devs.size()), devs.data()),
                       fmt::format("ncclCommInitAll over devices [{}]", fmt::join(ordinals, ", ")).c_str()));
  std::vector<NcclComm> out;
  for (size_t r = 0; r < comms.size(); ++r) out.push_back(NcclComm(&api, comms[r], static_cast<int>(r), static_cast<int>(comms.size())));
  return out;
}

NcclComm::NcclComm(NcclComm&& o) noexcept
    : api_(o.api_), comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), ranks_(o.ranks_) {}

NcclComm& NcclComm::operator=(NcclComm&& o) noexcept {
  if (this != &o) {
    if (comm_) api_->comm_destroy(comm_);
    api_ = o.api_;
    comm_ = std::exchange(o.comm_, nullptr);
    rank_ = o.rank_;
    ranks_ = o.ranks_;
  }
  return *this;
}

NcclComm::~NcclComm() {
  if (comm_) api_->comm_destroy(comm_);
}

void NcclComm::abort() {
  if (comm_) api_->comm_abort(std::exchange(comm_, nullptr));
}

Status NcclComm::all_reduce_sum(CUdeviceptr send, CUdeviceptr recv, size_t count, DType dtype, CUstream stream) const {
  if (!comm_) return Error{"ncclAllReduce: the communicator was aborted (another rank failed)"};
  LJ_RT_ASSIGN(const ncclDataType_t t, nccl_dtype(dtype));
  return nccl_check(*api_,
                    api_->all_reduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv), count, t, ncclSum, comm_,
                                     reinterpret_cast<cudaStream_t>(stream)),
                    "ncclAllReduce");
}

}  // namespace lj::rt
