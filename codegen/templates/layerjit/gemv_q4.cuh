// The tensor-core GEMV on 4-bit weights (sm_80+): y[m, n] = sum_k x[m, k] * w[n, k] where W is the
// group-wise dequantize of packed codes q [N, K] (two per byte, element 2j in the low nibble), scales
// s [N, K / G] and optional zero points z, w = (q - z) * s; mma.sync.m16n8k16 with fp32 accumulators,
// as the fp8 GEMV (gemv_mma.cuh) with 16 rows of W as A and up to 8 rows of x as B.
//
// Which k a fragment register holds does not matter as long as A and B agree and the mapping depends
// on the lane's t alone: lane 4g + t takes the 16 bytes of codes at k = 128 s + 32 t of its W rows a and
// b (A rows g and g + 8), 32 elements, and the same 32 elements of its x row (B column g). Each 32-bit
// word of codes holds 8 elements e0..e7 in nibbles 0..7; (word >> 4i) & 0x000F000F puts e_i and
// e_{i+4} in the two halves of a register, so the pairs a 16-bit operand register holds are
// (e0, e4), (e1, e5), (e2, e6), (e3, e7) and x's pairs are permuted to match (prmt): one word and
// 16 bytes of x feed two mmas. Xor-ing the exponent of 2^7 (bf16) or 2^10 (f16) into a nibble makes
// the 16-bit value 2^E + q exactly (no conversion instruction); adding -(2^E + z) in a packed FMA
// leaves q - z, exact.
//
// Two ways to apply the scale. G a multiple of 128 (the usual 128): a k step's 128 elements lie in
// one group, so its 8 mmas multiply the integers q - z by x into fresh fp32 sums, which are scaled
// once per row and added to the total (lj_q4_step_scaled: one packed FMA per two weights).
// The weights are then never rounded to 16 bits: the result is the exact (q - z) * s products'
// sum, where the reference rounds each w to x's type first (the GPU tests compare such kernels with
// the matmul over the exact weights: tests/gpu/group_check.cpp). G of 32 or 64: groups change, so
// each pair is multiplied by its scale in a second packed FMA, (q - z) * s rounded once, the
// reference's value bit for bit when s has x's type (the product is exact in f32 there); scales of
// another type go through f32 (lj_q4_step_rounded).
//
// At one row the rms_norm making x may be folded in (lj_q4_xs<T, 1, true>): the kernel reads the
// norm's input and weight, multiplies them as it loads them (the B operand is x g rounded to T) and
// adds up x's squares with two more mmas per word, the sums scaled by the row's factor at the end.
//
// A chunk of 32 elements lies in one group (G is a multiple of 32, the planner's rule), so each
// lane reads one scale (and zero point) per row per k step. K % 32 == 0: a chunk is wholly inside
// k < K or wholly past it; chunks past K load zeros for x, so they add nothing whatever W's codes
// decode to there. Rows past N or M are read at a clamped (valid) row and never stored: an A row
// reaches only its own C row and a B column only its own C column. EVEN (K a multiple of 128 and
// every warp's share a multiple of U steps): no chunk is past K and the loads need no predicates.
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
  static constexpr unsigned NEG = 0xc300c300u;  // -128.0: OR-ing z (< 128) into the mantissa makes -(128 + z)
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
  static constexpr unsigned NEG = 0xe400e400u;  // -1024.0: OR-ing z (< 1024) into the mantissa makes -(1024 + z)
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


// A zero point: u4 packed along the row (element j of the row in nibble j % 2 of byte j / 2; rows
// hold an even number of groups, the IR's rule), or i8.
__device__ __forceinline__ int lj_q4_zero(const unsigned char* z, lj_i64 j) { return (z[j >> 1] >> ((j & 1) * 4)) & 15; }
__device__ __forceinline__ int lj_q4_zero(const signed char* z, lj_i64 j) { return z[j]; }

