// Dynamic quantization (quantize without a scale operand, docs/ir.md): a row's scale from its largest
// magnitude, and the quotient each code is rounded from. Both are IEEE f32 divisions, exactly what
// the CPU reference computes (ops/reference/quantize.cpp), so codes and scales match it bit for bit.
#pragma once
#include "layerjit/types.cuh"

// Largest finite magnitude of each quantized storage type.
template <class T>
struct lj_quant_max;
template <>
struct lj_quant_max<lj_e4m3> {
  static constexpr float value = 448.f;
};
template <>
struct lj_quant_max<lj_e5m2> {
  static constexpr float value = 57344.f;
};
template <>
struct lj_quant_max<signed char> {
  static constexpr float value = 127.f;
};

// scale = amax / max, correctly rounded (__fdiv_rn: whatever -prec-div or -use_fast_math say). A
// scale of 0 (an all-zero row, or an amax so small that the quotient underflows) becomes 1: the
// row's codes are then 0 and nothing is divided by zero.
// @pre amax >= 0 (a max of magnitudes; NaN elements are skipped by the fmaxf that found it)
template <class T>
__device__ __forceinline__ float lj_quant_scale(float amax) {
  const float s = __fdiv_rn(amax, lj_quant_max<T>::value);
  return s == 0.f ? 1.f : s;
}

// The value a code is rounded from (lj_from_float<T> then rounds to nearest even and saturates).
__device__ __forceinline__ float lj_quant_div(float x, float scale) { return __fdiv_rn(x, scale); }
