// round_to against the formats' definitions: every representable value is a fixed point and every
// midpoint rounds to the even neighbour (exhaustively for the 8- and 16-bit formats, decoded from bit
// patterns by an independent decoder), known bit patterns, overflow (inf or saturation), subnormals,
// NaN, and the integer formats' ties and saturation.
#include <cmath>
#include <limits>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::bf16_bits;
using test::e4m3_bits;
using test::e5m2_bits;
using test::f16_bits;

struct Format {
  DType dtype;
  int exp_bits;
  int man_bits;
  bool ieee_top;
};

double decode(const Format& f, uint32_t bits) { return test::decode_float(bits, f.exp_bits, f.man_bits, f.ieee_top); }

// Every finite value of the format rounds to itself; the midpoint of two neighbours rounds to the one
// with an even pattern (even mantissa), and anything off the midpoint to the nearer one.
void check_grid(const Format& f) {
  const uint32_t positives = 1u << (f.exp_bits + f.man_bits);
  int fixed_fail = 0;
  int tie_fail = 0;
  int near_fail = 0;
  for (uint32_t p = 0; p < positives; ++p) {
    for (uint32_t sign : {0u, positives}) {
      const double v = decode(f, p | sign);
      if (std::isfinite(v) && round_to(f.dtype, v) != v) ++fixed_fail;
    }
    if (p + 1 >= positives) continue;
    const double a = decode(f, p);
    const double b = decode(f, p + 1);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const double mid = (a + b) / 2;  // exact in double
    const double even = p % 2 == 0 ? a : b;
    if (round_to(f.dtype, mid) != even || round_to(f.dtype, -mid) != -even) ++tie_fail;
    if (round_to(f.dtype, std::nextafter(mid, 0.0)) != a || round_to(f.dtype, std::nextafter(mid, INFINITY)) != b)
      ++near_fail;
  }
  CHECK(fixed_fail == 0);
  CHECK(tie_fail == 0);
  CHECK(near_fail == 0);
}

TEST_CASE("bf16 grid: every value is fixed, ties go to even", "[rounding]") { check_grid({DType::BF16, 8, 7, true}); }
TEST_CASE("f16 grid: every value is fixed, ties go to even", "[rounding]") { check_grid({DType::F16, 5, 10, true}); }
TEST_CASE("f8e4m3 grid: every value is fixed, ties go to even", "[rounding]") {
  check_grid({DType::F8E4M3, 4, 3, false});
}
TEST_CASE("f8e5m2 grid: every value is fixed, ties go to even", "[rounding]") {
  check_grid({DType::F8E5M2, 5, 2, true});
}

