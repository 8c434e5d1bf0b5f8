// The tensor-core GEMV on 4-bit weights (sm_80+): y[m, n] = sum_k x[m, k] * w[n, k] where W is the
// group-wise dequantize of packed codes q [N, K] (two per byte, element 2j in the low nibble), scales
// s [N, K / G] and optional zero points z, w = (q - z) * s rounded to x's 16-bit type, exactly as the
// IR's dequantize defines it; mma.sync.m16n8k16 with fp32 accumulators, as the fp8 GEMV
// (gemv_mma.cuh) with 16 rows of W as A and up to 8 rows of x as B.
//
// Which k a fragment register holds does not matter as long as A and B agree and the mapping depends
// on the lane's t alone: lane 4g + t takes the 16 bytes of codes at k = 128 s + 32 t of its W rows a and
// b (A rows g and g + 8), 32 elements, and the same 32 elements of its x row (B column g). Each 32-bit
// word of codes holds 8 elements e0..e7 in nibbles 0..7; (word >> 4i) & 0x000F000F puts e_i and
// e_{i+4} in the two halves of a register, so the pairs a 16-bit operand register holds are
// (e0, e4), (e1, e5), (e2, e6), (e3, e7) and x's pairs are permuted to match (prmt): one word and
// 16 bytes of x feed two mmas. OR-ing the exponent of 2^7 (bf16) or 2^10 (f16) into a nibble makes
// the 16-bit value 2^7 + q exactly (no conversion instruction); subtracting 2^7 + z and multiplying by
// s in packed 16-bit FMAs gives (q - z) * s rounded once, the reference's value bit for bit when s
// has x's type (the product is exact in f32 there). Scales of another type go through f32 instead.
//
// A chunk of 32 elements lies in one group (G is a multiple of 32, the planner's rule), so each
// lane reads one scale (and zero point) per row per k step. K % 32 == 0: a chunk is wholly inside
// k < K or wholly past it, and chunks past K (or rows past N or M) load zeros for x, so they add
// nothing whatever W's codes decode to there.
#pragma once
#include "layerjit/gemv_mma.cuh"
#include "layerjit/mma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <class A, class B>
struct lj_same { static constexpr bool value = false; };
template <class A>
struct lj_same<A, A> { static constexpr bool value = true; };

