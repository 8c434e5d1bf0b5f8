// rms_norm and layer_norm against closed forms: constant rows, a hand-computed row, random rows
// against the formula written here, and a large common offset that a one-pass variance would lose.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;

TEST_CASE("rms_norm of a constant row is c / sqrt(c^2 + eps)", "[norms]") {
  HostTensor x = tensor(DType::F32, {2, 37}, std::vector<double>(74, 3.0));
  HostTensor w = tensor(DType::F32, {37}, std::vector<double>(37, 1.0));
  HostTensor y = run1(OpKind::RmsNorm, {&x, &w}, attrs({{"eps", 1e-5}}));
  for (double v : y.data) CHECK(test::close_f32(v, 3.0 / std::sqrt(9.0 + 1e-5)));
}

TEST_CASE("rms_norm of [3, 4] with weights", "[norms]") {
  HostTensor x = tensor(DType::F32, {1, 2}, {3.0, 4.0});
  HostTensor w = tensor(DType::F32, {2}, {2.0, -0.5});
  HostTensor y = run1(OpKind::RmsNorm, {&x, &w}, attrs({{"eps", 0.5}}));
  // mean(x^2) = 12.5; + eps = 13
  CHECK(test::close_f32(y.data[0], 3.0 / std::sqrt(13.0) * 2.0));
  CHECK(test::close_f32(y.data[1], 4.0 / std::sqrt(13.0) * -0.5));
}

TEST_CASE("rms_norm of random bf16 rows matches the formula within bf16 rounding", "[norms]") {
  HostTensor x = random_tensor(DType::BF16, {5, 23}, 21, -2.0, 2.0);
  HostTensor w = random_tensor(DType::BF16, {23}, 22, 0.5, 1.5);
  HostTensor y = run1(OpKind::RmsNorm, {&x, &w});  // default eps 1e-5
  for (int64_t r = 0; r < 5; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < 23; ++i) ms += x.data[static_cast<size_t>(r * 23 + i)] * x.data[static_cast<size_t>(r * 23 + i)];
    ms /= 23;
    for (int64_t i = 0; i < 23; ++i) {
      const size_t at = static_cast<size_t>(r * 23 + i);
      CHECK(test::within_rounding(y.data[at], x.data[at] / std::sqrt(ms + 1e-5) * w.data[static_cast<size_t>(i)], 7));
    }
  }
}

TEST_CASE("rms_norm normalises rows of a rank-3 tensor independently", "[norms]") {
  HostTensor x = random_tensor(DType::F32, {2, 3, 9}, 23);
  HostTensor w = tensor(DType::F32, {9}, std::vector<double>(9, 1.0));
  HostTensor y = run1(OpKind::RmsNorm, {&x, &w}, attrs({{"eps", 1e-12}}));
  for (int64_t r = 0; r < 6; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < 9; ++i) ms += y.data[static_cast<size_t>(r * 9 + i)] * y.data[static_cast<size_t>(r * 9 + i)];
    CHECK(ms / 9 == Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("layer_norm of [1, 2, 3, 4] with weight and bias", "[norms]") {
  HostTensor x = tensor(DType::F32, {1, 4}, {1.0, 2.0, 3.0, 4.0});
  HostTensor w = tensor(DType::F32, {4}, {2.0, 2.0, 2.0, 2.0});
  HostTensor b = tensor(DType::F32, {4}, {0.5, 0.5, 0.5, 0.5});
  HostTensor y = run1(OpKind::LayerNorm, {&x, &w, &b}, attrs({{"eps", 0.25}}));
  // mean 2.5, population variance 1.25; + eps = 1.5
  for (int i = 0; i < 4; ++i) CHECK(test::close_f32(y.data[static_cast<size_t>(i)], (i + 1 - 2.5) / std::sqrt(1.5) * 2.0 + 0.5));
}

TEST_CASE("layer_norm of a constant row is the bias", "[norms]") {
  HostTensor x = tensor(DType::F32, {3, 5}, std::vector<double>(15, -7.25));
  HostTensor w = random_tensor(DType::F32, {5}, 24);
  HostTensor b = random_tensor(DType::F32, {5}, 25);
  HostTensor y = run1(OpKind::LayerNorm, {&x, &w, &b});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < 5; ++i) CHECK(y.data[static_cast<size_t>(r * 5 + i)] == b.data[static_cast<size_t>(i)]);
}

TEST_CASE("layer_norm is stable under a large common offset", "[norms]") {
  // 10000 + {-1, 0, 1}: variance 2/3. E[x^2] - E[x]^2 in float would lose it entirely.
  HostTensor x = tensor(DType::F32, {1, 3}, {9999.0, 10000.0, 10001.0});
  HostTensor w = tensor(DType::F32, {3}, {1.0, 1.0, 1.0});
  HostTensor b = tensor(DType::F32, {3}, {0.0, 0.0, 0.0});
  HostTensor y = run1(OpKind::LayerNorm, {&x, &w, &b});
  const double s = 1.0 / std::sqrt(2.0 / 3.0 + 1e-5);
  CHECK(test::close_f32(y.data[0], -s));
  CHECK(y.data[1] == 0.0);
  CHECK(test::close_f32(y.data[2], s));
}

}  // namespace
}  // namespace lj
