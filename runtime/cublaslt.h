// cuBLASLt as the autotuner's reference (issue 9: the tuner reports it beside layerjit's candidates,
// it never runs it in a plan). Like the driver, the library is loaded with dlopen at run time and
// never linked: where libcublasLt is missing the reference is skipped with the reason.
//
// The reference product is y[M, N] = x[M, K] w[N, K]^T (row-major), the bare GEMM a matmul group
// starts from, without its epilogue: 16-bit operands into the same dtype, or e4m3/e5m2 operands
// into bf16, fp32 accumulation, the heuristic's first algorithm with a 32 MiB workspace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layerjit/types.h"
#include "runtime/memory.h"
#include "runtime/result.h"
#include "runtime/stream.h"

namespace lj::rt {

class CublasLtGemm {
 public:
  /// The GEMM for these sizes and operand dtype on `ctx`'s device; an Error names what is missing
  /// (the library, a symbol, an algorithm for the shape, a dtype cuBLASLt's reference does not take).
  static Result<CublasLtGemm> create(const Context& ctx, DType operands, int64_t m, int64_t n, int64_t k);

  /// y = x w^T on `stream` (device pointers of the sizes given to create()).
  Status run(Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y) const;

  /// The output dtype (the operands', bf16 for fp8 operands).
  DType output_dtype() const;

  CublasLtGemm(CublasLtGemm&&) noexcept;
  CublasLtGemm& operator=(CublasLtGemm&&) noexcept;
  ~CublasLtGemm();

 private:
  struct State;
  explicit CublasLtGemm(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

/// Whether libcublasLt loads with every entry point the reference uses (no GPU needed). Looked for,
/// once per process: LAYERJIT_CUBLASLT if set, the soname of this toolkit's major version, the
/// unversioned name, then under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
Status cublaslt_available();

}  // namespace lj::rt