// -(2^E + z) in both halves of a register: the bits of -2^E with z in the mantissa when z is a u4
// code (or the i4 codes' 8, or none: 0), else one conversion (exact: 2^E + z is an integer in
// [0, 2^(E+1)) for an i8 z, inside T's significand).
template <class T, class TZ>
__device__ __forceinline__ unsigned lj_q4_neg_base(int z) {
  if constexpr (lj_same<TZ, signed char>::value) {
    const float nb = -(lj_half2<T>::BIAS + (float)z);
    return lj_half2<T>::pack(nb, nb);
  } else {
    return lj_half2<T>::NEG | ((unsigned)z * 0x00010001u);
  }
}

// The chunk's x (8 elements per word of codes) as the B registers of its two mmas: x's pairs
// (0,1) (2,3) (4,5) (6,7) permuted to the codes' (e0, e4), (e1, e5) and (e2, e6), (e3, e7).
__device__ __forceinline__ void lj_q4_x_pairs(uint4 xv, unsigned (&b0)[2], unsigned (&b1)[2]) {
  b0[0] = __byte_perm(xv.x, xv.z, 0x5410), b0[1] = __byte_perm(xv.x, xv.z, 0x7632);
  b1[0] = __byte_perm(xv.y, xv.w, 0x5410), b1[1] = __byte_perm(xv.y, xv.w, 0x7632);
}

// (a & b) ^ c in one LOP3. Written as C, the compiler splits it into two LOP3s when b and c are both
// constants (a LOP3 takes one immediate), so the nibble extraction below cost two logic instructions
// per pair where one does: in the 4-bit GEMV the integer pipe, not the memory, sets the pace.
__device__ __forceinline__ unsigned lj_and_xor(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "r"(b), "r"(c));  // (0xf0 & 0xcc) ^ 0xaa
  return d;
}

// Pair i of a word of codes (elements i and i + 4) as 2^E + q in the two halves of a register, one
// LOP3 after the shift: the nibbles masked out and the exponent of 2^E put in by xor (its low 4 bits
// are zero), and for i4 codes their sign bits flipped by the same xor (q + 8: a zero point of 8).
template <class T, bool SIGNED>
__device__ __forceinline__ unsigned lj_q4_biased(unsigned word, int i) {
  return lj_and_xor(word >> (4 * i), 0x000f000fu, lj_half2<T>::MAGIC | (SIGNED ? 0x00080008u : 0u));
}

// q - z of pair i of a word, exact, in both halves: 2^E + q plus -(2^E + z) (lj_q4_neg_base).
template <class T, bool SIGNED>
__device__ __forceinline__ unsigned lj_q4_minus_zero(unsigned word, int i, unsigned neg_base2) {
  return lj_half2<T>::fma2(lj_q4_biased<T, SIGNED>(word, i), lj_half2<T>::ONE, neg_base2);
}

// One row's dequantization constants for a chunk of lj_q4_step_rounded: the group's scale and
// zero point. PACKED (the scale has the operands' type): -(2^E + z) and s in both halves of a
// register; else floats for the f32 path.
template <class T, class TS, class TZ, bool SIGNED, bool PACKED>
struct lj_q4_group {
  unsigned neg_base2, s2;  // -(2^E + z), s
  float base, s;           // 2^23 + z, s (f32 path)
  __device__ __forceinline__ void set(TS scale, int z) {
    if constexpr (PACKED) {
      neg_base2 = lj_q4_neg_base<T, TZ>(z);
      s2 = (unsigned)scale.bits | ((unsigned)scale.bits << 16);
    } else {
      base = 8388608.f + (float)z;
      s = lj_to_float(scale);
    }
  }
  // Pair i of a word: elements i and i + 4, dequantized, as one 16-bit pair.
  __device__ __forceinline__ unsigned pair(unsigned word, int i) const {
    if constexpr (PACKED) {
      return lj_half2<T>::fma2(lj_q4_minus_zero<T, SIGNED>(word, i, neg_base2), s2, 0x80008000u);  // (q - z) * s (+ -0)
    } else {
      constexpr unsigned F = 0x4b000000u | (SIGNED ? 8u : 0u);  // 2^23 + q
      const float lo = __uint_as_float(lj_and_xor(word >> (4 * i), 15u, F)) - base;  // q - z, exact
      const float hi = __uint_as_float(lj_and_xor(word >> (4 * i + 16), 15u, F)) - base;
      return lj_half2<T>::pack(lo * s, hi * s);  // f32((q - z) * s), then rounded to T
    }
  }
};

