// W made from 4-bit codes inside the tensor-core GEMMs (sm_80+): the weight prologue of a matmul with
// more rows than the 4-bit GEMV takes. The codes reach shared memory as bytes (cp.async in the
// mma.sync GEMM, TMA in the Hopper one); threads dequantize them there into the 16-bit tile the MMAs
// read, in the layout (and swizzle) that tile has when it is loaded as bf16 or f16, so the main loops
// multiply it unchanged.
//
// Each W element is (q - z) * s rounded once to T, the value the unfused plan's prepared W holds (the
// reference's bit for bit where s has T's type; other scale types go through f32 and one rounding,
// as the GEMV's rounded path: gemv_q4.cuh). A unit of work is 32 elements of one W row, k a multiple
// of 32 (the planner's rule: K and G are), so one scale and one zero point serve it: 16 bytes of codes
// in, four 16-byte chunks of T out, in k order. The GEMV's pair trick gives (e_i, e_{i+4}) from a
// word of 8 codes; two byte permutes per two pairs put them back in order, (e0, e1) ... (e6, e7).
#pragma once
#include "layerjit/cp_async.cuh"
#include "layerjit/gemv_q4.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <bool SMALL>
struct lj_q4_offset {
  using type = lj_i64;
};
template <>
struct lj_q4_offset<true> {
  using type = int;
};

// W = dequantize(q, s, z) {group = G}: codes q [NW, K] (element 2j of a row in the low nibble of its
// byte j), scales s [NW, K / G], zero points z (u4 packed like q, or i8; TZ void: none, and i4 codes,
// SIGNED, have a zero of 8). All three dense params, 16-byte aligned.
// STAGED (the Hopper GEMM, one tile per CTA): 0, or the W rows of a tile (two runs of STAGED / 2
// rows, each starting at a multiple of STAGED / 2) whose scales and zero points for the whole of K
// the dequantizing warps copy into shared memory once, at the tile's start (stage_tile), and read
// from there (group_staged) instead of from L2 every k tile.
template <class T, class TS, class TZ, bool SIGNED, lj_i64 NW_, lj_i64 K, lj_i64 G, int STAGED_ = 0>
struct lj_q4 {
  static constexpr bool ON = true;
  static constexpr lj_i64 NW = NW_, GROUPS = K / G, GROUP = G;
  static constexpr int STAGED = STAGED_;
  static_assert(K % 32 == 0 && G % 32 == 0, "a unit's 32 codes lie in one group and inside K");
  // Zero points: u4 packed two to a byte (indexed by nibble), i8, or none.
  static constexpr bool Z_PACKED = lj_same<TZ, unsigned char>::value, Z_NONE = lj_same<TZ, void>::value;
  // STAGED: a run of STAGED / 2 rows' scales (and zero points) is contiguous in global memory (at
  // any row: copy_run); in shared memory the two runs follow each other, tile row i's scales at
  // i * GROUPS as in global memory.
  static constexpr lj_i64 S_RUN = (lj_i64)STAGED / 2 * GROUPS * (lj_i64)sizeof(TS);
  static constexpr lj_i64 Z_RUN = Z_NONE ? 0 : Z_PACKED ? (lj_i64)STAGED / 2 * GROUPS / 2 : (lj_i64)STAGED / 2 * GROUPS;
  static constexpr int TILE_BYTES = (int)(2 * S_RUN + 2 * Z_RUN);  // the shared memory a tile's constants take
  static_assert(STAGED == 0 || (STAGED % 64 == 0 && S_RUN % 16 == 0 && Z_RUN % 16 == 0), "runs of whole 16-byte chunks");
  const unsigned char* __restrict__ q;
  const TS* __restrict__ s;
  const TZ* z;

  // Row n's codes from element k (bytes).
  __device__ __forceinline__ const unsigned char* codes(lj_i64 n, lj_i64 k) const { return q + n * (K / 2) + k / 2; }

  // Where row n's scales begin (n * GROUPS; 32-bit where every row's fits, to spare the dequantizing
  // threads' registers), and whether the row exists (n < NW).
  using Off = typename lj_q4_offset<(NW * GROUPS < (1ll << 31))>::type;
  struct Row {
    Off at;
    bool live;
  };
  __device__ __forceinline__ Row row(lj_i64 n) const { return {(Off)(n * GROUPS), n < NW}; }

  // A unit's group constants as loaded from global memory: its scale and zero point, and whether it
  // is live (false: a row past NW or k past K, which expands to zeros). Loaded apart from the codes so
  // that a GEMM can fetch them a k tile ahead: dequantized one unit at a time, each unit's loads wait
  // behind the previous unit's shared stores (asm volatile with a memory clobber), and the scales of a
  // tile's rows, a row's K / G apart, come from L2 (the ring leaves little L1).
  struct Group {
    TS s;
    int zero;
    bool live;
  };
  __device__ __forceinline__ Group group(const Row& r, lj_i64 k) const {
    Group g{};
    g.live = r.live && k < K;
    g.zero = SIGNED ? 8 : 0;
    if (g.live) {
      g.s = s[r.at + (Off)(k / G)];
      if constexpr (lj_same<TZ, unsigned char>::value) g.zero = lj_q4_zero(z + r.at / 2, k / G);
      else if constexpr (!lj_same<TZ, void>::value) g.zero = lj_q4_zero(z + r.at, k / G);
    }
    return g;
  }
  __device__ __forceinline__ Group group(lj_i64 n, lj_i64 k) const { return group(row(n), k); }