TEST_CASE("bf16 matches the float bit-pattern rounding on random floats", "[rounding]") {
  // bf16 is the top half of a float; rounding to nearest even adds 0x7fff plus the kept LSB to the
  // bits and truncates (overflow carries into the exponent and yields inf). A float input converted
  // to double loses nothing, so round_to must agree exactly, subnormals and overflow included.
  uint64_t state = 0x1234567u;
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t u = static_cast<uint32_t>(state >> 32);
    if (i % 4 == 1) u &= 0x807fffffu;  // a quarter subnormal
    float f = 0;
    std::memcpy(&f, &u, sizeof f);
    if (std::isnan(f)) continue;
    const uint32_t expect = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    if (round_to(DType::BF16, static_cast<double>(f)) != bf16_bits(expect)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bf16 known values, overflow and subnormals", "[rounding]") {
  CHECK(round_to(DType::BF16, 1.0) == bf16_bits(0x3f80));
  CHECK(round_to(DType::BF16, 3.14159265) == bf16_bits(0x4049));  // 3.140625
  CHECK(bf16_bits(0x4049) == 3.140625);
  CHECK(round_to(DType::BF16, 1.0 + 0x1p-8) == 1.0);                      // tie, 1.0 is even
  CHECK(round_to(DType::BF16, 1.0 + 3 * 0x1p-8) == 1.0 + 0x1p-6);         // tie, rounds up to even
  CHECK(round_to(DType::BF16, -1.0 - 3 * 0x1p-8) == -(1.0 + 0x1p-6));
  const double max_bf16 = bf16_bits(0x7f7f);
  CHECK(max_bf16 == std::ldexp(2.0 - 0x1p-7, 127));
  CHECK(round_to(DType::BF16, max_bf16) == max_bf16);
  CHECK(round_to(DType::BF16, static_cast<double>(std::numeric_limits<float>::max())) == INFINITY);
  CHECK(round_to(DType::BF16, -1e39) == -INFINITY);
  CHECK(round_to(DType::BF16, 0x1p-133) == 0x1p-133);  // smallest subnormal
  CHECK(round_to(DType::BF16, 0x1p-134) == 0.0);       // tie between 0 and it: 0 is even
  CHECK(round_to(DType::BF16, 1.5 * 0x1p-134) == 0x1p-133);
  CHECK(std::signbit(round_to(DType::BF16, -0x1p-140)));  // rounds to -0
  CHECK(std::isnan(round_to(DType::BF16, NAN)));
  CHECK(round_to(DType::BF16, INFINITY) == INFINITY);
}

TEST_CASE("f16 known values, overflow and subnormals", "[rounding]") {
  CHECK(round_to(DType::F16, 1.0 / 3.0) == f16_bits(0x3555));
  CHECK(f16_bits(0x3555) == 0.333251953125);
  CHECK(round_to(DType::F16, 65504.0) == 65504.0);
  CHECK(round_to(DType::F16, 65519.99) == 65504.0);
  CHECK(round_to(DType::F16, 65520.0) == INFINITY);  // the tie with 65536 goes to the even 2^16 = inf
  CHECK(round_to(DType::F16, -70000.0) == -INFINITY);
  CHECK(round_to(DType::F16, 2049.0) == 2048.0);  // tie: 2048 is even
  CHECK(round_to(DType::F16, 2051.0) == 2052.0);  // tie: 2052 is even
  CHECK(round_to(DType::F16, 0x1p-24) == 0x1p-24);
  CHECK(f16_bits(0x0001) == 0x1p-24);
  CHECK(round_to(DType::F16, 0x1p-25) == 0.0);
  CHECK(round_to(DType::F16, 0.75 * 0x1p-24) == 0x1p-24);
  CHECK(round_to(DType::F16, 3 * 0x1p-25) == 2 * 0x1p-24);  // 1.5 quanta: tie to even 2
  CHECK(std::isnan(round_to(DType::F16, NAN)));
}

TEST_CASE("f8e4m3 (OCP FN) known values, saturation and NaN", "[rounding]") {
  CHECK(e4m3_bits(0x7e) == 448.0);
  CHECK(std::isnan(e4m3_bits(0x7f)));
  CHECK(std::isnan(e4m3_bits(0xff)));
  CHECK(e4m3_bits(0x78) == 256.0);  // the top exponent holds normal numbers
  CHECK(e4m3_bits(0x01) == 0x1p-9);
  CHECK(round_to(DType::F8E4M3, 448.0) == 448.0);
  CHECK(round_to(DType::F8E4M3, 460.0) == 448.0);
  CHECK(round_to(DType::F8E4M3, 464.0) == 448.0);  // tie between 448 (1.110) and 480: even 448
  CHECK(round_to(DType::F8E4M3, 470.0) == 448.0);  // nearest is 480, the NaN slot: saturates
  CHECK(round_to(DType::F8E4M3, 1e6) == 448.0);
  CHECK(round_to(DType::F8E4M3, -1e6) == -448.0);
  CHECK(round_to(DType::F8E4M3, INFINITY) == 448.0);  // SATFINITE clamps infinity too
  CHECK(round_to(DType::F8E4M3, -INFINITY) == -448.0);
  CHECK(std::isnan(round_to(DType::F8E4M3, NAN)));
  CHECK(round_to(DType::F8E4M3, 17.0) == 16.0);  // tie between 16 (1.000) and 18 (1.001)
  CHECK(round_to(DType::F8E4M3, 19.0) == 20.0);  // tie between 18 (1.001) and 20 (1.010)
  CHECK(round_to(DType::F8E4M3, 0.3) == e4m3_bits(0x2a));  // 0.3 -> 0.3125 (1.010 * 2^-2)
  CHECK(e4m3_bits(0x2a) == 0.3125);
  CHECK(round_to(DType::F8E4M3, 0x1p-9) == 0x1p-9);
  CHECK(round_to(DType::F8E4M3, 0x1p-10) == 0.0);
  CHECK(round_to(DType::F8E4M3, 3 * 0x1p-11) == 0x1p-9);
}

TEST_CASE("f8e5m2 known values, saturation and NaN", "[rounding]") {
  CHECK(e5m2_bits(0x7b) == 57344.0);
  CHECK(e5m2_bits(0x7c) == INFINITY);
  CHECK(round_to(DType::F8E5M2, 57344.0) == 57344.0);
  CHECK(round_to(DType::F8E5M2, 61440.0) == 57344.0);  // a tie toward 2^16 saturates instead
  CHECK(round_to(DType::F8E5M2, 1e9) == 57344.0);
  CHECK(round_to(DType::F8E5M2, -INFINITY) == -57344.0);
  CHECK(std::isnan(round_to(DType::F8E5M2, NAN)));
  CHECK(round_to(DType::F8E5M2, 4.5) == 4.0);  // tie between 4 (1.00) and 5 (1.01)
  CHECK(round_to(DType::F8E5M2, 5.5) == 6.0);  // tie between 5 (1.01) and 6 (1.10)
  CHECK(round_to(DType::F8E5M2, 0x1p-16) == 0x1p-16);
  CHECK(round_to(DType::F8E5M2, 0x1p-17) == 0.0);
  CHECK(e5m2_bits(0x01) == 0x1p-16);
}

TEST_CASE("i8 rounds half to even and saturates", "[rounding]") {
  CHECK(round_to(DType::I8, 2.5) == 2.0);
  CHECK(round_to(DType::I8, 3.5) == 4.0);
  CHECK(round_to(DType::I8, -2.5) == -2.0);
  CHECK(round_to(DType::I8, -3.5) == -4.0);
  CHECK(round_to(DType::I8, 2.51) == 3.0);
  CHECK(round_to(DType::I8, 127.4) == 127.0);
  CHECK(round_to(DType::I8, 127.5) == 127.0);
  CHECK(round_to(DType::I8, 200.0) == 127.0);
  CHECK(round_to(DType::I8, -128.0) == -128.0);
  CHECK(round_to(DType::I8, -1000.0) == -128.0);
  CHECK(round_to(DType::I8, INFINITY) == 127.0);
  CHECK(round_to(DType::I8, NAN) == 0.0);
  CHECK_FALSE(std::signbit(round_to(DType::I8, -0.4)));
}

TEST_CASE("i32 rounds half to even and saturates", "[rounding]") {
  CHECK(round_to(DType::I32, 0.5) == 0.0);
  CHECK(round_to(DType::I32, 1.5) == 2.0);
  CHECK(round_to(DType::I32, -7.2) == -7.0);
  CHECK(round_to(DType::I32, 2147483647.0) == 2147483647.0);
  CHECK(round_to(DType::I32, 2147483648.0) == 2147483647.0);
  CHECK(round_to(DType::I32, -3e9) == -2147483648.0);
  CHECK(round_to(DType::I32, NAN) == 0.0);
}

TEST_CASE("f32 rounds as a C++ double-to-float conversion", "[rounding]") {
  CHECK(round_to(DType::F32, 1.0 + 0x1p-24) == 1.0);
  CHECK(round_to(DType::F32, 1.0 + 3 * 0x1p-24) == 1.0 + 0x1p-22);
  CHECK(round_to(DType::F32, 0.1) == static_cast<double>(0.1f));
  CHECK(round_to(DType::F32, 1e39) == INFINITY);
  CHECK(round_to(DType::F32, 0x1p-149) == 0x1p-149);
  CHECK(round_to(DType::F32, 0x1p-150) == 0.0);
  CHECK(round_to(DType::F32, static_cast<double>(std::numeric_limits<float>::max())) ==
        static_cast<double>(std::numeric_limits<float>::max()));
  uint64_t state = 99;
  int mismatches = 0;
  for (int i = 0; i < 20000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double x = std::ldexp(static_cast<double>(state >> 11) * 0x1p-53 - 0.5, static_cast<int>(state % 200) - 100);
    if (round_to(DType::F32, x) != static_cast<double>(static_cast<float>(x))) ++mismatches;
  }
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace lj
