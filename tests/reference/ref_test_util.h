// Helpers for the CPU reference tests: build host tensors, run one op through reference_op with
// result types inferred by the shape rules, and independent decoders of the small float formats.
// Nothing here reuses the reference's own arithmetic, so expectations stay independent of it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "layerjit/reference.h"
#include "ops/op_schema.h"

namespace lj::test {

/// A tensor with the given values (count checked), rounded to the dtype.
inline HostTensor tensor(DType dt, std::vector<int64_t> shape, std::vector<double> values) {
  HostTensor t(dt, std::move(shape));
  REQUIRE(values.size() == t.data.size());
  t.data = std::move(values);
  t.round_to_dtype();
  return t;
}

/// Uniform random values in [lo, hi), rounded to the dtype; never all zero (checked).
inline HostTensor random_tensor(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo = -1.0,
                                double hi = 1.0) {
  HostTensor t(dt, std::move(shape));
  fill_uniform(t, seed, lo, hi);
  bool any_nonzero = false;
  for (double x : t.data) any_nonzero = any_nonzero || x != 0.0;
  REQUIRE(any_nonzero);
  return t;
}

inline Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

/// Runs one op on host tensors; result types come from the shape rules at the operands' shapes.
inline std::vector<HostTensor> run_op(OpKind kind, const std::vector<const HostTensor*>& operands, const Attrs& a = {},
                                      const Bindings& b = {}) {
  std::vector<TensorType> types;
  for (const HostTensor* t : operands) {
    TensorType tt{t->dtype, {}};
    for (int64_t d : t->shape) tt.shape.emplace_back(d);
    types.push_back(tt);
  }
  // Shape attributes may name symbols; the result types keep them, reference_op resolves both.
  std::vector<TensorType> results;
  if (kind == OpKind::Reshape) {
    results.push_back({operands[0]->dtype, a.get_shape("shape")});
  } else {
    results = infer_types(kind, types, check_attrs(kind, a));
  }
  return reference_op(kind, operands, a, results, b);
}

inline HostTensor run1(OpKind kind, const std::vector<const HostTensor*>& operands, const Attrs& a = {},
                       const Bindings& b = {}) {
  auto r = run_op(kind, operands, a, b);
  REQUIRE(r.size() == 1);
  return std::move(r[0]);
}

/// Value of a bit pattern in a binary float format with `exp_bits` exponent and `man_bits` fraction
/// bits. `ieee_top`: the all-ones exponent holds inf/NaN (f16, bf16, e5m2); otherwise (e4m3 "FN")
/// only S.1111.111 is NaN and the top exponent holds normal numbers.
inline double decode_float(uint32_t bits, int exp_bits, int man_bits, bool ieee_top) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const bool neg = (bits >> (exp_bits + man_bits)) & 1u;
  const uint32_t e = (bits >> man_bits) & ((1u << exp_bits) - 1u);
  const uint32_t m = bits & ((1u << man_bits) - 1u);
  const uint32_t e_max = (1u << exp_bits) - 1u;
  double v = 0.0;
  if (ieee_top && e == e_max) {
    v = m == 0 ? INFINITY : NAN;
  } else if (!ieee_top && e == e_max && m == (1u << man_bits) - 1u) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -man_bits), static_cast<int>(e) - bias);
  }
  return neg ? -v : v;
}

inline double bf16_bits(uint32_t b) { return decode_float(b, 8, 7, true); }
inline double f16_bits(uint32_t b) { return decode_float(b, 5, 10, true); }
inline double e4m3_bits(uint32_t b) { return decode_float(b, 4, 3, false); }
inline double e5m2_bits(uint32_t b) { return decode_float(b, 5, 2, true); }

/// The float a double rounds to (C++ conversion, round to nearest even).
inline double to_f32(double x) { return static_cast<double>(static_cast<float>(x)); }

/// Within two float ulps of `want`: for f32 results of transcendental formulas, where the reference
/// and the test may order the double arithmetic differently before the final rounding.
inline bool close_f32(double got, double want) { return std::fabs(got - want) <= std::ldexp(std::fabs(want), -22); }

/// Tolerance for a value rounded once to a dtype with `man_bits` fraction bits: half an ulp,
/// 2^-(man_bits+1) relative, plus an absolute floor for results near zero.
inline bool within_rounding(double got, double exact, int man_bits, double abs_floor = 1e-30) {
  return std::fabs(got - exact) <= std::ldexp(std::fabs(exact), -(man_bits + 1)) + abs_floor;
}

}  // namespace lj::test
