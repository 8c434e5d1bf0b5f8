// layerjit device types: storage types for every IR dtype and exact conversions to and from float.
// Self-contained (no CUDA toolkit headers), so NVRTC needs no include path on the user's machine.
// Rounding matches the CPU reference (ops/reference/rounding.cpp): bf16/f16 round to nearest even;
// fp8 rounds to nearest even and saturates to the finite range; i8/i32 round to nearest even and
// saturate.
#pragma once

typedef long long lj_i64;

// Programmatic dependent launch (sm_90+). Every generated kernel starts here: it waits until the
// previous kernel has completed and its writes are visible, so nothing touches global memory before
// it and the order of every read and write is the stream's. The next kernel of the stream (launched
// with the programmatic-serialization attribute) may then launch once every CTA of this one has
// exited, as the grid drains, instead of after it: its launch overlaps this grid's end. Without the
// attribute, or before sm_90, a no-op.
__device__ __forceinline__ void lj_pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel launch now, while this one runs: called after lj_pdl_begin by the kernels of
// one CTA per row (at decode, one CTA), whose successor's CTAs then become resident and wait while
// the row is reduced. A many-CTA kernel does not call it: the trigger fires once its last CTA has
// called it, and the next kernel's early CTAs then take the SMs that free first (the H100, the bf16
// and INT4 decode layers at B = 1: 3.5 % and 8.7 % slower than without the attribute; docs/perf.md).
__device__ __forceinline__ void lj_pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Completion counting across CTAs (split-K GEMMs, split-KV attention). Called by the `threads`
// threads of named barrier `bar` (0 and blockDim.x: the whole CTA; `t`: the caller's index among
// them) after their global writes: counts the CTA once on `counter` and tells all of them whether it
// came last of `expected`. The barrier orders their writes before the GPU-scope acq_rel atomic of
// thread t = 0, which releases them (cumulatively) to the CTA that counts last and, in that CTA,
// acquires every other CTA's writes before the second barrier lets its threads read them: one
// atomic where a membar.gl in every thread, before and after, did the same.
__device__ __forceinline__ bool lj_arrive_last(unsigned* counter, unsigned expected, int t, int bar, int threads) {
  __shared__ unsigned lj_arrived_last;
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
  if (t == 0) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(counter) : "memory");
    lj_arrived_last = old == expected - 1;
  }
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
  return lj_arrived_last;
}

struct lj_bf16 { unsigned short bits; };
struct lj_f16 { unsigned short bits; };
struct lj_e4m3 { unsigned char bits; };
struct lj_e5m2 { unsigned char bits; };

// --- to float -------------------------------------------------------------------------------
__device__ __forceinline__ float lj_to_float(float v) { return v; }
__device__ __forceinline__ float lj_to_float(int v) { return (float)v; }
__device__ __forceinline__ float lj_to_float(signed char v) { return (float)v; }
__device__ __forceinline__ float lj_to_float(lj_bf16 v) { return __uint_as_float(((unsigned)v.bits) << 16); }
__device__ __forceinline__ float lj_to_float(lj_f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
// fp8 decodes are exact in float. sm_89+ converts in hardware (fp8 -> f16 is exact, f16 -> f32
// too): the arithmetic decode below costs an exp2 per element, which held an fp8 GEMV to ~0.4 TB/s
// on an H200. The byte goes in the low half, so its f16 comes out in the low half.
#if __CUDA_ARCH__ >= 890
#define LJ_FP8_TO_FLOAT(FMT)                                                                  \
  unsigned short h;                                                                         \
  asm("{ .reg .b32 t; cvt.rn.f16x2." FMT "x2 t, %1; mov.b32 {%0, _}, t; }" : "=h"(h) : "h"((unsigned short)v.bits)); \
  float f;                                                                                  \
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));                                            \
  return f;
