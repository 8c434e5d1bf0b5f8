// matmul y = x @ w^T (w stored [N, K]) against a naive triple loop written here, with fp64
// accumulation visible in a cancellation case, leading batch dimensions, and result dtypes.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;

// y[r, n] = sum_k x[r, k] w[n, k], in long double so it is not the implementation's own loop.
std::vector<double> naive_matmul(const HostTensor& x, const HostTensor& w) {
  const int64_t n_out = w.shape[0];
  const int64_t k_in = w.shape[1];
  const int64_t rows = x.numel() / k_in;
  std::vector<double> y(static_cast<size_t>(rows * n_out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < n_out; ++n) {
      long double acc = 0;
      for (int64_t k = k_in; k-- > 0;)  // backwards, for a different summation order
        acc += static_cast<long double>(x.data[static_cast<size_t>(r * k_in + k)]) * w.data[static_cast<size_t>(n * k_in + k)];
      y[static_cast<size_t>(r * n_out + n)] = static_cast<double>(acc);
    }
  return y;
}

TEST_CASE("matmul 7x13x5 in f32 matches a naive triple loop", "[matmul]") {
  HostTensor x = random_tensor(DType::F32, {7, 13}, 11);
  HostTensor w = random_tensor(DType::F32, {5, 13}, 12);
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  REQUIRE(y.dtype == DType::F32);
  REQUIRE(y.shape == std::vector<int64_t>{7, 5});
  const auto want = naive_matmul(x, w);
  for (size_t i = 0; i < want.size(); ++i) CHECK(y.data[i] == Approx(want[i]).epsilon(1e-6).margin(1e-7));
}

TEST_CASE("matmul keeps leading dimensions of x", "[matmul]") {
  HostTensor x = random_tensor(DType::F32, {2, 3, 9}, 13);
  HostTensor w = random_tensor(DType::F32, {4, 9}, 14);
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  REQUIRE(y.shape == std::vector<int64_t>{2, 3, 4});
  const auto want = naive_matmul(x, w);
  for (size_t i = 0; i < want.size(); ++i) CHECK(y.data[i] == Approx(want[i]).epsilon(1e-6).margin(1e-7));
}

TEST_CASE("matmul accumulates in fp64: no loss in a cancelling sum", "[matmul]") {
  // In float, 2^24 + 1 is 2^24, so a float accumulator would return 0 here.
  HostTensor x = tensor(DType::F32, {1, 3}, {0x1p24, 1.0, -0x1p24});
  HostTensor w = tensor(DType::F32, {1, 3}, {1.0, 1.0, 1.0});
  CHECK(run1(OpKind::Matmul, {&x, &w}).data[0] == 1.0);
}

TEST_CASE("matmul of bf16 rounds each output once to bf16", "[matmul]") {
  HostTensor x = random_tensor(DType::BF16, {6, 17}, 15);
  HostTensor w = random_tensor(DType::BF16, {3, 17}, 16);
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  REQUIRE(y.dtype == DType::BF16);
  const auto want = naive_matmul(x, w);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("exact " << want[i] << " got " << y.data[i]);
    CHECK(test::within_rounding(y.data[i], want[i], 7));
    CHECK(round_to(DType::BF16, y.data[i]) == y.data[i]);
  }
}

TEST_CASE("matmul out_dtype f32 keeps the unrounded bf16 product sum", "[matmul]") {
  HostTensor x = random_tensor(DType::BF16, {3, 10}, 17);
  HostTensor w = random_tensor(DType::BF16, {2, 10}, 18);
  HostTensor y = run1(OpKind::Matmul, {&x, &w}, attrs({{"out_dtype", DType::F32}}));
  REQUIRE(y.dtype == DType::F32);
  const auto want = naive_matmul(x, w);
  for (size_t i = 0; i < want.size(); ++i) CHECK(test::within_rounding(y.data[i], want[i], 23));
}

TEST_CASE("matmul of fp8 produces bf16 by default", "[matmul]") {
  // Small integers: every product and sum is exact in bf16.
  HostTensor x = tensor(DType::F8E4M3, {2, 3}, {1, 2, 3, -4, 0.5, 6});
  HostTensor w = tensor(DType::F8E4M3, {2, 3}, {1, 1, 1, 2, -1, 0.25});
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  REQUIRE(y.dtype == DType::BF16);
  CHECK(y.data == std::vector<double>{6.0, 2.0 - 2.0 + 0.75, -4.0 + 0.5 + 6.0, -8.0 - 0.5 + 1.5});
}

}  // namespace
}  // namespace lj
