// Reference reductions along one axis: softmax, reduce_sum/max/mean, argmax. Sums in double. Softmax
// subtracts the row maximum first, so huge logits never overflow exp; a row of all -inf gives NaN,
// as in PyTorch. reduce_max propagates NaN.
#include <cmath>
#include <limits>

#include "ops/reference/reference_ops.h"

namespace lj::ref {

HostTensor softmax(const HostTensor& x, int64_t axis, const TensorType& out) {
  HostTensor y = make_result(out);
  const AxisView v = view_around(x.shape, normalize_axis(axis, static_cast<int>(x.shape.size())));
  std::vector<double> e(static_cast<size_t>(v.n));
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t j = 0; j < v.inner; ++j) {
      auto at = [&](int64_t i) { return static_cast<size_t>((o * v.n + i) * v.inner + j); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < v.n; ++i) m = std::fmax(m, x.data[at(i)]);
      double sum = 0.0;
      for (int64_t i = 0; i < v.n; ++i) {
        e[static_cast<size_t>(i)] = std::exp(x.data[at(i)] - m);
        sum += e[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < v.n; ++i) y.data[at(i)] = round_to(out.dtype, e[static_cast<size_t>(i)] / sum);
    }
  }
  return y;
}

HostTensor reduce(ReduceOp op, const HostTensor& x, int64_t axis, const TensorType& out) {
  HostTensor y = make_result(out);
  const AxisView v = view_around(x.shape, normalize_axis(axis, static_cast<int>(x.shape.size())));
  // keepdim only changes the result's shape, not its row-major order: element (o, j) is o * inner + j.
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t j = 0; j < v.inner; ++j) {
      double acc = 0.0;
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
          for (int64_t i = 0; i < v.n; ++i) acc += x.data[static_cast<size_t>((o * v.n + i) * v.inner + j)];
          if (op == ReduceOp::Mean) acc /= static_cast<double>(v.n);
          break;
        case ReduceOp::Max:
          acc = -std::numeric_limits<double>::infinity();
          for (int64_t i = 0; i < v.n; ++i) {
            const double e = x.data[static_cast<size_t>((o * v.n + i) * v.inner + j)];
            if (std::isnan(e) || e > acc) acc = e;
            if (std::isnan(acc)) break;
          }
          break;
      }
      y.data[static_cast<size_t>(o * v.inner + j)] = round_to(out.dtype, acc);
    }
  }
  return y;
}

HostTensor argmax(const HostTensor& x, const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t n = x.shape.back();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data.data() + r * n;
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (std::isnan(row[best])) break;
      if (std::isnan(row[i]) || row[i] > row[best]) best = i;
    }
    y.data[static_cast<size_t>(r)] = static_cast<double>(best);
  }
  return y;
}

}  // namespace lj::ref
