// Reference quantize / dequantize with per-tensor or per-channel (along `axis`) f32 scales:
//   quantize:   q = round_sat(x / scale) in f8e4m3, f8e5m2 or i8 (nearest even, saturating: round_to)
//   dequantize: x = q * scale, rounded to f32, f16 or bf16
// The division is done in double, then rounded once; a zero scale gives +-inf (saturated to the
// format's maximum) or NaN (0/0), as IEEE division would.
#include "ops/reference/reference_ops.h"

namespace lj::ref {

namespace {

enum class Direction { Quantize, Dequantize };

HostTensor scaled(Direction dir, const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis,
                  const TensorType& out) {
  HostTensor y = make_result(out);
  AxisView v;  // per tensor: every element uses scale[0]
  v.inner = x.numel();
  if (axis) v = view_around(x.shape, normalize_axis(*axis, static_cast<int>(x.shape.size())));
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.n; ++i) {
      const double s = scale.data[static_cast<size_t>(axis ? i : 0)];
      for (int64_t j = 0; j < v.inner; ++j) {
        const size_t at = static_cast<size_t>((o * v.n + i) * v.inner + j);
        double r = 0.0;
        switch (dir) {
          case Direction::Quantize: r = x.data[at] / s; break;
          case Direction::Dequantize: r = x.data[at] * s; break;
        }
        y.data[at] = round_to(out.dtype, r);
      }
    }
  }
  return y;
}

}  // namespace

HostTensor quantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis, const TensorType& out) {
  return scaled(Direction::Quantize, x, scale, axis, out);
}

HostTensor dequantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis,
                      const TensorType& out) {
  return scaled(Direction::Dequantize, x, scale, axis, out);
}

}  // namespace lj::ref
