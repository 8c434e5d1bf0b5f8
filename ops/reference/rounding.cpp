// round_to: how a value is stored in each dtype, bit-for-bit as the GPU stores it.
//
// Floating formats are described by their mantissa width, smallest normal exponent and largest
// finite value; one routine rounds any double to nearest, ties to even, on that grid (subnormals
// included, as __float2bfloat16_rn and __float2half_rn keep them). Rounding straight from double is
// what CUDA does for a float input, and the correctly rounded answer for a double one.
// Overflow: f32, f16 and bf16 go to infinity (IEEE); the fp8 formats saturate to their largest
// finite value, as __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does (infinity too); NaN stays NaN.
// Integers round to nearest even and saturate, as cvt.rni.sat does; NaN becomes 0.
#include <cmath>
#include <limits>

#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

namespace lj {

namespace {

struct FloatFormat {
  int mantissa_bits;  // explicit fraction bits
  int min_exponent;   // exponent of the smallest normal number; subnormals share its spacing
  double max_finite;
  bool saturate;      // overflow to +-max_finite instead of +-infinity
};

// y >= 0; round to the nearest integer, a tie to the even one. Written out rather than std::rint so
// the result never depends on the floating-point environment's rounding mode.
double round_half_even(double y) {
  double whole = std::floor(y);
  double frac = y - whole;  // exact: y and whole share an exponent range
  if (frac > 0.5) return whole + 1.0;
  if (frac < 0.5) return whole;
  return std::fmod(whole, 2.0) == 0.0 ? whole : whole + 1.0;
}

double round_float(double x, const FloatFormat& f) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return f.saturate ? std::copysign(f.max_finite, x) : x;
  const double a = std::fabs(x);
  if (a == 0.0) return x;  // keeps the sign of zero
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1): a's binary exponent is e - 1
  const int exponent = std::max(e - 1, f.min_exponent);
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);  // spacing of the grid near a
  // a / quantum and the product below are exact: quantum is a power of two and the quotient is
  // below 2^(mantissa_bits + 1).
  double r = round_half_even(a / quantum) * quantum;
  if (r > f.max_finite) r = f.saturate ? f.max_finite : std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

double round_int(double x, double lo, double hi) {
  if (std::isnan(x)) return 0.0;
  double r = std::copysign(round_half_even(std::fabs(x)), x);
  if (r < lo) return lo;
  if (r > hi) return hi;
  return r == 0.0 ? 0.0 : r;  // integers have no negative zero
}

// Largest finite values: (2 - 2^-m) * 2^emax, except e4m3 (OCP "FN": S.1111.111 is NaN, so the
// top mantissa is 110: 1.75 * 2^8 = 448) and e5m2 (IEEE-like, top exponent reserved: 1.75 * 2^15).
constexpr FloatFormat kF32{23, -126, 3.4028234663852886e38, false};
constexpr FloatFormat kF16{10, -14, 65504.0, false};
constexpr FloatFormat kBF16{7, -126, 3.3895313892515355e38, false};
constexpr FloatFormat kE4M3{3, -6, 448.0, true};
constexpr FloatFormat kE5M2{2, -14, 57344.0, true};

}  // namespace

double round_to(DType t, double x) {
  switch (t) {
    case DType::F32: return round_float(x, kF32);
    case DType::F16: return round_float(x, kF16);
    case DType::BF16: return round_float(x, kBF16);
    case DType::F8E4M3: return round_float(x, kE4M3);
    case DType::F8E5M2: return round_float(x, kE5M2);
    case DType::I8: return round_int(x, -128.0, 127.0);
    case DType::I32: return round_int(x, -2147483648.0, 2147483647.0);
    case DType::U4: return round_int(x, 0.0, 15.0);
    case DType::I4: return round_int(x, -8.0, 7.0);
  }
  LJ_ASSERT(false, "round_to: unknown dtype {}", static_cast<int>(t));
  __builtin_unreachable();
}

}  // namespace lj
