// The GEMV's main loop (emit_gemv.cpp): one warp's pass over one row of W ([N, K] row-major) for
// R (<= MT) rows of x. Lanes take V-wide loads strided by 32 V along K, U of them issued before any
// is used (the bytes in flight that keep HBM busy), and keep one fp32 sum per row of x; the caller
// adds the lanes' sums (lj_warp_sum) and runs the epilogue. Rows of x and W start V-aligned (the
// emitter chose V so); K need not be a multiple of the 32 V U elements one iteration reads: the
// tail takes one V-wide load per lane and step. With SQ, each lane also adds up the squares of the
// x it reads (ss: a one-row prologue's RMS factor, from the same loads).
#pragma once
#include "layerjit/vec.cuh"

template <class TW, class TX, int MT, int V, int U, long long K, int R, bool SQ>
__device__ __forceinline__ void lj_gemv_pass_impl(const TW* __restrict__ w_row, const TX* __restrict__ x, const lj_i64 (&x_row)[MT],
                                                  const int lane, float (&acc)[MT], float (&ss)[MT]) {
  static_assert(R >= 1 && R <= MT, "a pass covers 1..MT rows of x");
  typedef lj_pack<TX, V> XPack;
  typedef lj_pack<TW, V> WPack;
  constexpr lj_i64 STEP = 32LL * V * U;        // elements of a row one warp reads per iteration
  constexpr lj_i64 K_MAIN = K / STEP * STEP;   // the part of each row read without masking
#pragma unroll
  for (int i = 0; i < MT; ++i) acc[i] = 0.f;
  if constexpr (SQ) {
#pragma unroll
    for (int i = 0; i < MT; ++i) ss[i] = 0.f;
  }
  for (lj_i64 k0 = lane * V; k0 < K_MAIN; k0 += STEP) {
    WPack wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) wv[u] = *reinterpret_cast<const WPack*>(w_row + k0 + u * 32 * V);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const XPack xv = *reinterpret_cast<const XPack*>(x + x_row[i] + k0 + u * 32 * V);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[i] = fmaf(lj_to_float(xv.v[j]), lj_to_float(wv[u].v[j]), acc[i]);
        if constexpr (SQ) {
#pragma unroll
          for (int j = 0; j < V; ++j) ss[i] = fmaf(lj_to_float(xv.v[j]), lj_to_float(xv.v[j]), ss[i]);
        }
      }
    }
  }
  if constexpr (K % STEP != 0) {
    for (lj_i64 k = K_MAIN + lane * V; k < K; k += 32 * V) {
      const WPack wv = *reinterpret_cast<const WPack*>(w_row + k);
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const XPack xv = *reinterpret_cast<const XPack*>(x + x_row[i] + k);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[i] = fmaf(lj_to_float(xv.v[j]), lj_to_float(wv.v[j]), acc[i]);
        if constexpr (SQ) {
#pragma unroll
          for (int j = 0; j < V; ++j) ss[i] = fmaf(lj_to_float(xv.v[j]), lj_to_float(xv.v[j]), ss[i]);
        }
      }
    }
  }
}

template <class TW, class TX, int MT, int V, int U, long long K, int R>
__device__ __forceinline__ void lj_gemv_pass(const TW* __restrict__ w_row, const TX* __restrict__ x, const lj_i64 (&x_row)[MT],
                                             const int lane, float (&acc)[MT]) {
  float unused[MT];
  lj_gemv_pass_impl<TW, TX, MT, V, U, K, R, false>(w_row, x, x_row, lane, acc, unused);
}

// The pass that also adds up each row's squares of x into ss (the row's RMS factor).
template <class TW, class TX, int MT, int V, int U, long long K, int R>
__device__ __forceinline__ void lj_gemv_pass_sq(const TW* __restrict__ w_row, const TX* __restrict__ x, const lj_i64 (&x_row)[MT],
                                                const int lane, float (&acc)[MT], float (&ss)[MT]) {
  lj_gemv_pass_impl<TW, TX, MT, V, U, K, R, true>(w_row, x, x_row, lane, acc, ss);
}
