// Pointwise math in fp32 with the IR's semantics (docs/ir.md).
#pragma once

// __fdividef: one reciprocal and a multiply instead of the IEEE division's Newton steps and slow
// path (the SwiGLU GEMM epilogue spent most of its time there); ~2 ulp, far below bf16 rounding.
__device__ __forceinline__ float lj_silu(float x) { return __fdividef(x, 1.f + __expf(-x)); }
__device__ __forceinline__ float lj_relu(float x) { return fmaxf(x, 0.f); }
__device__ __forceinline__ float lj_gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float lj_gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.7071067811865476f)); }
__device__ __forceinline__ float lj_rsqrt(float x) { return rsqrtf(x); }