// One lane's k chunk of U steps: the codes of W rows a and b, their scales and zero points, loaded
// together before the first mma that needs them. in: the chunk lies inside K (else codes and x are
// zeros and the group index 0, read and never used).
template <class TS, int U>
struct lj_q4_batch {
  uint4 a[U], b[U];
  TS sa[U], sb[U];
  int za[U], zb[U];
};
// U consecutive values at p, p aligned to their size (1, 2, 4, 8 or 16 bytes), in one load.
template <int BYTES>
struct lj_word_of;
template <>
struct lj_word_of<1> { using type = unsigned char; };
template <>
struct lj_word_of<2> { using type = unsigned short; };
template <>
struct lj_word_of<4> { using type = unsigned; };
template <>
struct lj_word_of<8> { using type = uint2; };
template <>
struct lj_word_of<16> { using type = uint4; };
template <int U, class V>
__device__ __forceinline__ void lj_load_run(const V* __restrict__ p, V (&out)[U]) {
  using W = typename lj_word_of<U * (int)sizeof(V)>::type;
  union {
    W w;
    V v[U];
  } r;
  r.w = *reinterpret_cast<const W*>(p);
#pragma unroll
  for (int u = 0; u < U; ++u) out[u] = r.v[u];
}

// The zero points of groups j .. j + U - 1 (j a multiple of U): u4 codes, U nibbles from byte j / 2
// on, or U i8 values.
template <int U>
__device__ __forceinline__ void lj_q4_zero_run(const unsigned char* z, lj_i64 j, int (&out)[U]) {
  unsigned char b[U / 2];
  lj_load_run<U / 2>(z + j / 2, b);
#pragma unroll
  for (int u = 0; u < U; ++u) out[u] = (b[u / 2] >> ((u & 1) * 4)) & 15;
}
template <int U>
__device__ __forceinline__ void lj_q4_zero_run(const signed char* z, lj_i64 j, int (&out)[U]) {
  signed char b[U];
  lj_load_run<U>(z + j, b);
#pragma unroll
  for (int u = 0; u < U; ++u) out[u] = b[u];
}

// RUN: each of the U steps is one group (G = 128) and the batch starts at a multiple of U steps (EVEN:
// every warp's share is whole batches), so its U scales (and zero points) are consecutive and
// aligned in each row (a row holds a multiple of U groups; params are 256-byte aligned): one load
// per row and batch instead of one per step with its 64-bit address arithmetic (40 -> 28 global
// loads per batch of 4; measured on an H100, the INT4 decode layer 2 % faster, in its small GEMVs).
template <class TS, int U, long long K, long long G, bool EVEN>
struct lj_q4_run {
  static constexpr bool ON = EVEN && G == 128 && (U == 2 || U == 4) && (K / G) % U == 0 && U * sizeof(TS) <= 16;
};

