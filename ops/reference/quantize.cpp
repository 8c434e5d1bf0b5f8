// Reference quantize / dequantize with per-tensor or per-channel (along `axis`) f32 scales:
//   quantize:   q = round_sat(f32(x / scale)) in f8e4m3, f8e5m2 or i8 (nearest even, saturating: round_to)
//   dequantize: x = q * scale, rounded to f32, f16 or bf16
//   dequantize with group = G (4-bit or i8 weights): x[.., k] = f32((q[.., k] - zero[.., k / G]) * scale[.., k / G]),
//               rounded to f32, f16 or bf16; zero is 0 where not given
// The quotient is rounded to f32 before it is rounded to the narrow format, because that is what a
// kernel computes (an IEEE f32 division, then a conversion): rounding the exact quotient once can
// differ when the f32 quotient lands on a tie of the narrow grid (x / s = 2.5 + 2^-25 is 2.5 in f32,
// which rounds to 2 in i8; the exact quotient rounds to 3). The division is done in double and then
// rounded to f32, which equals the f32 division: x and s are f32 values, and double carries more
// than twice f32's precision, so the two roundings never differ. A zero scale gives +-inf
// (saturated to the format's maximum) or NaN (0/0), as IEEE division would.
//
// Quantize without a scale operand computes the scale first (dynamic, e.g. per-token, quantization):
//   amax[i]  = max |x| over the elements that share index i of `axis` (every element: axis = none);
//              NaN elements are skipped, as the kernel's fmaxf skips them
//   scale[i] = f32(amax[i] / max_finite(dtype)), max_finite = 448 (e4m3), 57344 (e5m2), 127 (i8);
//              a scale of 0 (an all-zero row, or an amax so small the quotient underflows) becomes 1,
//              so the row's codes are 0 and nothing is divided by zero
// then quantizes with that scale as above. amax is an f32 value (every float dtype converts to f32
// exactly), so scale is exactly the kernel's IEEE f32 division too.
#include <cmath>

#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

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
          case Direction::Quantize: r = round_to(DType::F32, x.data[at] / s); break;
          case Direction::Dequantize: r = x.data[at] * s; break;
        }
        y.data[at] = round_to(out.dtype, r);
      }
    }
  }
  return y;
}

}  // namespace

double quantize_max(DType t) {
  switch (t) {
    case DType::F8E4M3: return 448.0;
    case DType::F8E5M2: return 57344.0;
    case DType::I8: return 127.0;
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::I32:
    case DType::U4:
    case DType::I4: break;
  }
  LJ_ASSERT(false, "quantize_max: {} is not a quantized dtype", dtype_name(t));
  __builtin_unreachable();
}

double dynamic_scale(DType t, double amax) {
  const double s = round_to(DType::F32, amax / quantize_max(t));
  return s == 0.0 ? 1.0 : s;
}

HostTensor quantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis, const TensorType& out) {
  return scaled(Direction::Quantize, x, scale, axis, out);
}

std::vector<HostTensor> quantize_dynamic(const HostTensor& x, std::optional<int64_t> axis,
                                         const std::vector<TensorType>& out) {
  HostTensor scale = make_result(out[1]);
  AxisView v;
  v.inner = x.numel();
  if (axis) v = view_around(x.shape, normalize_axis(*axis, static_cast<int>(x.shape.size())));
  std::vector<double> amax(static_cast<size_t>(v.n), 0.0);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.n; ++i)
      for (int64_t j = 0; j < v.inner; ++j) {
        const double a = std::fabs(x.data[static_cast<size_t>((o * v.n + i) * v.inner + j)]);
        if (a > amax[static_cast<size_t>(i)]) amax[static_cast<size_t>(i)] = a;  // false for NaN: skipped
      }
  for (int64_t i = 0; i < v.n; ++i)
    scale.data[static_cast<size_t>(i)] = dynamic_scale(out[0].dtype, amax[static_cast<size_t>(i)]);
  HostTensor q = scaled(Direction::Quantize, x, scale, axis, out[0]);
  return {std::move(q), std::move(scale)};
}

HostTensor dequantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis,
                      const TensorType& out) {
  return scaled(Direction::Dequantize, x, scale, axis, out);
}

HostTensor dequantize_groups(const HostTensor& x, const HostTensor& scale, const HostTensor* zero, int64_t group,
                             const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t k = x.shape.back(), groups = k / group;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t row = i / k, col = i % k;
    const auto at = static_cast<size_t>(row * groups + col / group);
    const double z = zero ? zero->data[at] : 0.0;
    // The double product is exact ((q - z) has at most 9 significant bits, the scale 24); rounded to
    // f32 as a kernel's f32 multiply rounds it (exact for 16-bit scales: 5 + 11 bits), then to dtype.
    const double p = round_to(DType::F32, (x.data[static_cast<size_t>(i)] - z) * scale.data[at]);
    y.data[static_cast<size_t>(i)] = round_to(out.dtype, p);
  }
  return y;
}

}  // namespace lj::ref
