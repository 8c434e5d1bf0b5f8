// quantize / dequantize: round trips within each format's error bound (e4m3: relative 2^-4,
// e5m2: relative 2^-3, below the normal range an absolute half step; i8: scale/2), per-tensor and
// per-channel scales, ties, saturation, and dequantize's own rounding.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;

double max_abs(const HostTensor& t) {
  double m = 0;
  for (double x : t.data) m = std::max(m, std::fabs(x));
  return m;
}

// Round trip through an fp8 format with one scale: |x - dq(q(x))| <= max(rel |x|, abs_step * scale).
void check_fp8_round_trip(DType fp8, double max_finite, double rel, double min_subnormal) {
  HostTensor x = random_tensor(DType::F32, {33, 17}, 101, -3.0, 3.0);
  const double s = round_to(DType::F32, max_abs(x) / max_finite);
  HostTensor scale = tensor(DType::F32, {}, {s});
  HostTensor q = run1(OpKind::Quantize, {&x, &scale}, attrs({{"dtype", fp8}}));
  REQUIRE(q.dtype == fp8);
  HostTensor dq = run1(OpKind::Dequantize, {&q, &scale}, attrs({{"dtype", DType::F32}}));
  for (size_t i = 0; i < x.data.size(); ++i) {
    REQUIRE(std::fabs(q.data[i]) <= max_finite);
    // Half a subnormal step is the absolute error floor below the normal range; the final f32
    // rounding of dq adds at most 2^-24 relative.
    const double bound = std::max(rel * std::fabs(x.data[i]), 0.5 * min_subnormal * s) + std::fabs(x.data[i]) * 0x1p-23;
    INFO("x = " << x.data[i] << ", q = " << q.data[i] << ", dq = " << dq.data[i]);
    CHECK(std::fabs(dq.data[i] - x.data[i]) <= bound);
  }
}

TEST_CASE("f8e4m3 per-tensor round trip within relative 2^-4", "[quantize]") {
  check_fp8_round_trip(DType::F8E4M3, 448.0, 0x1p-4, 0x1p-9);
}

TEST_CASE("f8e5m2 per-tensor round trip within relative 2^-3", "[quantize]") {
  check_fp8_round_trip(DType::F8E5M2, 57344.0, 0x1p-3, 0x1p-16);
}

TEST_CASE("i8 per-channel (axis 0) round trip within scale/2", "[quantize]") {
  HostTensor x = random_tensor(DType::F32, {9, 13}, 102, -5.0, 5.0);
  HostTensor scale(DType::F32, {9});
  for (int64_t r = 0; r < 9; ++r) {
    double m = 0;
    for (int64_t c = 0; c < 13; ++c) m = std::max(m, std::fabs(x.data[static_cast<size_t>(r * 13 + c)]));
    scale.data[static_cast<size_t>(r)] = m / 127;
  }
  scale.round_to_dtype();
  HostTensor q = run1(OpKind::Quantize, {&x, &scale}, attrs({{"dtype", DType::I8}, {"axis", 0}}));
  HostTensor dq = run1(OpKind::Dequantize, {&q, &scale}, attrs({{"dtype", DType::F32}, {"axis", 0}}));
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 13; ++c) {
      const size_t at = static_cast<size_t>(r * 13 + c);
      const double s = scale.data[static_cast<size_t>(r)];
      CHECK(q.data[at] == std::floor(q.data[at]));
      CHECK(std::fabs(q.data[at]) <= 128);
      CHECK(std::fabs(dq.data[at] - x.data[at]) <= s / 2 * (1 + 1e-6));
    }
}

TEST_CASE("quantize per-channel along axis 1 with known values and ties", "[quantize]") {
  HostTensor x = tensor(DType::F32, {2, 3}, {1.0, 10.0, 1.25, 2.0, 20.0, -0.75});
  HostTensor scale = tensor(DType::F32, {3}, {0.5, 5.0, 0.5});
  HostTensor q = run1(OpKind::Quantize, {&x, &scale}, attrs({{"dtype", DType::I8}, {"axis", -1}}));
  // 1.25 / 0.5 = 2.5 -> 2 and -0.75 / 0.5 = -1.5 -> -2: ties to even
  CHECK(q.data == std::vector<double>{2, 2, 2, 4, 4, -2});
}

TEST_CASE("quantize saturates to the format's range", "[quantize]") {
  HostTensor x = tensor(DType::F32, {4}, {1000.0, -1000.0, 100.0, INFINITY});
  HostTensor one = tensor(DType::F32, {1}, {1.0});
  CHECK(run1(OpKind::Quantize, {&x, &one}, attrs({{"dtype", DType::F8E4M3}})).data ==
        std::vector<double>{448, -448, 96, 448});
  CHECK(run1(OpKind::Quantize, {&x, &one}, attrs({{"dtype", DType::I8}})).data == std::vector<double>{127, -128, 100, 127});
  HostTensor big = tensor(DType::F32, {1}, {1e6});
  CHECK(run1(OpKind::Quantize, {&big, &one}, attrs({{"dtype", DType::F8E5M2}})).data[0] == 57344);
}

TEST_CASE("dequantize rounds x times scale to the result dtype", "[quantize]") {
  HostTensor q = tensor(DType::I8, {3}, {3, -127, 1});
  HostTensor scale = tensor(DType::F32, {}, {1.0 + 0x1p-20});
  HostTensor y = run1(OpKind::Dequantize, {&q, &scale}, attrs({{"dtype", DType::BF16}}));
  REQUIRE(y.dtype == DType::BF16);
  CHECK(y.data == std::vector<double>{3.0, -127.0, 1.0});  // the 2^-20 is far below bf16's precision
  HostTensor yf = run1(OpKind::Dequantize, {&q, &scale}, attrs({{"dtype", DType::F32}}));
  CHECK(yf.data[2] == 1.0 + 0x1p-20);
}

}  // namespace
}  // namespace lj
