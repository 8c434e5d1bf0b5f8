// HostTensor basics and fill_uniform: deterministic per seed (pinned to splitmix64's published first
// output, so every standard library gives the same tensors), inside [lo, hi), rounded to the dtype.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

TEST_CASE("HostTensor is zero-filled with the shape's element count", "[tensor]") {
  HostTensor t(DType::BF16, {3, 5, 2});
  CHECK(t.numel() == 30);
  CHECK(t.dim(0) == 3);
  CHECK(t.dim(-1) == 2);
  for (double x : t.data) CHECK(x == 0.0);
  HostTensor scalar(DType::F32, {});
  CHECK(scalar.numel() == 1);
  CHECK_THROWS_AS(HostTensor(DType::F32, {2, -1}), UserError);
}

TEST_CASE("round_to_dtype rounds every element", "[tensor]") {
  HostTensor t(DType::F8E4M3, {3});
  t.data = {0.3, 1000.0, -17.0};
  t.round_to_dtype();
  CHECK(t.data == std::vector<double>{0.3125, 448.0, -16.0});
}

TEST_CASE("fill_uniform is pinned to splitmix64", "[tensor]") {
  // splitmix64 seeded with 0 first returns 0xe220a8397b1dcdaf; its top 53 bits make the unit value.
  HostTensor t(DType::F32, {2});
  fill_uniform(t, 0, 0.0, 1.0);
  const double u = static_cast<double>(0xe220a8397b1dcdafULL >> 11) * 0x1p-53;
  CHECK(t.data[0] == static_cast<double>(static_cast<float>(u)));
}

TEST_CASE("fill_uniform is deterministic per seed and differs across seeds", "[tensor]") {
  HostTensor a(DType::BF16, {7, 11});
  HostTensor b(DType::BF16, {7, 11});
  HostTensor c(DType::BF16, {7, 11});
  fill_uniform(a, 42);
  fill_uniform(b, 42);
  fill_uniform(c, 43);
  CHECK(a.data == b.data);
  CHECK(a.data != c.data);
}

TEST_CASE("fill_uniform stays below hi and at or above lo, is rounded, and covers the range", "[tensor]") {
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2}) {
    HostTensor t(dt, {4001});
    fill_uniform(t, 7, -2.0, 3.0);
    double lo = 1e9;
    double hi = -1e9;
    double sum = 0.0;
    for (double x : t.data) {
      REQUIRE(x >= -2.0);
      REQUIRE(x < 3.0);
      REQUIRE(round_to(dt, x) == x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
    }
    INFO(dtype_name(dt));
    CHECK(lo < -1.9);
    CHECK(hi >= 2.5);  // e5m2's largest value below 3
    // The mean of U[-2, 3); fp8 grids are too coarse near hi (draws rounding up to 3 are redrawn).
    if (!is_fp8(dt)) CHECK(std::fabs(sum / 4001 - 0.5) < 0.1);
  }
}

TEST_CASE("fill_uniform on integer dtypes gives every integer of the range", "[tensor]") {
  HostTensor t(DType::I8, {2000});
  fill_uniform(t, 3, -4.0, 4.0);
  std::vector<int> counts(8, 0);
  for (double x : t.data) {
    REQUIRE(x == std::floor(x));
    REQUIRE(x >= -4.0);
    REQUIRE(x <= 3.0);
    ++counts[static_cast<size_t>(x + 4)];
  }
  for (int c : counts) CHECK(c > 150);  // about 250 each
}

TEST_CASE("fill_uniform rejects an empty range", "[tensor]") {
  HostTensor t(DType::F32, {3});
  CHECK_THROWS_AS(fill_uniform(t, 1, 1.0, 1.0), UserError);
  HostTensor i(DType::I8, {3});
  CHECK_THROWS_AS(fill_uniform(i, 1, 0.2, 0.7), UserError);  // holds no integer
}

}  // namespace
}  // namespace lj
