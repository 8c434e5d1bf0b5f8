// rope_table and rope: table entries at known frequencies, both pair layouts rotating a known vector
// by known angles, a quarter turn, norm preservation of every pair, and the relative-position
// property (q.k depends only on the distance between their positions).
#include <cmath>
#include <numbers>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using std::numbers::pi;
using test::attrs;
using test::random_tensor;
using test::run1;
using test::run_op;
using test::tensor;

TEST_CASE("rope_table at known frequencies", "[rope]") {
  HostTensor pos = tensor(DType::I32, {3}, {0, 1, 7});
  auto r = run_op(OpKind::RopeTable, {&pos}, attrs({{"dim", 8}, {"theta", 10000.0}}));
  REQUIRE(r.size() == 2);
  const HostTensor& c = r[0];
  const HostTensor& s = r[1];
  REQUIRE(c.dtype == DType::F32);
  REQUIRE(c.shape == std::vector<int64_t>{3, 4});
  // theta^(-2i/8) for theta = 10^4: 1, 0.1, 0.01, 0.001
  const double freq[4] = {1.0, 0.1, 0.01, 0.001};
  const double p[3] = {0, 1, 7};
  for (int n = 0; n < 3; ++n)
    for (int i = 0; i < 4; ++i) {
      const size_t at = static_cast<size_t>(n * 4 + i);
      CHECK(test::close_f32(c.data[at], std::cos(p[n] * freq[i])));
      CHECK(std::fabs(s.data[at] - std::sin(p[n] * freq[i])) <= 0x1p-23);
    }
  CHECK(c.data[0] == 1.0);
  CHECK(s.data[0] == 0.0);
}

TEST_CASE("rope half: pairs (i, i + D/2) rotate by their angles", "[rope]") {
  // One token, two heads, D = 4; angles pi/3 (pair 0) and pi/6 (pair 1), shared by both heads.
  HostTensor x = tensor(DType::F32, {1, 2, 4}, {1, 2, 3, 4, -1, 0.5, 2, -3});
  HostTensor c = tensor(DType::F32, {1, 2}, {std::cos(pi / 3), std::cos(pi / 6)});
  HostTensor s = tensor(DType::F32, {1, 2}, {std::sin(pi / 3), std::sin(pi / 6)});
  HostTensor y = run1(OpKind::Rope, {&x, &c, &s}, attrs({{"style", "half"}}));
  for (int h = 0; h < 2; ++h) {
    const double* xv = x.data.data() + h * 4;
    const double* yv = y.data.data() + h * 4;
    for (int i = 0; i < 2; ++i) {
      const double cs = c.data[static_cast<size_t>(i)];
      const double sn = s.data[static_cast<size_t>(i)];
      CHECK(yv[i] == Approx(xv[i] * cs - xv[i + 2] * sn).epsilon(1e-6).margin(1e-7));
      CHECK(yv[i + 2] == Approx(xv[i + 2] * cs + xv[i] * sn).epsilon(1e-6).margin(1e-7));
      CHECK(std::hypot(yv[i], yv[i + 2]) == Approx(std::hypot(xv[i], xv[i + 2])).epsilon(1e-6));
    }
  }
  // Head 0, pair 0: (1, 3) by 60 degrees = (0.5 - 3 sqrt(3)/2, 1.5 + sqrt(3)/2).
  CHECK(y.data[0] == Approx(0.5 - 1.5 * std::sqrt(3.0)).epsilon(1e-6));
  CHECK(y.data[2] == Approx(1.5 + 0.5 * std::sqrt(3.0)).epsilon(1e-6));
}

TEST_CASE("rope interleaved: pairs (2i, 2i + 1) rotate by their angles", "[rope]") {
  HostTensor x = tensor(DType::F32, {1, 1, 4}, {1, 2, 3, 4});
  HostTensor c = tensor(DType::F32, {1, 2}, {std::cos(pi / 3), std::cos(pi / 6)});
  HostTensor s = tensor(DType::F32, {1, 2}, {std::sin(pi / 3), std::sin(pi / 6)});
  HostTensor y = run1(OpKind::Rope, {&x, &c, &s}, attrs({{"style", "interleaved"}}));
  // (1, 2) by 60 degrees; (3, 4) by 30 degrees.
  CHECK(y.data[0] == Approx(0.5 - std::sqrt(3.0)).epsilon(1e-6));
  CHECK(y.data[1] == Approx(1.0 + 0.5 * std::sqrt(3.0)).epsilon(1e-6));
  CHECK(y.data[2] == Approx(1.5 * std::sqrt(3.0) - 2.0).epsilon(1e-6));
  CHECK(y.data[3] == Approx(2.0 * std::sqrt(3.0) + 1.5).epsilon(1e-6));
}