  // STAGED: thread t of `threads` copies its share of the tile's constants (rows b_lo.. and b_hi..,
  // STAGED / 2 each; rows past NW become zeros, never read) into `tile` (copy_run), and commits the
  // cp.async copies as one group.
  __device__ __forceinline__ void stage_tile(unsigned char* tile, lj_i64 b_lo, lj_i64 b_hi, int t, int threads) const {
    static_assert(STAGED > 0, "stage_tile: a tile's rows staged");
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const lj_i64 b = half ? b_hi : b_lo;
      const lj_i64 rows = b >= NW ? 0 : NW - b < STAGED / 2 ? NW - b : STAGED / 2;
      copy_run<S_RUN>(tile + half * S_RUN, reinterpret_cast<const unsigned char*>(s + b * GROUPS), rows * GROUPS * (lj_i64)sizeof(TS), t,
                      threads);
      if constexpr (!Z_NONE) {
        const lj_i64 zb = Z_PACKED ? b * GROUPS / 2 : b * GROUPS, zn = Z_PACKED ? (rows * GROUPS + 1) / 2 : rows * GROUPS;
        copy_run<Z_RUN>(tile + 2 * S_RUN + half * Z_RUN, reinterpret_cast<const unsigned char*>(z) + zb, zn, t, threads);
      }
    }
    lj_cp_async_commit();
  }
  // One run of RUN bytes of shared memory from `bytes` bytes at src (the rest zeros): by cp.async
  // where src is 16-byte aligned, else byte by byte (a run that starts at an arbitrary row: a SwiGLU
  // tile's up rows start at N_OUT + n0 / 2, a RoPE tile's at a head's second half).
  template <lj_i64 RUN>
  static __device__ __forceinline__ void copy_run(unsigned char* dst, const unsigned char* src, lj_i64 bytes, int t, int threads) {
    if ((reinterpret_cast<unsigned long long>(src) & 15) == 0) {
      for (int c = t; c < (int)(RUN / 16); c += threads) {
        const lj_i64 left = bytes - 16 * (lj_i64)c;
        lj_cp_async16(dst + 16 * c, left > 0 ? src + 16 * c : src, left >= 16 ? 16 : left > 0 ? (int)left : 0);
      }
    } else {
      for (int c = t; c < (int)RUN; c += threads) dst[c] = c < bytes ? src[c] : 0;
    }
  }

  // STAGED: the group constants of tile row i (live: the row exists) at element k, from the tile's
  // copy in shared memory.
  __device__ __forceinline__ Group group_staged(const unsigned char* tile, int i, bool live, lj_i64 k) const {
    Group g{};
    g.live = live && k < K;
    g.zero = SIGNED ? 8 : 0;
    if (g.live) {
      const int at = i * (int)GROUPS + (int)(k / G);
      g.s = reinterpret_cast<const TS*>(tile)[at];
      if constexpr (Z_PACKED) g.zero = lj_q4_zero(tile + 2 * S_RUN, at);
      else if constexpr (!Z_NONE) g.zero = lj_q4_zero(reinterpret_cast<const signed char*>(tile + 2 * S_RUN), at);
    }
    return g;
  }

  // A group's constants ready for the 16-bit pairs (gemv_q4.cuh); a group that is not live has a
  // scale of 0 (group() and group_staged() leave it value-initialized), so its elements are zeros.
  using Dequant = lj_q4_group<T, TS, TZ, SIGNED, lj_same<TS, T>::value>;
  static __device__ __forceinline__ Dequant dequant(const Group& g) {
    Dequant d;
    d.set(g.s, g.zero);
    return d;
  }
  // The Hopper GEMM with W in registers (gemm_wgmma.cuh, WREG): a thread's two A registers of one W
  // row for one k16 step, mma.sync's m16k16 fragment layout: elements (2t, 2t + 1) of the step and
  // (2t + 8, 2t + 9), t = lane % 4. w0, w1: the step's 8 code bytes as two words; byte t of each holds
  // the thread's pairs (sel = t | (4 + t) << 4). Moved to nibbles 0 and 4, 2 and 6 of one word, they
  // are the pairs dequantize as elsewhere (gemv_q4.cuh: nibbles i and i + 4 of a word).
  static __device__ __forceinline__ void wreg_pairs(unsigned w0, unsigned w1, unsigned sel, const Dequant& d, unsigned& lo, unsigned& hi) {
    const unsigned x = __byte_perm(w0, w1, sel);  // byte 0: codes of 2t, 2t + 1; byte 1: of 2t + 8, 2t + 9
    const unsigned word = (x & 0x0000ffffu) | ((x << 12) & 0xffff0000u);
    lo = d.pair(word, 0);
    hi = d.pair(word, 2);
  }

  // The unit's 32 elements (`c` their 16 bytes of codes) as four 16-byte chunks of T in k order; zeros
  // where the unit is not live (TMA and the clamped loads read zeros or another row there; such
  // columns are never stored, such k meet zeros of x).
  __device__ __forceinline__ void expand(uint4 c, const Group& g, uint4 (&out)[4]) const {
    if (!g.live) {
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = make_uint4(0u, 0u, 0u, 0u);
      return;
    }
    lj_q4_group<T, TS, TZ, SIGNED, lj_same<TS, T>::value> gr;
    gr.set(g.s, g.zero);
    const unsigned words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // word j: elements k + 8j .. k + 8j + 7
      const unsigned p0 = gr.pair(words[j], 0), p1 = gr.pair(words[j], 1);  // (e0, e4), (e1, e5)
      const unsigned p2 = gr.pair(words[j], 2), p3 = gr.pair(words[j], 3);  // (e2, e6), (e3, e7)
      out[j] = make_uint4(__byte_perm(p0, p1, 0x5410), __byte_perm(p2, p3, 0x5410), __byte_perm(p0, p1, 0x7632),
                          __byte_perm(p2, p3, 0x7632));
    }
  }
};
#endif
