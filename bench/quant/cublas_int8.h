// The cuBLASLt anchor of the W8A8 benchmark: y[M, N] (int32) = x[M, K] w[N, K]^T with i8 operands
// (CUDA_R_8I), CUBLAS_COMPUTE_32I and int32 scales and output: cuBLASLt's integer tensor-core (IMMA)
// GEMM. Unlike the bf16/fp8 anchor (bench/gemm/cublas_gemm.h), a refusal is an answer, not a fatal
// error: the benchmark prints why cuBLASLt has no kernel for a shape. Benchmark-only.
#pragma once

#include <string>

#include <cublasLt.h>

#include "bench/common/plan_runner.h"

namespace lj::bench {

class CublasInt8Gemm {
 public:
  /// Sets up the "TN" GEMM (the layout cuBLASLt's IMMA kernels take with the regular column order:
  /// A transposed, B not; leading dimensions and m, k multiples of 4; pointers 4-byte aligned, 16 for
  /// speed). error() says what failed (status of the call, or no algorithm) if cuBLASLt refuses.
  CublasInt8Gemm(rt::Context& ctx, int64_t m, int64_t n, int64_t k);
  ~CublasInt8Gemm();
  CublasInt8Gemm(const CublasInt8Gemm&) = delete;
  CublasInt8Gemm& operator=(const CublasInt8Gemm&) = delete;
  const std::string& error() const { return error_; }
  /// y = x w^T; only when error() is empty.
  rt::Status run(rt::Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y);

 private:
  bool ok(cublasStatus_t s, const char* what);
  static constexpr size_t kWorkspace = size_t{32} << 20;
  std::string error_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
  rt::DeviceBuffer ws_;
};

}  // namespace lj::bench