TEST_CASE("rope by a quarter turn maps (a, b) to (-b, a) in both layouts", "[rope]") {
  HostTensor x = random_tensor(DType::BF16, {2, 3, 6}, 31);
  HostTensor c = tensor(DType::F32, {2, 3}, std::vector<double>(6, 0.0));
  HostTensor s = tensor(DType::F32, {2, 3}, std::vector<double>(6, 1.0));
  HostTensor half = run1(OpKind::Rope, {&x, &c, &s}, attrs({{"style", "half"}}));
  HostTensor inter = run1(OpKind::Rope, {&x, &c, &s}, attrs({{"style", "interleaved"}}));
  REQUIRE(half.dtype == DType::BF16);
  for (int64_t row = 0; row < 6; ++row) {
    const double* xv = x.data.data() + row * 6;
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(half.data[static_cast<size_t>(row * 6 + i)] == -xv[i + 3]);
      CHECK(half.data[static_cast<size_t>(row * 6 + i + 3)] == xv[i]);
      CHECK(inter.data[static_cast<size_t>(row * 6 + 2 * i)] == -xv[2 * i + 1]);
      CHECK(inter.data[static_cast<size_t>(row * 6 + 2 * i + 1)] == xv[2 * i]);
    }
  }
}

TEST_CASE("rope with a generated table preserves every pair's norm", "[rope]") {
  HostTensor pos = tensor(DType::I32, {5}, {0, 3, 17, 250, 4093});
  auto table = run_op(OpKind::RopeTable, {&pos}, attrs({{"dim", 10}, {"theta", 500000.0}}));
  HostTensor x = random_tensor(DType::F32, {5, 3, 10}, 32);
  for (const char* style : {"half", "interleaved"}) {
    HostTensor y = run1(OpKind::Rope, {&x, &table[0], &table[1]}, attrs({{"style", style}}));
    const bool half = std::string(style) == "half";
    for (int64_t row = 0; row < 15; ++row)
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t a = row * 10 + (half ? i : 2 * i);
        const int64_t b = row * 10 + (half ? i + 5 : 2 * i + 1);
        const double before = std::hypot(x.data[static_cast<size_t>(a)], x.data[static_cast<size_t>(b)]);
        const double after = std::hypot(y.data[static_cast<size_t>(a)], y.data[static_cast<size_t>(b)]);
        CHECK(after == Approx(before).epsilon(1e-6).margin(1e-7));
      }
  }
}

TEST_CASE("rope of a batched [B, T, H, D] tensor uses the [B, T] table row", "[rope]") {
  HostTensor x = random_tensor(DType::F32, {2, 3, 2, 4}, 33);
  HostTensor angle = random_tensor(DType::F32, {2, 3, 2}, 34, -3.0, 3.0);
  HostTensor c(DType::F32, {2, 3, 2});
  HostTensor s(DType::F32, {2, 3, 2});
  for (size_t i = 0; i < angle.data.size(); ++i) {
    c.data[i] = std::cos(angle.data[i]);
    s.data[i] = std::sin(angle.data[i]);
  }
  c.round_to_dtype();
  s.round_to_dtype();
  HostTensor y = run1(OpKind::Rope, {&x, &c, &s});
  for (int64_t bt = 0; bt < 6; ++bt)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 2; ++i) {
        const size_t a = static_cast<size_t>((bt * 2 + h) * 4 + i);
        const size_t t = static_cast<size_t>(bt * 2 + i);
        CHECK(y.data[a] == Approx(x.data[a] * c.data[t] - x.data[a + 2] * s.data[t]).epsilon(1e-6).margin(1e-7));
      }
}

TEST_CASE("rope dot products depend only on relative position", "[rope]") {
  // <R(p) q, R(p') k> = <q, R(p' - p) k>: the same distance at different offsets gives the same score.
  HostTensor pos = tensor(DType::I32, {4}, {5, 3, 112, 110});
  auto table = run_op(OpKind::RopeTable, {&pos}, attrs({{"dim", 8}}));
  HostTensor q = random_tensor(DType::F32, {1, 1, 8}, 35);
  HostTensor k = random_tensor(DType::F32, {1, 1, 8}, 36);
  HostTensor x(DType::F32, {4, 1, 8});
  for (int64_t i = 0; i < 8; ++i) {
    x.data[static_cast<size_t>(i)] = q.data[static_cast<size_t>(i)];
    x.data[static_cast<size_t>(8 + i)] = k.data[static_cast<size_t>(i)];
    x.data[static_cast<size_t>(16 + i)] = q.data[static_cast<size_t>(i)];
    x.data[static_cast<size_t>(24 + i)] = k.data[static_cast<size_t>(i)];
  }
  HostTensor y = run1(OpKind::Rope, {&x, &table[0], &table[1]});
  double near = 0;
  double far = 0;
  for (size_t i = 0; i < 8; ++i) {
    near += y.data[i] * y.data[8 + i];
    far += y.data[16 + i] * y.data[24 + i];
  }
  CHECK(near == Approx(far).epsilon(1e-4).margin(1e-5));
}

}  // namespace
}  // namespace lj
