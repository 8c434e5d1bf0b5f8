// softmax (max-subtracted: no overflow at huge magnitudes) and reduce_sum/max/mean with and without
// keepdim, along first, middle and last axes, against closed forms and loops written here.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;

TEST_CASE("softmax of [1000, 1000, 999] does not overflow", "[softmax]") {
  HostTensor x = tensor(DType::F32, {1, 3}, {1000.0, 1000.0, 999.0});
  HostTensor y = run1(OpKind::Softmax, {&x});
  // exp(0), exp(0), exp(-1) over 2 + e^-1
  CHECK(test::close_f32(y.data[0], 0.42231879825151825));
  CHECK(test::close_f32(y.data[1], 0.42231879825151825));
  CHECK(test::close_f32(y.data[2], 0.15536240349696362));
}

TEST_CASE("softmax of large negative logits does not underflow to 0/0", "[softmax]") {
  HostTensor x = tensor(DType::F32, {3}, {-1000.0, -1000.0, -1001.0});
  HostTensor y = run1(OpKind::Softmax, {&x});
  CHECK(test::close_f32(y.data[0], 0.42231879825151825));
  CHECK(test::close_f32(y.data[2], 0.15536240349696362));
}

TEST_CASE("softmax along axis 0 and a middle axis", "[softmax]") {
  HostTensor x = random_tensor(DType::F32, {3, 4, 5}, 41, -4.0, 4.0);
  for (int64_t axis : {0, 1, -2}) {
    HostTensor y = run1(OpKind::Softmax, {&x}, attrs({{"axis", axis}}));
    const int ax = axis < 0 ? static_cast<int>(axis) + 3 : static_cast<int>(axis);
    const int64_t dims[3] = {3, 4, 5};
    const int64_t strides[3] = {20, 5, 1};
    for (int64_t base = 0; base < 60; ++base) {
      if ((base / strides[ax]) % dims[ax] != 0) continue;  // one start per softmax row
      double denom = 0;
      for (int64_t i = 0; i < dims[ax]; ++i) denom += std::exp(x.data[static_cast<size_t>(base + i * strides[ax])]);
      double total = 0;
      for (int64_t i = 0; i < dims[ax]; ++i) {
        const size_t at = static_cast<size_t>(base + i * strides[ax]);
        CHECK(test::close_f32(y.data[at], std::exp(x.data[at]) / denom));
        total += y.data[at];
      }
      CHECK(total == Approx(1.0).epsilon(1e-6));
    }
  }
}

TEST_CASE("softmax of bf16 rounds the probabilities", "[softmax]") {
  HostTensor x = random_tensor(DType::BF16, {2, 7}, 42, -3.0, 3.0);
  HostTensor y = run1(OpKind::Softmax, {&x});
  for (int64_t r = 0; r < 2; ++r) {
    double denom = 0;
    for (int64_t i = 0; i < 7; ++i) denom += std::exp(x.data[static_cast<size_t>(r * 7 + i)]);
    for (int64_t i = 0; i < 7; ++i)
      CHECK(test::within_rounding(y.data[static_cast<size_t>(r * 7 + i)], std::exp(x.data[static_cast<size_t>(r * 7 + i)]) / denom, 7));
  }
}

// x[i, j, k] = 100 i + 10 j + k for shape [2, 3, 4].
HostTensor iota_234() {
  HostTensor x(DType::F32, {2, 3, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) x.data[static_cast<size_t>((i * 3 + j) * 4 + k)] = 100 * i + 10 * j + k;
  return x;
}

TEST_CASE("reduce_sum along the middle axis, with and without keepdim", "[reduce]") {
  HostTensor x = iota_234();
  HostTensor y = run1(OpKind::ReduceSum, {&x}, attrs({{"axis", 1}}));
  REQUIRE(y.shape == std::vector<int64_t>{2, 4});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) CHECK(y.data[static_cast<size_t>(i * 4 + k)] == 300 * i + 30 + 3 * k);
  HostTensor yk = run1(OpKind::ReduceSum, {&x}, attrs({{"axis", 1}, {"keepdim", true}}));
  CHECK(yk.shape == std::vector<int64_t>{2, 1, 4});
  CHECK(yk.data == y.data);
}

TEST_CASE("reduce_max along the last axis and reduce_mean along the first", "[reduce]") {
  HostTensor x = iota_234();
  for (double& v : x.data) v = -v;
  HostTensor mx = run1(OpKind::ReduceMax, {&x}, attrs({{"axis", -1}}));
  REQUIRE(mx.shape == std::vector<int64_t>{2, 3});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(mx.data[static_cast<size_t>(i * 3 + j)] == -(100 * i + 10 * j));
  HostTensor mean = run1(OpKind::ReduceMean, {&x}, attrs({{"axis", 0}, {"keepdim", true}}));
  REQUIRE(mean.shape == std::vector<int64_t>{1, 3, 4});
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k) CHECK(mean.data[static_cast<size_t>(j * 4 + k)] == -(50 + 10 * j + k));
}

TEST_CASE("reduce_max propagates NaN and reduce_sum rounds to the dtype", "[reduce]") {
  HostTensor x = tensor(DType::F32, {2, 3}, {1.0, NAN, 3.0, -1.0, -2.0, -0.5});
  HostTensor mx = run1(OpKind::ReduceMax, {&x}, attrs({{"axis", 1}}));
  CHECK(std::isnan(mx.data[0]));
  CHECK(mx.data[1] == -0.5);
  HostTensor b = tensor(DType::BF16, {3}, {256.0, 1.0, 0.5});
  CHECK(run1(OpKind::ReduceSum, {&b}, attrs({{"axis", 0}})).data[0] == 258.0);  // 257.5 -> 258 in bf16
}

}  // namespace
}  // namespace lj
