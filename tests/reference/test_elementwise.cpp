// Elementwise ops: broadcasting against explicit index loops, activations at points whose values are
// known in closed form (computed independently to 16 digits), cast rounding, integer division.
#include <cmath>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;
using test::to_f32;

TEST_CASE("add broadcasts [4,1,5] with [3,1] to [4,3,5]", "[elementwise]") {
  HostTensor a = random_tensor(DType::F32, {4, 1, 5}, 1);
  HostTensor b = random_tensor(DType::F32, {3, 1}, 2);
  HostTensor y = run1(OpKind::Add, {&a, &b});
  REQUIRE(y.shape == std::vector<int64_t>{4, 3, 5});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k)
        CHECK(y.data[static_cast<size_t>((i * 3 + j) * 5 + k)] ==
              to_f32(a.data[static_cast<size_t>(i * 5 + k)] + b.data[static_cast<size_t>(j)]));
}

TEST_CASE("sub broadcasts a row vector over a matrix", "[elementwise]") {
  HostTensor a = random_tensor(DType::F32, {3, 7}, 3);
  HostTensor b = random_tensor(DType::F32, {7}, 4);
  HostTensor y = run1(OpKind::Sub, {&a, &b});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 7; ++k)
      CHECK(y.data[static_cast<size_t>(i * 7 + k)] == to_f32(a.data[static_cast<size_t>(i * 7 + k)] - b.data[static_cast<size_t>(k)]));
}

