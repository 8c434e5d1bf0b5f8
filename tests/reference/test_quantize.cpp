// quantize / dequantize: round trips within each format's error bound (e4m3: relative 2^-4,
// e5m2: relative 2^-3, below the normal range an absolute half step; i8: scale/2), per-tensor and
// per-channel scales, ties, saturation, the f32 quotient a kernel rounds from, dequantize's own
// rounding, and dynamic quantization (no scale operand): its scale rule, the all-zero row, NaN.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;
using test::to_f32;

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

TEST_CASE("quantize rounds the f32 quotient, as a kernel's division does", "[quantize]") {
  // x / s = 2.5 + 2^-24 + O(2^-43): the exact quotient rounds to 3, but its f32 rounding is 2.5,
  // a tie that goes to the even 2. A kernel divides in f32, so 2 is the code it stores.
  HostTensor x = tensor(DType::F32, {1}, {2.5 + 0x1p-20});
  HostTensor scale = tensor(DType::F32, {}, {1.0 + 3 * 0x1p-23});
  REQUIRE(x.data[0] / scale.data[0] > 2.5);
  REQUIRE(to_f32(x.data[0] / scale.data[0]) == 2.5);
  CHECK(run1(OpKind::Quantize, {&x, &scale}, attrs({{"dtype", DType::I8}})).data[0] == 2);
}

TEST_CASE("dynamic quantize: one scale per row from the row's amax, codes from that scale", "[quantize]") {
  // Rows: amax 127 (scale 1; -63.5 is a tie to -64), all zeros (scale 1, codes 0), amax 254 (scale 2).
  HostTensor x = tensor(DType::F32, {3, 4}, {127, -63.5, 1, 0, 0, 0, 0, 0, -254, 3, 0.25, 0});
  auto r = test::run_op(OpKind::Quantize, {&x}, attrs({{"dtype", DType::I8}, {"axis", 0}}));
  REQUIRE(r.size() == 2);
  CHECK(r[0].dtype == DType::I8);
  CHECK(r[0].data == std::vector<double>{127, -64, 1, 0, 0, 0, 0, 0, -127, 2, 0, 0});
  CHECK(r[1].dtype == DType::F32);
  CHECK(r[1].shape == std::vector<int64_t>{3});
  CHECK(r[1].data == std::vector<double>{1, 1, 2});
}

// The scale of a row is amax / max_finite rounded once to f32; the codes are the static quantize of
// the row with that scale, and the row's largest magnitude lands on the format's maximum.
void check_dynamic_scales(DType dt, double max_finite, const std::vector<double>& want_scales) {
  HostTensor x = tensor(DType::BF16, {2, 3}, {1.0, -0.5, 0.25, 3.0, -7.0, 0.125});  // amax 1 and 7
  auto r = test::run_op(OpKind::Quantize, {&x}, attrs({{"dtype", dt}, {"axis", -2}}));
  CHECK(r[1].data == want_scales);
  CHECK(std::fabs(r[0].data[0]) == max_finite);
  CHECK(std::fabs(r[0].data[4]) == max_finite);
  for (size_t i = 0; i < x.data.size(); ++i) {
    HostTensor one = tensor(DType::F32, {}, {r[1].data[i / 3]});
    HostTensor xi = tensor(DType::BF16, {1}, {x.data[i]});
    CHECK(r[0].data[i] == run1(OpKind::Quantize, {&xi, &one}, attrs({{"dtype", dt}})).data[0]);
  }
}

TEST_CASE("dynamic quantize: the scale is the f32 quotient amax / max_finite", "[quantize]") {
  // The expected scales are the f32 roundings of 1/m and 7/m, written out (7/448 and 7/57344 are
  // powers of two).
  check_dynamic_scales(DType::F8E4M3, 448, {0x1.24924ap-9, 0x1p-6});
  check_dynamic_scales(DType::F8E5M2, 57344, {0x1.24924ap-16, 0x1p-13});
  check_dynamic_scales(DType::I8, 127, {0x1.020408p-7, 0x1.c3870ep-5});
}

TEST_CASE("dynamic quantize: per tensor, per column, NaN skipped, underflowing scale", "[quantize]") {
  HostTensor x = tensor(DType::F32, {2, 3}, {1, -8, 2, -4, 0.5, 16});
  auto whole = test::run_op(OpKind::Quantize, {&x}, attrs({{"dtype", DType::F8E4M3}}));
  CHECK(whole[1].shape.empty());
  CHECK(whole[1].data == std::vector<double>{to_f32(16.0 / 448)});
  auto cols = test::run_op(OpKind::Quantize, {&x}, attrs({{"dtype", DType::I8}, {"axis", 1}}));
  CHECK(cols[1].data == std::vector<double>{to_f32(4.0 / 127), to_f32(8.0 / 127), to_f32(16.0 / 127)});

  // fmaxf skips NaN, so the kernel's amax ignores it; its own code is NaN (i8: 0).
  HostTensor with_nan = tensor(DType::F32, {1, 2}, {NAN, 254});
  auto n8 = test::run_op(OpKind::Quantize, {&with_nan}, attrs({{"dtype", DType::I8}, {"axis", 0}}));
  CHECK(n8[1].data[0] == 2);
  CHECK(n8[0].data == std::vector<double>{0, 127});
  auto nf = test::run_op(OpKind::Quantize, {&with_nan}, attrs({{"dtype", DType::F8E4M3}, {"axis", 0}}));
  CHECK(std::isnan(nf[0].data[0]));
  CHECK(nf[0].data[1] == 448);
}

TEST_CASE("dynamic quantize: a scale that underflows to 0 becomes 1", "[quantize]") {
  // 2^-149 / 448 is below half of f32's smallest subnormal: the quotient is 0, so the scale is 1
  // and every code is 0, never 0 / 0.
  HostTensor tiny = tensor(DType::F32, {1, 2}, {0x1p-149, -0x1p-149});
  auto r = test::run_op(OpKind::Quantize, {&tiny}, attrs({{"dtype", DType::F8E4M3}, {"axis", 0}}));
  CHECK(r[1].data == std::vector<double>{1});
  CHECK(r[0].data == std::vector<double>{0, -0.0});
  // A subnormal scale that does not underflow is kept: codes still reach the format's maximum.
  HostTensor small = tensor(DType::F32, {1, 2}, {0x1p-130, 0x1p-131});
  auto s = test::run_op(OpKind::Quantize, {&small}, attrs({{"dtype", DType::F8E4M3}, {"axis", 0}}));
  CHECK(s[1].data[0] == to_f32(0x1p-130 / 448));
  CHECK(s[0].data[0] == 448);
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
