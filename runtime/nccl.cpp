#include "runtime/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include <fmt/format.h>

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

}  // namespace lj::rt