template <class TS, class TZ, bool SIGNED, int U, long long K, long long G, bool EVEN>
__device__ __forceinline__ void lj_q4_load(lj_q4_batch<TS, U>& v, const unsigned char* __restrict__ qa,
                                           const unsigned char* __restrict__ qb, const TS* __restrict__ sa,
                                           const TS* __restrict__ sb, const TZ* za, const TZ* zb, lj_i64 s, lj_i64 s1, int t) {
  constexpr bool RUN = lj_q4_run<TS, U, K, G, EVEN>::ON;
  constexpr bool ZEROS = !lj_same<TZ, void>::value;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const lj_i64 k = (s + u) * 128 + 32 * t;
    const bool in = EVEN || (s + u < s1 && k < K);
    const lj_i64 j = in ? k / G : 0;  // the chunk's group
    v.a[u] = EVEN ? *reinterpret_cast<const uint4*>(qa + k / 2) : lj_load16_or_zero(qa + k / 2, in);
    v.b[u] = EVEN ? *reinterpret_cast<const uint4*>(qb + k / 2) : lj_load16_or_zero(qb + k / 2, in);
    v.za[u] = v.zb[u] = SIGNED ? 8 : 0;  // no zero points: i4 codes' 8, else 0
    if constexpr (!RUN) {
      v.sa[u] = sa[j], v.sb[u] = sb[j];
      if constexpr (ZEROS) v.za[u] = lj_q4_zero(za, j), v.zb[u] = lj_q4_zero(zb, j);
    }
  }
  if constexpr (RUN) {
    lj_load_run<U>(sa + s, v.sa);
    lj_load_run<U>(sb + s, v.sb);
    if constexpr (ZEROS) lj_q4_zero_run<U>(za, s, v.za), lj_q4_zero_run<U>(zb, s, v.zb);
  }
}

// The chunk's x words (8 elements each), zeros past K.
template <bool EVEN, class T>
__device__ __forceinline__ uint4 lj_q4_x(const T* __restrict__ xr, lj_i64 k, bool in) {
  return EVEN ? *reinterpret_cast<const uint4*>(xr + k) : lj_load16_or_zero(xr + k, in);
}

// The x rows of a pass: NB chunks of 8 rows (an mma's 8 columns each), the lane's row of each. With
// NB = 2 (a "mt=16" config) each step's dequantized A fragments feed two mmas, so 16 rows of x cost
// one read of the codes instead of two.
template <class T, int NB, bool NORM = false>
struct lj_q4_xs {
  const T* __restrict__ r[NB];
};

// With the rms_norm that makes x folded in (a one-row prologue, one chunk of 8 rows): r holds the
// norm's input rows and g its weight, so the B operand is x g rounded to T (one packed FMA per pair)
// and the rows' factor 1 / rms scales the sums after the warps' partials meet. ss accumulates x's
// squares on the tensor cores, X X^T over the warp's share of k: lane (gr, t) holds D[gr][2t] and
// D[gr][2t + 1] in ss[0], ss[1], so row c's sum of squares is ss[c & 1] of lane (c, c / 2).
template <class T>
struct lj_q4_xs<T, 1, true> {
  const T* __restrict__ r[1];
  const T* __restrict__ g;
  mutable float ss[4];
};

// The chunk of 8 elements of x row nb at k (zeros past K) as the B operand: x, or x g with the norm
// folded in, its squares added up first.
template <bool EVEN, class T, int NB, bool NORM>
__device__ __forceinline__ uint4 lj_q4_x_operand(const lj_q4_xs<T, NB, NORM>& xs, int nb, lj_i64 k, bool in) {
  uint4 xv = lj_q4_x<EVEN>(xs.r[nb], k, in);
  if constexpr (NORM) {
    const uint4 gv = lj_q4_x<EVEN>(xs.g, k, in);
    // A row gr (and gr + 8) and B column gr are the lane's own words: any order of k serves as long
    // as A and B share it, so D[c][c] gains x row c's squares over the quad's 32 elements.
    const unsigned a0[4] = {xv.x, xv.x, xv.y, xv.y}, b0[2] = {xv.x, xv.y};
    const unsigned a1[4] = {xv.z, xv.z, xv.w, xv.w}, b1[2] = {xv.z, xv.w};
    lj_mma<T>::m16n8k16(xs.ss, a0, b0);
    lj_mma<T>::m16n8k16(xs.ss, a1, b1);
    constexpr unsigned NEG0 = 0x80008000u;  // -0 in both halves: x g + -0 is x g rounded once
    xv.x = lj_half2<T>::fma2(xv.x, gv.x, NEG0), xv.y = lj_half2<T>::fma2(xv.y, gv.y, NEG0);
    xv.z = lj_half2<T>::fma2(xv.z, gv.z, NEG0), xv.w = lj_half2<T>::fma2(xv.w, gv.w, NEG0);
  }
  return xv;
}