TEST_CASE("mul of bf16 rounds the exact product once", "[elementwise]") {
  // The product of two bf16 values has at most 16 significant bits, exact in float; bf16 keeps the
  // top half of a float rounded to nearest even (the bit trick below).
  HostTensor a = random_tensor(DType::BF16, {5, 9}, 5, -3.0, 3.0);
  HostTensor b = random_tensor(DType::BF16, {5, 1}, 6, -3.0, 3.0);
  HostTensor y = run1(OpKind::Mul, {&a, &b});
  REQUIRE(y.dtype == DType::BF16);
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t k = 0; k < 9; ++k) {
      const float p = static_cast<float>(a.data[static_cast<size_t>(i * 9 + k)] * b.data[static_cast<size_t>(i)]);
      uint32_t u = 0;
      std::memcpy(&u, &p, sizeof u);
      CHECK(y.data[static_cast<size_t>(i * 9 + k)] == test::bf16_bits((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
    }
  }
}

TEST_CASE("div of f32, including division by zero", "[elementwise]") {
  HostTensor a = tensor(DType::F32, {4}, {1.0, -3.0, 0.0, 2.0});
  HostTensor b = tensor(DType::F32, {4}, {3.0, 0.0, 0.0, -8.0});
  HostTensor y = run1(OpKind::Div, {&a, &b});
  CHECK(y.data[0] == to_f32(1.0 / 3.0));
  CHECK(y.data[1] == -INFINITY);
  CHECK(std::isnan(y.data[2]));
  CHECK(y.data[3] == -0.25);
}

TEST_CASE("integer div truncates toward zero and rejects division by zero", "[elementwise]") {
  HostTensor a = tensor(DType::I32, {4}, {7, -7, 9, -1});
  HostTensor b = tensor(DType::I32, {4}, {-2, 2, 3, 4});
  HostTensor y = run1(OpKind::Div, {&a, &b});
  CHECK(y.data == std::vector<double>{-3, -3, 3, 0});
  HostTensor z = tensor(DType::I32, {4}, {1, 1, 0, 1});
  CHECK_THROWS_WITH(run1(OpKind::Div, {&a, &z}), Catch::Contains("integer division by zero"));
}

TEST_CASE("integer add saturates like every integer store", "[elementwise]") {
  HostTensor a = tensor(DType::I8, {3}, {100, -100, 5});
  HostTensor b = tensor(DType::I8, {3}, {100, -100, -9});
  CHECK(run1(OpKind::Add, {&a, &b}).data == std::vector<double>{127, -128, -4});
}

TEST_CASE("silu at known points", "[elementwise]") {
  HostTensor x = tensor(DType::F32, {5}, {0.0, 1.0, -1.0, 2.5, -60.0});
  HostTensor y = run1(OpKind::Silu, {&x});
  CHECK(y.data[0] == 0.0);
  CHECK(test::close_f32(y.data[1], 0.7310585786300049));
  CHECK(test::close_f32(y.data[2], -0.2689414213699951));
  CHECK(test::close_f32(y.data[3], 2.3103545499468914));
  CHECK(y.data[4] == Approx(-60.0 * std::exp(-60.0)).epsilon(1e-6));  // no overflow in exp(60)
}

TEST_CASE("gelu tanh approximation at known points", "[elementwise]") {
  HostTensor x = tensor(DType::F32, {4}, {0.0, 1.0, -1.0, 2.0});
  HostTensor y = run1(OpKind::Gelu, {&x}, attrs({{"approx", "tanh"}}));
  CHECK(y.data[0] == 0.0);
  CHECK(test::close_f32(y.data[1], 0.8411919906082768));
  CHECK(test::close_f32(y.data[2], -0.15880800939172324));
  CHECK(test::close_f32(y.data[3], 1.954597694087775));
  CHECK(run1(OpKind::Gelu, {&x}).data == y.data);  // "tanh" is the default
}

TEST_CASE("gelu exact (erf) at known points", "[elementwise]") {
  HostTensor x = tensor(DType::F32, {4}, {0.0, 1.0, -1.0, 2.0});
  HostTensor y = run1(OpKind::Gelu, {&x}, attrs({{"approx", "none"}}));
  CHECK(y.data[0] == 0.0);
  CHECK(test::close_f32(y.data[1], 0.8413447460685429));
  CHECK(test::close_f32(y.data[2], -0.15865525393145707));
  CHECK(test::close_f32(y.data[3], 1.9544997361036416));
}

TEST_CASE("relu, exp and rsqrt", "[elementwise]") {
  HostTensor x = tensor(DType::F32, {5}, {-2.0, -0.5, 0.0, 0.5, 4.0});
  CHECK(run1(OpKind::Relu, {&x}).data == std::vector<double>{0.0, 0.0, 0.0, 0.5, 4.0});
  HostTensor e = run1(OpKind::Exp, {&x});
  CHECK(e.data[2] == 1.0);
  CHECK(test::close_f32(e.data[4], 54.598150033144236));
  HostTensor r_in = tensor(DType::F32, {4}, {4.0, 2.0, 0.0, -1.0});
  HostTensor r = run1(OpKind::Rsqrt, {&r_in});
  CHECK(r.data[0] == 0.5);
  CHECK(test::close_f32(r.data[1], 0.7071067811865475));
  CHECK(r.data[2] == INFINITY);
  CHECK(std::isnan(r.data[3]));
}

TEST_CASE("unary ops on bf16 round their result", "[elementwise]") {
  HostTensor x = random_tensor(DType::BF16, {6, 11}, 8, -4.0, 4.0);
  HostTensor y = run1(OpKind::Exp, {&x});
  REQUIRE(y.dtype == DType::BF16);
  for (size_t i = 0; i < x.data.size(); ++i) {
    INFO("x = " << x.data[i]);
    CHECK(test::within_rounding(y.data[i], std::exp(x.data[i]), 7));
    CHECK(round_to(DType::BF16, y.data[i]) == y.data[i]);
  }
}

TEST_CASE("cast rounds to the target dtype", "[elementwise]") {
  HostTensor x = tensor(DType::F32, {5}, {1.0 + 0x1p-8, 1000.0, -2.5, 3.5, 1e6});
  CHECK(run1(OpKind::Cast, {&x}, attrs({{"dtype", DType::BF16}})).data ==
        std::vector<double>{1.0, 1000.0, -2.5, 3.5, 999424.0});
  CHECK(run1(OpKind::Cast, {&x}, attrs({{"dtype", DType::I8}})).data == std::vector<double>{1, 127, -2, 4, 127});
  CHECK(run1(OpKind::Cast, {&x}, attrs({{"dtype", DType::F8E4M3}})).data ==
        std::vector<double>{1.0, 448.0, -2.5, 3.5, 448.0});
  CHECK(run1(OpKind::Cast, {&x}, attrs({{"dtype", DType::F16}})).data[4] == INFINITY);
}

}  // namespace
}  // namespace lj
