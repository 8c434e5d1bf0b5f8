#include "bench/gemm/cublas_gemm.h"

namespace lj::bench {

namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) die(fmt::format("{}: cuBLAS status {}", what, static_cast<int>(s)));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F8E4M3: return CUDA_R_8F_E4M3;
    case DType::F8E5M2: return CUDA_R_8F_E5M2;
    default: die(fmt::format("cuBLASLt anchor: no operand type {}", dtype_name(t)));
  }
}

}  // namespace

// Y[M, N] = X[M, K] W[N, K]^T in row-major terms is, column-major, Y^T (N x M) = op(W) X^T with W
// read as a K x N column-major matrix transposed: the "TN" GEMM, the one layout cuBLASLt's fp8
// kernels take.
CublasGemm::CublasGemm(rt::Context& ctx, int64_t m, int64_t n, int64_t k, const CublasOptions& o)
    : ws_(must(rt::DeviceBuffer::allocate(ctx, kWorkspace), "workspace")) {
  check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
  check_cublas(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (is_fp8(o.operands)) {
    const int8_t fast = o.fast_accum ? 1 : 0;
    check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "fast accum");
  }
  const cudaDataType_t in = cuda_type(o.operands);
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  check_cublas(cublasLtMatrixLayoutCreate(&a_, in, u(k), u(n), k), "A");
  check_cublas(cublasLtMatrixLayoutCreate(&b_, in, u(k), u(m), k), "B");
  check_cublas(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, u(n), u(m), n), "C");
  check_cublas(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, u(n), u(m), n), "D");
  cublasLtMatmulPreference_t pref;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const size_t ws = kWorkspace;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace");
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, d_, pref, 1, &algo_, &found), "heuristic");
  if (found == 0) die("cuBLASLt has no algorithm for this GEMM");
  cublasLtMatmulPreferenceDestroy(pref);
}

CublasGemm::~CublasGemm() {
  cublasLtMatrixLayoutDestroy(a_);
  cublasLtMatrixLayoutDestroy(b_);
  cublasLtMatrixLayoutDestroy(c_);
  cublasLtMatrixLayoutDestroy(d_);
  cublasLtMatmulDescDestroy(op_);
  cublasLtDestroy(handle_);
}

rt::Status CublasGemm::run(rt::Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y) {
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t s =
      cublasLtMatmul(handle_, op_, &alpha, reinterpret_cast<const void*>(w), a_, reinterpret_cast<const void*>(x), b_, &beta,
                     reinterpret_cast<void*>(y), c_, reinterpret_cast<void*>(y), d_, &algo_.algo, reinterpret_cast<void*>(ws_.ptr()),
                     kWorkspace, reinterpret_cast<cudaStream_t>(stream.handle()));
  if (s != CUBLAS_STATUS_SUCCESS) return rt::Error{fmt::format("cublasLtMatmul: status {}", static_cast<int>(s))};
  return {};
}

}  // namespace lj::bench