// One k step (k: the lane's first element; in: the chunk lies inside K) of W rows a and b, 16 bytes of
// codes each with their group's scale and zero point, added to c[0..NB). G a multiple of 128: the
// step's mmas sum (q - z) * x into fresh accumulators (a chain of 8 mmas per chunk), scaled by the
// row's s in f32.
template <class T, class TS, class TZ, bool SIGNED, bool EVEN, int NB, bool NORM = false>
__device__ __forceinline__ void lj_q4_step_scaled(uint4 qa, uint4 qb, TS sa, TS sb, int za, int zb, const lj_q4_xs<T, NB, NORM>& xs, lj_i64 k,
                                                  bool in, float (*c)[4]) {
  const unsigned nba = lj_q4_neg_base<T, TZ>(za), nbb = lj_q4_neg_base<T, TZ>(zb);
  const unsigned wa[4] = {qa.x, qa.y, qa.z, qa.w};
  const unsigned wb[4] = {qb.x, qb.y, qb.z, qb.w};
  auto qz = lj_q4_minus_zero<T, SIGNED>;
  float d[NB][4] = {};
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // word q: elements k + 8q .. k + 8q + 7
    unsigned b0[NB][2], b1[NB][2];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) lj_q4_x_pairs(lj_q4_x_operand<EVEN>(xs, nb, k + 8 * q, in), b0[nb], b1[nb]);
    const unsigned a0[4] = {qz(wa[q], 0, nba), qz(wb[q], 0, nbb), qz(wa[q], 1, nba), qz(wb[q], 1, nbb)};
    const unsigned a1[4] = {qz(wa[q], 2, nba), qz(wb[q], 2, nbb), qz(wa[q], 3, nba), qz(wb[q], 3, nbb)};
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      lj_mma<T>::m16n8k16(d[nb], a0, b0[nb]);
      lj_mma<T>::m16n8k16(d[nb], a1, b1[nb]);
    }
  }
  const float fa = lj_to_float(sa), fb = lj_to_float(sb);  // C rows g (row a) and g + 8 (row b)
#pragma unroll
  for (int nb = 0; nb < NB; ++nb) {
    c[nb][0] = fmaf(d[nb][0], fa, c[nb][0]), c[nb][1] = fmaf(d[nb][1], fa, c[nb][1]);
    c[nb][2] = fmaf(d[nb][2], fb, c[nb][2]), c[nb][3] = fmaf(d[nb][3], fb, c[nb][3]);
  }
}

