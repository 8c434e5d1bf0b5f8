// NCCL, loaded with dlopen at run time and never linked (as the driver and cuBLASLt are): tensor
// parallelism runs its all_reduces on it (docs/tp.md). A machine without libnccl builds and runs
// everything else; asking for NCCL there is an Error that says so and how to provide it.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "layerjit/types.h"
#include "runtime/driver.h"
#include "runtime/result.h"

namespace lj::rt {

/// The NCCL entry points layerjit uses, their types from the toolkit's nccl.h.
struct Nccl {
  std::string path;  ///< the library that was loaded
  int version = 0;   ///< ncclGetVersion's code, e.g. 22703 for 2.27.3
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommCount) comm_count = nullptr;
  decltype(&ncclCommUserRank) comm_user_rank = nullptr;
  decltype(&ncclCommGetAsyncError) comm_async_error = nullptr;
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

/// NCCL's element type for a dtype: bf16, f16, f32, i8, i32; an Error for the
/// others (fp8 and 4-bit values are never summed across ranks).
Result<ncclDataType_t> nccl_dtype(DType t);

/// One rank's communicator, destroyed (ncclCommDestroy) with the object.
class NcclComm {
 public:
  /// One communicator per device in `ordinals`, rank r on device ordinals[r], for one process
  /// driving them all (ncclCommInitAll): the tensor-parallel executable's ranks. An Error names
  /// NCCL's reason (a device listed twice, a device that does not exist).
  static Result<std::vector<NcclComm>> init_all(const Nccl& api, const std::vector<int>& ordinals);
  NcclComm(NcclComm&& o) noexcept;
  NcclComm& operator=(NcclComm&& o) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm();

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  const Nccl& api() const { return *api_; }
  /// recv = the sum over the ranks of send (`count` elements of `dtype`), enqueued on `stream`
  /// (capturable: a CUDA graph records it). Every rank must call it, in the same order.
  Status all_reduce_sum(CUdeviceptr send, CUdeviceptr recv, size_t count, DType dtype, CUstream stream) const;
  /// Ends the communicator at once (ncclCommAbort), its pending operations included: what frees the
  /// other ranks when one fails before an all_reduce they wait in. Calls after it are errors.
  void abort();

 private:
  NcclComm(const Nccl* api, ncclComm_t c, int rank, int ranks) : api_(api), comm_(c), rank_(rank), ranks_(ranks) {}
  const Nccl* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, ranks_ = 1;
};

}  // namespace lj::rt
