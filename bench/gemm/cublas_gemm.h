// The cuBLASLt anchor of the GEMM benchmarks: Y[M, N] = X[M, K] W[N, K]^T over buffers the caller
// owns, bf16 or fp8 operands, bf16 output, fp32 accumulation. Benchmark-only: the library never
// links cuBLAS.
#pragma once

#include <cublasLt.h>

#include "bench/common/plan_runner.h"

namespace lj::bench {

struct CublasOptions {
  DType operands = DType::BF16;  ///< bf16, f8e4m3 or f8e5m2 (then e4m3 x e4m3 or e5m2 x e5m2 into bf16)
  /// fp8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM. Off (cuBLAS's and torch._scaled_mm's default), the
  /// kernel periodically adds the tensor cores' partial sums into fp32 registers; on, it keeps
  /// accumulating in the MMA's own accumulator, as layerjit's fp8 GEMM does.
  bool fast_accum = false;
};

class CublasGemm {
 public:
  CublasGemm(rt::Context& ctx, int64_t m, int64_t n, int64_t k, const CublasOptions& o = {});
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  rt::Status run(rt::Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y);

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
  rt::DeviceBuffer ws_;
};

}  // namespace lj::bench