// G of 32 or 64: every pair is dequantized whole, (q - z) * s rounded to T, and multiplied in one
// accumulator chain per chunk.
template <class T, class TS, class TZ, bool SIGNED, bool EVEN, int NB, bool NORM = false>
__device__ __forceinline__ void lj_q4_step_rounded(uint4 qa, uint4 qb, TS sa, TS sb, int za, int zb, const lj_q4_xs<T, NB, NORM>& xs, lj_i64 k,
                                                   bool in, float (*c)[4]) {
  constexpr bool PACKED = lj_same<TS, T>::value;
  lj_q4_group<T, TS, TZ, SIGNED, PACKED> ga, gb;
  ga.set(sa, za);
  gb.set(sb, zb);
  const unsigned wa[4] = {qa.x, qa.y, qa.z, qa.w};
  const unsigned wb[4] = {qb.x, qb.y, qb.z, qb.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned b0[NB][2], b1[NB][2];
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) lj_q4_x_pairs(lj_q4_x_operand<EVEN>(xs, nb, k + 8 * q, in), b0[nb], b1[nb]);
    const unsigned a0[4] = {ga.pair(wa[q], 0), gb.pair(wb[q], 0), ga.pair(wa[q], 1), gb.pair(wb[q], 1)};
    const unsigned a1[4] = {ga.pair(wa[q], 2), gb.pair(wb[q], 2), ga.pair(wa[q], 3), gb.pair(wb[q], 3)};
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      lj_mma<T>::m16n8k16(c[nb], a0, b0[nb]);
      lj_mma<T>::m16n8k16(c[nb], a1, b1[nb]);
    }
  }
}

template <class T, class TS, class TZ, bool SIGNED, long long G, bool EVEN, int NB, bool NORM = false>
__device__ __forceinline__ void lj_q4_step(uint4 qa, uint4 qb, TS sa, TS sb, int za, int zb, const lj_q4_xs<T, NB, NORM>& xs, lj_i64 k, bool in,
                                           float (*c)[4]) {
  if constexpr (G % 128 == 0)
    lj_q4_step_scaled<T, TS, TZ, SIGNED, EVEN, NB, NORM>(qa, qb, sa, sb, za, zb, xs, k, in, c);
  else
    lj_q4_step_rounded<T, TS, TZ, SIGNED, EVEN, NB, NORM>(qa, qb, sa, sb, za, zb, xs, k, in, c);
}

// One warp's share of k, steps [s0, s1) of 128 elements, added to c[0..NB): qa/qb the codes of W rows
// a and b (bytes), sa/sb their scales, za/zb their zero points (TZ void: none), xs the x rows.
// SIGNED: i4 codes (lj_q4_biased). U steps' codes are loaded into registers before the first of
// their mmas. x is read as it is used (L1 or L2: every CTA reads the same rows). Measured slower on
// the H200 (docs/perf.md): loading the next U steps while a batch computes, 11 % (more registers,
// fewer warps); an L2 prefetch of the warp's whole share at its start, 7-20 % (a second request per
// line for L2).
template <class T, class TS, class TZ, bool SIGNED, int U, long long K, long long G, bool EVEN, int NB, bool NORM = false>
__device__ __forceinline__ void lj_gemv_q4_share_rows(const unsigned char* __restrict__ qa, const unsigned char* __restrict__ qb,
                                                      const TS* __restrict__ sa, const TS* __restrict__ sb, const TZ* za, const TZ* zb,
                                                      const lj_q4_xs<T, NB, NORM>& xs, lj_i64 s0, lj_i64 s1, int t, float (*c)[4]) {
  static_assert(K % 32 == 0 && G % 32 == 0, "a lane's 32 codes lie in one group and inside K");
#pragma unroll 1
  for (lj_i64 s = s0; s < s1; s += U) {
    lj_q4_batch<TS, U> v;
    lj_q4_load<TS, TZ, SIGNED, U, K, G, EVEN>(v, qa, qb, sa, sb, za, zb, s, s1, t);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const lj_i64 k = (s + u) * 128 + 32 * t;
      const bool in = EVEN || (s + u < s1 && k < K);
      lj_q4_step<T, TS, TZ, SIGNED, G, EVEN, NB, NORM>(v.a[u], v.b[u], v.sa[u], v.sb[u], v.za[u], v.zb[u], xs, k, in, c);
    }
  }
}

