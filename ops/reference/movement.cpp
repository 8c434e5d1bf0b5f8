// Reference data movement: reshape, transpose, split, concat, embedding. Values are copied unchanged
// (every op here keeps the dtype, so nothing needs rounding).
#include <algorithm>

#include "layerjit/check.h"
#include "ops/reference/reference_ops.h"

namespace lj::ref {

HostTensor reshape(const HostTensor& x, const TensorType& out) {
  HostTensor y = make_result(out);
  y.data = x.data;  // row-major order is unchanged; the shape rules checked the element counts
  return y;
}

HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm, const TensorType& out) {
  HostTensor y = make_result(out);
  const size_t rank = perm.size();
  const std::vector<int64_t> in_strides = row_major_strides(x.shape);
  // Output dimension i walks input dimension perm[i].
  std::vector<int64_t> step(rank);
  for (size_t i = 0; i < rank; ++i) step[i] = in_strides[static_cast<size_t>(perm[i])];
  std::vector<int64_t> idx(rank, 0);
  int64_t src = 0;
  for (int64_t n = 0; n < y.numel(); ++n) {
    y.data[static_cast<size_t>(n)] = x.data[static_cast<size_t>(src)];
    for (size_t d = rank; d-- > 0;) {
      src += step[d];
      if (++idx[d] < y.shape[d]) break;
      src -= step[d] * y.shape[d];
      idx[d] = 0;
    }
  }
  return y;
}

std::vector<HostTensor> split(const HostTensor& x, int64_t axis, const std::vector<TensorType>& out) {
  const int ax = normalize_axis(axis, static_cast<int>(x.shape.size()));
  const AxisView v = view_around(x.shape, ax);
  std::vector<HostTensor> parts;
  int64_t start = 0;  // first index along the axis of the current part
  for (const TensorType& t : out) {
    HostTensor p = make_result(t);
    const int64_t n = p.shape[static_cast<size_t>(ax)];
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < n * v.inner; ++i)
        p.data[static_cast<size_t>(o * n * v.inner + i)] = x.data[static_cast<size_t>((o * v.n + start) * v.inner + i)];
    start += n;
    parts.push_back(std::move(p));
  }
  return parts;
}

HostTensor concat(const std::vector<const HostTensor*>& xs, int64_t axis, const TensorType& out) {
  HostTensor y = make_result(out);
  const int ax = normalize_axis(axis, static_cast<int>(y.shape.size()));
  const AxisView v = view_around(y.shape, ax);
  int64_t start = 0;
  for (const HostTensor* x : xs) {
    const int64_t n = x->shape[static_cast<size_t>(ax)];
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < n * v.inner; ++i)
        y.data[static_cast<size_t>((o * v.n + start) * v.inner + i)] = x->data[static_cast<size_t>(o * n * v.inner + i)];
    start += n;
  }
  return y;
}

}  // namespace lj::ref

namespace lj::ref {

HostTensor embedding(const HostTensor& table, const HostTensor& ids, const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t vocab = table.shape[0];
  const int64_t width = table.shape[1];
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const double id = ids.data[static_cast<size_t>(n)];
    LJ_CHECK(id >= 0 && id < static_cast<double>(vocab), SourceLoc{},
             "embedding: ids[{}] = {} is not a row of the {}-row table", n, id, vocab);
    const auto row = static_cast<int64_t>(id);
    std::copy_n(table.data.begin() + row * width, width, y.data.begin() + n * width);
  }
  return y;
}

}  // namespace lj::ref
