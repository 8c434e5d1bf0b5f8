#include "bench/quant/cublas_int8.h"

namespace lj::bench {

bool CublasInt8Gemm::ok(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  if (error_.empty()) error_ = fmt::format("{}: {} ({})", what, cublasLtGetStatusName(s), static_cast<int>(s));
  return false;
}

// Row-major y = x w^T is, column-major, y^T (N x M) = op(W) x^T with W read as a K x N matrix and
// transposed: A = W (transposed), B = x^T (K x M, not transposed), C = D = y^T (N x M). cuBLASLt's
// m, n, k are then N, M, K: M (the token count, n) may be 1; N and K are multiples of 4 here.
CublasInt8Gemm::CublasInt8Gemm(rt::Context& ctx, int64_t m, int64_t n, int64_t k)
    : ws_(must(rt::DeviceBuffer::allocate(ctx, kWorkspace), "workspace")) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const cudaDataType_t scale = CUDA_R_32I;
  if (!ok(cublasLtCreate(&handle_), "cublasLtCreate") || !ok(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32I, scale), "desc") ||
      !ok(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa") ||
      !ok(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb") ||
      !ok(cublasLtMatrixLayoutCreate(&a_, CUDA_R_8I, u(k), u(n), k), "layout A") ||
      !ok(cublasLtMatrixLayoutCreate(&b_, CUDA_R_8I, u(k), u(m), k), "layout B") ||
      !ok(cublasLtMatrixLayoutCreate(&c_, CUDA_R_32I, u(n), u(m), n), "layout C"))
    return;
  cublasLtMatmulPreference_t pref = nullptr;
  if (!ok(cublasLtMatmulPreferenceCreate(&pref), "preference")) return;
  const size_t ws = kWorkspace;
  int found = 0;
  if (ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace") &&
      ok(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, c_, pref, 1, &algo_, &found), "heuristic") && found == 0)
    error_ = "no algorithm for this int8 GEMM (heuristic found none)";
  cublasLtMatmulPreferenceDestroy(pref);
}

CublasInt8Gemm::~CublasInt8Gemm() {
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (handle_) cublasLtDestroy(handle_);
}

rt::Status CublasInt8Gemm::run(rt::Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y) {
  const int32_t alpha = 1, beta = 0;  // CUDA_R_32I scales
  const cublasStatus_t s =
      cublasLtMatmul(handle_, op_, &alpha, reinterpret_cast<const void*>(w), a_, reinterpret_cast<const void*>(x), b_, &beta,
                     reinterpret_cast<void*>(y), c_, reinterpret_cast<void*>(y), c_, &algo_.algo, reinterpret_cast<void*>(ws_.ptr()),
                     kWorkspace, reinterpret_cast<cudaStream_t>(stream.handle()));
  if (s != CUBLAS_STATUS_SUCCESS) return rt::Error{fmt::format("cublasLtMatmul (int8): {}", cublasLtGetStatusName(s))};
  return {};
}

}  // namespace lj::bench
