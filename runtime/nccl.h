// NCCL, loaded with dlopen at run time and never linked (as the driver and cuBLASLt are): tensor
// parallelism runs its all_reduces on it (docs/tp.md). A machine without libnccl builds and runs
// everything else; asking for NCCL there is an Error that says so and how to provide it.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "runtime/result.h"

namespace lj::rt {

/// The NCCL entry points layerjit uses, their types from the toolkit's nccl.h.
struct Nccl {
  std::string path;  ///< the library that was loaded
  int version = 0;   ///< ncclGetVersion's code, e.g. 22703 for 2.27.3
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  /// "2.27.3"
  std::string version_str() const;
};

/// The library names tried, in order: LAYERJIT_NCCL if set, libnccl.so.2, libnccl.so, then the
/// toolkit's lib and lib64 under $CUDA_HOME and /usr/local/cuda.
std::vector<std::string> nccl_search_path();

/// Loads NCCL from the first of `names` that opens (no GPU needed) and resolves every entry point;
/// an Error names each place tried ("no NCCL: ...") or the missing symbol. Not cached: tests load
/// from chosen paths.
Result<Nccl> load_nccl(const std::vector<std::string>& names);

/// NCCL for this process: load_nccl(nccl_search_path()), once; the library stays loaded.
Result<const Nccl*> nccl();

}  // namespace lj::rt