__device__ __forceinline__ float lj_to_float(lj_e4m3 v) { LJ_FP8_TO_FLOAT("e4m3") }
__device__ __forceinline__ float lj_to_float(lj_e5m2 v) { LJ_FP8_TO_FLOAT("e5m2") }
#undef LJ_FP8_TO_FLOAT
#else
__device__ __forceinline__ float lj_to_float(lj_e4m3 v) {
  const unsigned b = v.bits;
  const float sign = (b & 0x80u) ? -1.f : 1.f;
  const unsigned e = (b >> 3) & 0xfu, m = b & 0x7u;
  if (e == 0xfu && m == 0x7u) return __int_as_float(0x7fc00000);  // the only NaN pattern
  if (e == 0) return sign * (float)m * 0.001953125f;                // m * 2^-9
  return sign * (1.f + (float)m * 0.125f) * exp2f((float)e - 7.f);
}
__device__ __forceinline__ float lj_to_float(lj_e5m2 v) {
  const unsigned b = v.bits;
  const float sign = (b & 0x80u) ? -1.f : 1.f;
  const unsigned e = (b >> 2) & 0x1fu, m = b & 0x3u;
  if (e == 0x1fu) return m ? __int_as_float(0x7fc00000) : sign * __int_as_float(0x7f800000);
  if (e == 0) return sign * (float)m * 1.52587890625e-05f;           // m * 2^-16
  return sign * (1.f + (float)m * 0.25f) * exp2f((float)e - 15.f);
}
#endif

// --- from float -----------------------------------------------------------------------------
template <class T> __device__ __forceinline__ T lj_from_float(float f);

template <> __device__ __forceinline__ float lj_from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ lj_bf16 lj_from_float<lj_bf16>(float f) {
  lj_bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}
template <> __device__ __forceinline__ lj_f16 lj_from_float<lj_f16>(float f) {
  lj_f16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(f));
  return r;
}
template <> __device__ __forceinline__ int lj_from_float<int>(float f) {
  if (f != f) return 0;
  if (f >= 2147483647.f) return 2147483647;
  if (f <= -2147483648.f) return (-2147483647 - 1);
  return __float2int_rn(f);
}
template <> __device__ __forceinline__ signed char lj_from_float<signed char>(float f) {
  if (f != f) return 0;
  return (signed char)__float2int_rn(fminf(fmaxf(f, -128.f), 127.f));
}

// Software fp8 encode: round to nearest even on the format's grid, saturate to the largest finite
// value. E = exponent bits, M = mantissa bits, bias, max finite encoding, NaN encoding.
template <int E, int M, int kBias, unsigned kMaxCode, unsigned kNanCode>
__device__ __forceinline__ unsigned char lj_fp8_encode(float x) {
  const unsigned sign = (__float_as_uint(x) >> 24) & 0x80u;
  if (x != x) return (unsigned char)(sign | kNanCode);
  float a = fabsf(x);
  const float max_finite = (1.f + (float)(kMaxCode & ((1u << M) - 1)) / (float)(1 << M)) *
                           exp2f((float)((int)(kMaxCode >> M) - kBias));
  if (a >= max_finite) return (unsigned char)(sign | kMaxCode);
  const float min_normal = exp2f((float)(1 - kBias));
  if (a < min_normal) {  // subnormal grid: multiples of 2^(1 - bias - M)
    const int m = __float2int_rn(a * exp2f((float)(kBias - 1 + M)));
    return (unsigned char)(sign | (unsigned)m);  // m == 2^M is the smallest normal: still right
  }
  int e = (int)((__float_as_uint(a) >> 23) & 0xffu) - 127;  // a is a normal float here
  const float frac = a * exp2f((float)-e);                  // in [1, 2)
  int m = __float2int_rn((frac - 1.f) * (float)(1 << M));
  if (m == (1 << M)) {
    m = 0;
    ++e;
  }
  unsigned code = ((unsigned)(e + kBias) << M) | (unsigned)m;
  if (code > kMaxCode) code = kMaxCode;
  return (unsigned char)(sign | code);
}

template <> __device__ __forceinline__ lj_e4m3 lj_from_float<lj_e4m3>(float f) {
  lj_e4m3 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short two;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(0.f), "f"(f));
  r.bits = (unsigned char)(two & 0xffu);
#else
  r.bits = lj_fp8_encode<4, 3, 7, 0x7eu, 0x7fu>(f);
#endif
  return r;
}
template <> __device__ __forceinline__ lj_e5m2 lj_from_float<lj_e5m2>(float f) {
  lj_e5m2 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short two;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(two) : "f"(0.f), "f"(f));
  r.bits = (unsigned char)(two & 0xffu);
#else
  r.bits = lj_fp8_encode<5, 2, 15, 0x7bu, 0x7fu>(f);
#endif
  return r;
}