// The same for one chunk of 8 x rows (xr: the lane's).
template <class T, class TS, class TZ, bool SIGNED, int U, long long K, long long G, bool EVEN>
__device__ __forceinline__ void lj_gemv_q4_share(const unsigned char* __restrict__ qa, const unsigned char* __restrict__ qb,
                                                 const TS* __restrict__ sa, const TS* __restrict__ sb, const TZ* za, const TZ* zb,
                                                 const T* __restrict__ xr, lj_i64 s0, lj_i64 s1, int t, float (&c)[4]) {
  lj_gemv_q4_share_rows<T, TS, TZ, SIGNED, U, K, G, EVEN, 1>(qa, qb, sa, sb, za, zb, lj_q4_xs<T, 1>{{xr}}, s0, s1, t, &c);
}

// A warp's ring of S k steps of codes in shared memory: [step][row a, b][lane], 16 bytes each.
template <int S>
struct lj_q4_ring {
  uint4 v[S][2][32];
};

// lj_gemv_q4_share with the codes staged through shared memory (a "stages=S" config): each lane
// copies its own 16 bytes of rows a and b per k step with cp.async into its warp's ring and reads
// back only what it copied, so the ring needs no barrier, and S - 1 steps are in flight per lane
// without holding registers. The register batches above hold U steps in 8U registers and issue
// them together, which held the kernel to 16 warps per SM with 1.1 eligible warps per scheduler
// on the H200 (docs/perf.md, "The 4-bit GEMV: scales after the mma"). Scales and zero points are
// read as each step starts, after its codes' copy is issued (the next ones lie in the same line).
// EVEN here: K a multiple of 128 (the copies ahead are predicated on the warp's share anyway).
template <class T, class TS, class TZ, bool SIGNED, int S, long long K, long long G, bool EVEN, int NB, bool NORM = false>
__device__ __forceinline__ void lj_gemv_q4_share_staged(const unsigned char* __restrict__ qa, const unsigned char* __restrict__ qb,
                                                        const TS* __restrict__ sa, const TS* __restrict__ sb, const TZ* za, const TZ* zb,
                                                        const lj_q4_xs<T, NB, NORM>& xs, lj_i64 s0, lj_i64 s1, int t, int lane, lj_q4_ring<S>& ring,
                                                        float (*c)[4]) {
  static_assert(K % 32 == 0 && G % 32 == 0, "a lane's 32 codes lie in one group and inside K");
  static_assert(S >= 2, "a ring of at least two steps");
  auto copy = [&](lj_i64 s) {  // step s into slot (s - s0) % S; zeros past the share or K
    const lj_i64 k = s * 128 + 32 * t;
    const bool in = s < s1 && (EVEN || k < K);
    uint4(&slot)[2][32] = ring.v[(s - s0) % S];
    lj_cp_async16(&slot[0][lane], in ? qa + k / 2 : qa, in ? 16 : 0);
    lj_cp_async16(&slot[1][lane], in ? qb + k / 2 : qb, in ? 16 : 0);
  };
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    copy(s0 + i);
    lj_cp_async_commit();
  }
#pragma unroll 1
  for (lj_i64 s = s0; s < s1; ++s) {
    copy(s + S - 1);  // into the slot step s - 1 used: its mmas were issued, so its loads are done
    lj_cp_async_commit();
    const lj_i64 k = s * 128 + 32 * t;
    const bool in = EVEN || k < K;
    const lj_i64 j = in ? k / G : 0;  // the chunk's group
    const TS fa = sa[j], fb = sb[j];
    int zva = SIGNED ? 8 : 0, zvb = zva;
    if constexpr (!lj_same<TZ, void>::value) zva = lj_q4_zero(za, j), zvb = lj_q4_zero(zb, j);
    lj_cp_async_wait<S - 1>();  // this lane's copies of step s have landed
    const uint4(&slot)[2][32] = ring.v[(s - s0) % S];
    lj_q4_step<T, TS, TZ, SIGNED, G, EVEN, NB, NORM>(slot[0][lane], slot[1][lane], fa, fb, zva, zvb, xs, k, in, c);
  }
  lj_cp_async_wait<0>();  // no copy past the share still in flight when the ring is reused
}
#endif
