#include "runtime/cublaslt.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace lj::rt {

namespace {

// The entry points the reference uses, resolved with dlsym (their types from cublasLt.h).
struct Api {
  void* lib = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

// Loaded once per process and kept (as the driver is): the handles below outlive any one tuning.
Result<const Api*> load_api() {
  static Api api;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::vector<std::string> names;
    if (const char* env = std::getenv("LAYERJIT_CUBLASLT"); env && *env) names.emplace_back(env);
    const std::string so = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    names.push_back(so);
    names.emplace_back("libcublasLt.so");
    // A toolkit whose lib64 is not on the loader's path (the usual install): where CUDA_HOME or the
    // default prefix puts it.
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) names.push_back(fmt::format("{}/lib64/{}", home, so));
    names.push_back("/usr/local/cuda/lib64/" + so);
    std::string tried_names;
    for (const std::string& n : names) {
      api.lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (api.lib) break;
      tried_names += (tried_names.empty() ? "" : ", ") + n;
    }
    if (!api.lib) {
      error = fmt::format("cuBLASLt reference unavailable: no libcublasLt ({}: {})", tried_names, dlerror());
    } else {
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, name));
        if (!fn && error.empty()) error = fmt::format("cuBLASLt reference unavailable: {} has no {}", names.front(), name);
      };
      sym(api.create, "cublasLtCreate");
      sym(api.destroy, "cublasLtDestroy");
      sym(api.desc_create, "cublasLtMatmulDescCreate");
      sym(api.desc_destroy, "cublasLtMatmulDescDestroy");
      sym(api.desc_set, "cublasLtMatmulDescSetAttribute");
      sym(api.layout_create, "cublasLtMatrixLayoutCreate");
      sym(api.layout_destroy, "cublasLtMatrixLayoutDestroy");
      sym(api.pref_create, "cublasLtMatmulPreferenceCreate");
      sym(api.pref_destroy, "cublasLtMatmulPreferenceDestroy");
      sym(api.pref_set, "cublasLtMatmulPreferenceSetAttribute");
      sym(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
      sym(api.matmul, "cublasLtMatmul");
    }
  }
  if (!error.empty()) return Error{error};
  return &api;
}

Result<cudaDataType_t> cuda_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    case DType::F8E4M3: return CUDA_R_8F_E4M3;
    case DType::F8E5M2: return CUDA_R_8F_E5M2;
    default: return Error{fmt::format("cuBLASLt reference: no GEMM of {} operands here (bf16, f16, f8e4m3, f8e5m2)", dtype_name(t))};
  }
}

constexpr size_t kWorkspace = size_t{32} << 20;

}  // namespace

struct CublasLtGemm::State {
  const Api* api = nullptr;
  DType operands = DType::BF16;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};
  DeviceBuffer workspace;
  ~State() {
    if (!api) return;
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l) api->layout_destroy(l);
    if (op) api->desc_destroy(op);
    if (handle) api->destroy(handle);
  }
};

CublasLtGemm::CublasLtGemm(std::unique_ptr<State> s) : s_(std::move(s)) {}
CublasLtGemm::CublasLtGemm(CublasLtGemm&&) noexcept = default;
CublasLtGemm& CublasLtGemm::operator=(CublasLtGemm&&) noexcept = default;
CublasLtGemm::~CublasLtGemm() = default;

Status cublaslt_available() {
  LJ_RT_ASSIGN(const Api* api, load_api());
  (void)api;
  return {};
}

// Row-major y[M, N] = x[M, K] w[N, K]^T is, column-major, y^T (N x M) = w^T-read-transposed times
// x^T: the "TN" GEMM, the one layout cuBLASLt's fp8 kernels take (as bench/gemm's anchor).
Result<CublasLtGemm> CublasLtGemm::create(const Context& ctx, DType operands, int64_t m, int64_t n, int64_t k) {
  LJ_RT_ASSIGN(const Api* api, load_api());
  LJ_RT_ASSIGN(cudaDataType_t in, cuda_type(operands));
  if (m < 1 || n < 1 || k < 1) return Error{fmt::format("cuBLASLt reference: sizes {} x {} x {}", m, n, k)};
  auto s = std::make_unique<State>();
  s->api = api;
  s->operands = operands;
  auto check = [](cublasStatus_t st, const char* what) -> Status {
    if (st != CUBLAS_STATUS_SUCCESS) return Error{fmt::format("cuBLASLt reference: {} failed (status {})", what, static_cast<int>(st))};
    return {};
  };
  const bool fp8 = operands == DType::F8E4M3 || operands == DType::F8E5M2;
  const cudaDataType_t out = fp8 ? CUDA_R_16BF : in;
  LJ_RT_TRY(check(api->create(&s->handle), "cublasLtCreate"));
  LJ_RT_TRY(check(api->desc_create(&s->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LJ_RT_TRY(check(api->desc_set(s->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA"));
  LJ_RT_TRY(check(api->desc_set(s->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB"));
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  LJ_RT_TRY(check(api->layout_create(&s->a, in, u(k), u(n), k), "layout of w"));
  LJ_RT_TRY(check(api->layout_create(&s->b, in, u(k), u(m), k), "layout of x"));
  LJ_RT_TRY(check(api->layout_create(&s->c, out, u(n), u(m), n), "layout of y"));
  LJ_RT_ASSIGN(s->workspace, DeviceBuffer::allocate(ctx, kWorkspace));
  cublasLtMatmulPreference_t pref = nullptr;
  LJ_RT_TRY(check(api->pref_create(&pref), "cublasLtMatmulPreferenceCreate"));
  const size_t ws = kWorkspace;
  cublasStatus_t st = api->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) st = api->heuristic(s->handle, s->op, s->a, s->b, s->c, s->c, pref, 1, &s->algo, &found);
  api->pref_destroy(pref);
  LJ_RT_TRY(check(st, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) return Error{fmt::format("cuBLASLt reference: no algorithm for {} x {} x {} {}", m, n, k, dtype_name(operands))};
  return CublasLtGemm(std::move(s));
}

DType CublasLtGemm::output_dtype() const {
  return s_->operands == DType::F8E4M3 || s_->operands == DType::F8E5M2 ? DType::BF16 : s_->operands;
}

Status CublasLtGemm::run(Stream& stream, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y) const {
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st = s_->api->matmul(s_->handle, s_->op, &alpha, reinterpret_cast<const void*>(w), s_->a,
                                            reinterpret_cast<const void*>(x), s_->b, &beta, reinterpret_cast<void*>(y), s_->c,
                                            reinterpret_cast<void*>(y), s_->c, &s_->algo.algo, reinterpret_cast<void*>(s_->workspace.ptr()),
                                            kWorkspace, reinterpret_cast<cudaStream_t>(stream.handle()));
  if (st != CUBLAS_STATUS_SUCCESS) return Error{fmt::format("cublasLtMatmul failed (status {})", static_cast<int>(st))};
  return {};
}

}  // namespace lj::rt
