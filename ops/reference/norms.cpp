// Reference RMSNorm and LayerNorm over the last dimension, statistics in double:
//   rms_norm:   y = x / sqrt(mean(x^2) + eps) * w
//   rms_scale:  s = 1 / sqrt(mean(x^2) + eps), one per row (what rms_norm multiplies x by)
//   layer_norm: y = (x - mean(x)) / sqrt(var(x) + eps) * w + b, var the biased (population) variance
#include <cmath>

#include "ops/reference/reference_ops.h"

namespace lj::ref {

namespace {
// 1 / sqrt(mean(x^2) + eps) of the n values at xr: rms_norm's factor, rms_scale's result.
double inv_rms(const double* xr, int64_t n, double eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += xr[i] * xr[i];
  return 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
}
}  // namespace

HostTensor rms_norm(const HostTensor& x, const HostTensor& w, double eps, const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t n = x.dim(-1);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * n;
    const double inv = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i)
      y.data[static_cast<size_t>(r * n + i)] = round_to(out.dtype, xr[i] * inv * w.data[static_cast<size_t>(i)]);
  }
  return y;
}

HostTensor rms_scale(const HostTensor& x, double eps, const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t n = x.dim(-1);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) y.data[static_cast<size_t>(r)] = round_to(out.dtype, inv_rms(x.data.data() + r * n, n, eps));
  return y;
}

HostTensor layer_norm(const HostTensor& x, const HostTensor& w, const HostTensor& b, double eps,
                      const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t n = x.dim(-1);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(n);
    // Two passes: the variance from centred values does not cancel catastrophically.
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const size_t c = static_cast<size_t>(i);
      y.data[static_cast<size_t>(r * n + i)] = round_to(out.dtype, (xr[i] - mean) * inv * w.data[c] + b.data[c]);
    }
  }
  return y;
}

}  // namespace lj::ref