// 16-bit pairs: the exponent that makes a nibble's value 2^E + q, and the packed FMA.
template <class T>
struct lj_half2;
template <>
struct lj_half2<lj_bf16> {
  static constexpr unsigned MAGIC = 0x43004300u;  // bf16 128.0 in both halves: 8 bits of mantissa hold 128 + 0..255
  static constexpr float BIAS = 128.f;
  static constexpr unsigned ONE = 0x3f803f80u;
  static __device__ __forceinline__ unsigned fma2(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};
template <>
struct lj_half2<lj_f16> {
  static constexpr unsigned MAGIC = 0x64006400u;  // f16 1024.0: 11 bits of mantissa
  static constexpr float BIAS = 1024.f;
  static constexpr unsigned ONE = 0x3c003c00u;
  static __device__ __forceinline__ unsigned fma2(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
  }
  static __device__ __forceinline__ unsigned pack(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
  }
};


// One row's dequantization constants for the chunk in hand: the group's scale and zero point.
// PACKED (the scale has the operands' type): 2^E + z and s in both halves of a register; else
// floats for the f32 path.
template <class T, class TS, bool PACKED>
struct lj_q4_group {
  unsigned neg_base2, s2;  // -(2^E + z), s
  float base, s;           // 2^23 + z, s (f32 path)
  __device__ __forceinline__ void set(TS scale, float z) {
    if constexpr (PACKED) {  // per row and k step: one conversion (exact: 2^E + z fits T's mantissa) and the scale's bits twice
      const float nb = -(lj_half2<T>::BIAS + z);
      neg_base2 = lj_half2<T>::pack(nb, nb);
      s2 = (unsigned)scale.bits | ((unsigned)scale.bits << 16);
    } else {
      base = 8388608.f + z;
      s = lj_to_float(scale);
    }
  }
  // Pair i of a word: elements i and i + 4, dequantized, as one 16-bit pair.
  __device__ __forceinline__ unsigned pair(unsigned word, int i) const {
    if constexpr (PACKED) {
      const unsigned v = ((word >> (4 * i)) & 0x000f000fu) | lj_half2<T>::MAGIC;  // 2^E + q in each half
      return lj_half2<T>::fma2(lj_half2<T>::fma2(v, lj_half2<T>::ONE, neg_base2), s2, 0x80008000u);  // (q - z) * s (+ -0)
    } else {
      const float lo = __uint_as_float(0x4b000000u | ((word >> (4 * i)) & 15u)) - base;  // q - z, exact
      const float hi = __uint_as_float(0x4b000000u | ((word >> (4 * i + 16)) & 15u)) - base;
      return lj_half2<T>::pack(lo * s, hi * s);  // f32((q - z) * s), then rounded to T
    }
  }
};

// A zero point: u4 packed along the row (element j of the row in nibble j % 2 of byte j / 2; rows
// hold an even number of groups, the IR's rule), or i8.
__device__ __forceinline__ float lj_q4_zero(const unsigned char* z, lj_i64 j) { return (float)((z[j >> 1] >> ((j & 1) * 4)) & 15); }
__device__ __forceinline__ float lj_q4_zero(const signed char* z, lj_i64 j) { return (float)z[j]; }

// One warp's share of k, steps [s0, s1) of 128 elements, added to c. qa/qb: the codes of W rows a and
// b (bytes); sa/sb their scales, za/zb their zero points (TZ void: none); xr the x row. SIGNED: i4
// codes, whose sign bits are flipped to make q + 8 (a zero point of 8). U steps' codes, scales and
// zero points are loaded before the first of their mmas; x is read as it is used (L1 or L2: every
// CTA reads the same rows). (Loading the next U steps while this batch computes was measured 11 %
// slower on the H200: more registers, fewer warps; docs/perf.md.)
template <class T, class TS, class TZ, bool SIGNED, int U, long long K, long long G>
__device__ __forceinline__ void lj_gemv_q4_share(const unsigned char* __restrict__ qa, const unsigned char* __restrict__ qb,
                                                 const TS* __restrict__ sa, const TS* __restrict__ sb, const TZ* za, const TZ* zb,
                                                 const T* __restrict__ xr, bool a_in, bool b_in, bool x_in, lj_i64 s0, lj_i64 s1,
                                                 int t, float (&c)[4]) {
  static_assert(K % 32 == 0 && G % 32 == 0, "a lane's 32 codes lie in one group and inside K");
  constexpr bool PACKED = lj_same<TS, T>::value;
  constexpr bool ZEROS = !lj_same<TZ, void>::value;
#pragma unroll 1
  for (lj_i64 s = s0; s < s1; s += U) {
    uint4 a[U], b[U];
    TS sca[U], scb[U];
    float zra[U], zrb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const lj_i64 k = (s + u) * 128 + 32 * t;
      const bool in = s + u < s1 && k < K;
      const lj_i64 j = in ? k / G : 0;  // the chunk's group (0 past K: read, never used)
      a[u] = lj_load16_or_zero(qa + k / 2, in && a_in);
      b[u] = lj_load16_or_zero(qb + k / 2, in && b_in);
      sca[u] = sa[j], scb[u] = sb[j];
      if constexpr (ZEROS) {
        zra[u] = lj_q4_zero(za, j), zrb[u] = lj_q4_zero(zb, j);
      } else {
        zra[u] = zrb[u] = SIGNED ? 8.f : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const lj_i64 k = (s + u) * 128 + 32 * t;
      const bool in = s + u < s1 && k < K;
      lj_q4_group<T, TS, PACKED> ga, gb;
      ga.set(sca[u], zra[u]);
      gb.set(scb[u], zrb[u]);
      const unsigned flip = SIGNED ? 0x88888888u : 0u;
      const unsigned wa[4] = {a[u].x ^ flip, a[u].y ^ flip, a[u].z ^ flip, a[u].w ^ flip};
      const unsigned wb[4] = {b[u].x ^ flip, b[u].y ^ flip, b[u].z ^ flip, b[u].w ^ flip};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // word q: elements k + 8q .. k + 8q + 7
        const uint4 xv = lj_load16_or_zero(xr + k + 8 * q, in && x_in);  // x pairs (0,1) (2,3) (4,5) (6,7)
        const unsigned b0[2] = {__byte_perm(xv.x, xv.z, 0x5410), __byte_perm(xv.x, xv.z, 0x7632)};  // (x0, x4), (x1, x5)
        const unsigned b1[2] = {__byte_perm(xv.y, xv.w, 0x5410), __byte_perm(xv.y, xv.w, 0x7632)};  // (x2, x6), (x3, x7)
        const unsigned a0[4] = {ga.pair(wa[q], 0), gb.pair(wb[q], 0), ga.pair(wa[q], 1), gb.pair(wb[q], 1)};
        const unsigned a1[4] = {ga.pair(wa[q], 2), gb.pair(wb[q], 2), ga.pair(wa[q], 3), gb.pair(wb[q], 3)};
        lj_mma<T>::m16n8k16(c, a0, b0);
        lj_mma<T>::m16n8k16(c, a1, b1);
      }
    }
  }
}
#endif
