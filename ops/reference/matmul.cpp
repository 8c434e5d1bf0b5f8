// Reference matmul: y[..., n] = sum_k x[..., k] * w[n, k] (weights stored [N, K], as nn.Linear), times
// the row's factor where a row scale is given (a folded RMSNorm's),
// accumulated in double and rounded once to the result dtype. Double accumulation keeps the
// reference's own error far below any GPU kernel's, so tolerances measure the kernel alone.
#include "ops/reference/reference_ops.h"

namespace lj::ref {

HostTensor matmul(const HostTensor& x, const HostTensor& w, const HostTensor* row_scale, const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t n_out = w.shape[0];
  const int64_t k_in = w.shape[1];
  int64_t rows = 1;  // every leading dimension of x
  for (size_t i = 0; i + 1 < x.shape.size(); ++i) rows *= x.shape[i];
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * k_in;
    for (int64_t n = 0; n < n_out; ++n) {
      const double* wn = w.data.data() + n * k_in;
      double acc = 0.0;
      for (int64_t k = 0; k < k_in; ++k) acc += xr[k] * wn[k];
      if (row_scale) acc *= row_scale->data[static_cast<size_t>(r)];
      y.data[static_cast<size_t>(r * n_out + n)] = round_to(out.dtype, acc);
    }
  }
  return y;
}

}  // namespace lj::ref
