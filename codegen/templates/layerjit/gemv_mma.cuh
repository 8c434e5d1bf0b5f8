// The fp8 GEMV's main loop on the tensor cores (sm_89+): y[m, n] = sum_k x[m, k] * w[n, k] for fp8
// x and W with mma.sync.m16n8k32 (e4m3 or e5m2 operands, fp32 accumulators); and i8's (sm_80+, s8
// operands, int32 accumulators: lj_gemv_mma_share_s8). The SIMT GEMV
// (emit_gemv.cpp) converts every code of x and W to float before its FMA, and those conversions,
// not the bytes, bound it (1.6-2.3 TB/s on the H200 where the bf16 GEMV reads 2.9-3.9); here the
// codes go to the tensor cores as loaded.
//
// A warp computes a 16 x 8 tile: 16 rows of W (A, row-major) against up to 8 rows of x (B, one
// column each). Which k a fragment register holds does not matter to a dot product as long as A and
// B agree, so lane 4g + t takes the 16 bytes at k = 64 s + 16 t of W rows a and b (A rows g and
// g + 8) and of its x row (B column g), and feeds bytes 0-7 to one mma and 8-15 to the next: in the
// PTX ISA's m16n8k32 layout a thread's A registers are rows {g, g + 8} x k {4t..4t+3, 16+4t..16+4t+3}
// and its B registers k {4t..4t+3, 16+4t..16+4t+3} x column g, the same k for both. C: rows
// {g, g + 8} x columns {2t, 2t + 1}.
#pragma once
#include "layerjit/cp_async.cuh"
#include "layerjit/mbarrier.cuh"
#include "layerjit/types.cuh"

// 16 bytes at p, or zeros where `in` is false: a row past N or M, or k past K, adds nothing. (Also the
// 4-bit GEMV's, gemv_q4.cuh, on sm_80+.)
__device__ __forceinline__ uint4 lj_load16_or_zero(const void* p, bool in) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (in) v = *reinterpret_cast<const uint4*>(p);
  return v;
}

// U steps of W rows a and b into registers from step s (zeros past the share or K). W is a weight: a
// kernel may issue the first U before lj_pdl_begin, while the kernel before it still runs.
template <int U, long long K, class T>
__device__ __forceinline__ void lj_gemv_mma_load_w(const T* __restrict__ wa, const T* __restrict__ wb, bool a_in, bool b_in, lj_i64 s,
                                                   lj_i64 s1, int t, uint4 (&a)[U], uint4 (&b)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const lj_i64 k = (s + u) * 64 + 16 * t;
    const bool in = s + u < s1 && k < K;
    a[u] = lj_load16_or_zero(wa + k, in && a_in);
    b[u] = lj_load16_or_zero(wb + k, in && b_in);
  }
}
// One warp's share of k, steps [s0, s1) of 64 elements, added to c through MMA::m16n8k32 (accumulators
// of type A): U steps' loads (3U 16-byte loads per lane) are in flight before the first of their
// mmas. a and b hold the first U steps of W when primed (loaded before the wait on the previous
// kernel: at decode the fp8 GEMVs follow one-CTA row kernels, which launch them early, so W's first
// bytes arrive while the row kernel runs: the H100's FP8 layer 1.5 % faster, docs/perf.md); each
// batch's mmas are followed by the next batch's W, and x is loaded as a batch starts.
// K % 16 == 0 (the emitter's check), so a 16-byte chunk is wholly inside k < K or wholly past it;
// rows start 16-byte aligned.
template <class MMA, int U, long long K, class T, class A>
__device__ __forceinline__ void lj_gemv_mma_steps(const T* __restrict__ wa, const T* __restrict__ wb, const T* __restrict__ xr, bool a_in,
                                                      bool b_in, bool x_in, lj_i64 s0, lj_i64 s1, int t, uint4 (&a)[U], uint4 (&b)[U],
                                                      bool primed, A (&c)[4]) {
  static_assert(K % 16 == 0, "the tensor-core GEMV loads whole 16-byte chunks of each row");
  if (!primed) lj_gemv_mma_load_w<U, K>(wa, wb, a_in, b_in, s0, s1, t, a, b);
#pragma unroll 1  // the U steps are the unrolling; more only holds more registers (ptxas spilled at 16 warps)
  for (lj_i64 s = s0; s < s1; s += U) {
    uint4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const lj_i64 k = (s + u) * 64 + 16 * t;
      x[u] = lj_load16_or_zero(xr + k, s + u < s1 && k < K && x_in);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      MMA::m16n8k32(c, a[u].x, b[u].x, a[u].y, b[u].y, x[u].x, x[u].y);
      MMA::m16n8k32(c, a[u].z, b[u].z, a[u].w, b[u].w, x[u].z, x[u].w);
    }
    if (s + U < s1) lj_gemv_mma_load_w<U, K>(wa, wb, a_in, b_in, s + U, s1, t, a, b);
  }
}

// A warp's ring of S k steps in shared memory for the staged GEMV ("stages=S"): each lane's 16 bytes
// of W rows a and b and of its x row per step, [step][a, b, x][lane].
template <int S>
struct lj_mma_ring {
  uint4 v[S][3][32];
};

// Step s's 16 bytes of W rows a and b into slot `slot` of the ring by cp.async (zeros past K or for a
// row past N); nothing past the warp's share, whose slots are never read. W is a weight: these may be
// issued before lj_pdl_begin, while the kernel before this one still runs. (Steps and k in int: a
// 64-bit index per copy held the prologue's unrolled copies at 98-124 registers.)
template <int S, long long K, class T>
__device__ __forceinline__ void lj_gemv_mma_stage_w(const T* __restrict__ wa, const T* __restrict__ wb, bool a_in, bool b_in, int s, int s1,
                                                    int slot, int t, int lane, lj_mma_ring<S>& ring) {
  static_assert(K < (1LL << 30), "k in int");
  if (s >= s1) return;
  const int k = s * 64 + 16 * t;
  const bool ia = a_in && k < K, ib = b_in && k < K;
  lj_cp_async16(&ring.v[slot][0][lane], ia ? wa + k : wa, ia ? 16 : 0);
  lj_cp_async16(&ring.v[slot][1][lane], ib ? wb + k : wb, ib ? 16 : 0);
}
// ... and of the lane's x row: only after lj_pdl_begin (x is the previous kernel's output).
template <int S, long long K, class T>
__device__ __forceinline__ void lj_gemv_mma_stage_x(const T* __restrict__ xr, bool x_in, int s, int s1, int slot, int t, int lane,
                                                    lj_mma_ring<S>& ring) {
  if (s >= s1) return;
  const int k = s * 64 + 16 * t;
  const bool in = x_in && k < K;
  lj_cp_async16(&ring.v[slot][2][lane], in ? xr + k : xr, in ? 16 : 0);
}
// The W copies of the share's first S - 1 steps (slots 0..S-2), not yet committed: the staged share's
// prologue, which a kernel may issue before lj_pdl_begin (then passes primed = true).
template <int S, long long K, class T>
__device__ __forceinline__ void lj_gemv_mma_prime(const T* __restrict__ wa, const T* __restrict__ wb, bool a_in, bool b_in, int s0, int s1,
                                                  int t, int lane, lj_mma_ring<S>& ring) {
#pragma unroll 1
  for (int i = 0; i < S - 1; ++i) lj_gemv_mma_stage_w<S, K>(wa, wb, a_in, b_in, s0 + i, s1, i, t, lane, ring);
}

// lj_gemv_mma_steps with W and x staged through the warp's ring in shared memory: each lane copies
// its own 16-byte chunks with cp.async and reads back only what it copied, so the ring needs no
// barrier, and S - 1 steps stay in flight per lane without holding registers (the register batches
// held the fp8 GEMV to 2 CTAs of 8 warps per SM on the H100, its warps waiting on their loads:
// docs/perf.md). The first S - 1 steps' x copies are committed one group per step after the primed
// W copies, so group i holds step i's W and x either way and one wait<S - 1> per step serves all.
// The slot a step refills is the one the step before read: its mmas were issued, so its loads are done.
template <class MMA, int S, long long K, class T, class A>
__device__ __forceinline__ void lj_gemv_mma_steps_staged(const T* __restrict__ wa, const T* __restrict__ wb, const T* __restrict__ xr,
                                                         bool a_in, bool b_in, bool x_in, int s0, int s1, int t, int lane,
                                                         lj_mma_ring<S>& ring, bool primed, A (&c)[4]) {
  static_assert(K % 16 == 0, "the tensor-core GEMV copies whole 16-byte chunks of each row");
  static_assert(S >= 2, "a ring of at least two steps");
  if (!primed) lj_gemv_mma_prime<S, K>(wa, wb, a_in, b_in, s0, s1, t, lane, ring);
#pragma unroll 1
  for (int i = 0; i < S - 1; ++i) {
    lj_gemv_mma_stage_x<S, K>(xr, x_in, s0 + i, s1, i, t, lane, ring);
    lj_cp_async_commit();
  }
  int slot = 0, fill = S - 1;  // step s's slot, and step s + S - 1's (the one step s - 1 read)
#pragma unroll 1
  for (int s = s0; s < s1; ++s) {
    lj_gemv_mma_stage_w<S, K>(wa, wb, a_in, b_in, s + S - 1, s1, fill, t, lane, ring);
    lj_gemv_mma_stage_x<S, K>(xr, x_in, s + S - 1, s1, fill, t, lane, ring);
    lj_cp_async_commit();
    lj_cp_async_wait<S - 1>();  // this lane's copies of step s have landed
    const uint4 a = ring.v[slot][0][lane], b = ring.v[slot][1][lane], x = ring.v[slot][2][lane];
    MMA::m16n8k32(c, a.x, b.x, a.y, b.y, x.x, x.y);
    MMA::m16n8k32(c, a.z, b.z, a.w, b.w, x.z, x.w);
    fill = slot;
    slot = slot + 1 == S ? 0 : slot + 1;
  }
  lj_cp_async_wait<0>();  // nothing in flight into the ring when the next chunk of x rows reuses it
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
template <class TW, class TX>
struct lj_fp8_mma;  // W's and x's fp8 formats: one format for both (the pruner's rule)
#define LJ_FP8_MMA(TW, TX, SW, SX)                                                                                             \
  template <>                                                                                                                  \
  struct lj_fp8_mma<TW, TX> {                                                                                                  \
    static __device__ __forceinline__ void m16n8k32(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,        \
                                                    unsigned b0, unsigned b1) {                                                \
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." SW "." SX ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "   \
                   "{%0, %1, %2, %3};\n"                                                                                       \
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                            \
                   : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                                                    \
    }                                                                                                                          \
  };
LJ_FP8_MMA(lj_e4m3, lj_e4m3, "e4m3", "e4m3")
LJ_FP8_MMA(lj_e5m2, lj_e5m2, "e5m2", "e5m2")
#undef LJ_FP8_MMA

// fp8, W's first U steps in a and b when primed (loaded before the wait).
template <class TW, class TX, int U, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_pre(const TW* __restrict__ wa, const TW* __restrict__ wb, const TX* __restrict__ xr, bool a_in,
                                                      bool b_in, bool x_in, lj_i64 s0, lj_i64 s1, int t, uint4 (&a)[U], uint4 (&b)[U], bool primed,
                                                      float (&c)[4]) {
  lj_gemv_mma_steps<lj_fp8_mma<TW, TX>, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, a, b, primed, c);
}
// fp8 x and W: the share of a kernel that loads W's first U steps itself (W not a weight).
template <class TW, class TX, int U, long long K>
__device__ __forceinline__ void lj_gemv_mma_share(const TW* __restrict__ wa, const TW* __restrict__ wb, const TX* __restrict__ xr,
                                                  bool a_in, bool b_in, bool x_in, lj_i64 s0, lj_i64 s1, int t, float (&c)[4]) {
  uint4 a[U], b[U];
  lj_gemv_mma_steps<lj_fp8_mma<TW, TX>, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, a, b, false, c);
}
template <class TW, class TX, int S, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_staged(const TW* __restrict__ wa, const TW* __restrict__ wb, const TX* __restrict__ xr,
                                                         bool a_in, bool b_in, bool x_in, int s0, int s1, int t, int lane,
                                                         lj_mma_ring<S>& ring, bool primed, float (&c)[4]) {
  static_assert(sizeof(TW) == 1 && sizeof(TX) == 1, "fp8 codes");
  lj_gemv_mma_steps_staged<lj_fp8_mma<TW, TX>, S, K>(reinterpret_cast<const unsigned char*>(wa), reinterpret_cast<const unsigned char*>(wb),
                                                     reinterpret_cast<const unsigned char*>(xr), a_in, b_in, x_in, s0, s1, t, lane, ring,
                                                     primed, c);
}
#endif

// The same for i8 x and W (W8A8, sm_80+): mma.sync.m16n8k32 s8 with the fragment layout of fp8's, the
// sums in int32 (exact), added to c once at the end of the share.
struct lj_s8_mma {
  static __device__ __forceinline__ void m16n8k32(int (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                                  unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
};
template <int S, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_s8_staged(const signed char* __restrict__ wa, const signed char* __restrict__ wb,
                                                            const signed char* __restrict__ xr, bool a_in, bool b_in, bool x_in, int s0,
                                                            int s1, int t, int lane, lj_mma_ring<S>& ring, bool primed, float (&c)[4]) {
  int d[4] = {0, 0, 0, 0};
  lj_gemv_mma_steps_staged<lj_s8_mma, S, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, lane, ring, primed, d);
#pragma unroll
  for (int r = 0; r < 4; ++r) c[r] += (float)d[r];
}
// i8: W's first U steps in a and b when primed (loaded before the wait), else loaded here.
template <int U, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_s8_pre(const signed char* __restrict__ wa, const signed char* __restrict__ wb,
                                                         const signed char* __restrict__ xr, bool a_in, bool b_in, bool x_in, lj_i64 s0, lj_i64 s1,
                                                         int t, uint4 (&a)[U], uint4 (&b)[U], bool primed, float (&c)[4]) {
  int d[4] = {0, 0, 0, 0};
  lj_gemv_mma_steps<lj_s8_mma, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, a, b, primed, d);
#pragma unroll
  for (int r = 0; r < 4; ++r) c[r] += (float)d[r];
}
template <int U, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_s8(const signed char* __restrict__ wa, const signed char* __restrict__ wb,
                                                     const signed char* __restrict__ xr, bool a_in, bool b_in, bool x_in, lj_i64 s0,
                                                     lj_i64 s1, int t, float (&c)[4]) {
  uint4 a[U], b[U];
  lj_gemv_mma_share_s8_pre<U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, a, b, false, c);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The bulk-fed GEMV ("bulk=S", sm_90+): the CTA's 16 W rows stream through a ring of S stages of KB
// bytes per row in shared memory, one bulk copy (TMA, no tensor map) per row and stage, each stage
// completing on its own mbarrier. The register and cp.async variants keep at most a few KiB per warp
// in flight and pay a wait per 64-byte step; here one thread keeps S x 16 KiB per CTA in flight and
// the warps wait once per stage, so the copies run ahead of anything the CTA does before its loop:
// the wait on the previous kernel, and an activation-quantize prologue (docs/gemm.md).
// Rows are padded by 16 bytes: lane 4g + t reads row g (and g + 8) at 16 t, and the pad puts the
// eight rows' chunks in distinct banks (four wavefronts per 512 bytes, the least there is).
template <int S, int KB>
struct lj_gemv_bulk_ring {
  static_assert(KB % 64 == 0, "whole 64-byte k steps per stage");
  unsigned char w[S][16][KB + 16];
  unsigned long long full[S];
};

// Stage q of the CTA's sequence (pass q / NST over W, bytes [(q % NST) KB, + KB) of each row) into
// slot q % S: a copy per row in range (rows[r] null past N) and their bytes announced on the slot's
// barrier first. One thread calls it.
template <int S, int KB, long long KBYTES>
__device__ __forceinline__ void lj_gemv_bulk_issue(const unsigned char* const* rows, long long q, lj_gemv_bulk_ring<S, KB>& ring) {
  constexpr long long NST = (KBYTES + KB - 1) / KB;
  const int slot = (int)(q % S);
  const long long k0 = q % NST * KB;
  const unsigned len = (unsigned)(KBYTES - k0 < KB ? KBYTES - k0 : KB);
  unsigned n = 0;
#pragma unroll
  for (int r = 0; r < 16; ++r) n += rows[r] != nullptr;
  lj_mbar_arrive_expect_tx(&ring.full[slot], n * len);
#pragma unroll 1
  for (int r = 0; r < 16; ++r)
    if (rows[r]) lj_bulk_load(ring.w[slot][r], rows[r] + k0, len, &ring.full[slot]);
}

// One pass of the CTA over W (stages q0 .. q0 + NST - 1) against the x row(s) at xr (global or shared
// memory; x_in false: zeros): warp w takes steps w, w + WARPS, ... of each stage's KB / 64, loading
// its x chunks before the stage's wait; once every warp has read a slot, thread 0 refills it with
// stage q + S (none past `total`). A k past K reads zeros for W as well as x (the last stage's tail
// holds an older stage's bytes, which could be NaN codes).
template <class MMA, int S, int KB, int WARPS, long long K, class A>
__device__ __forceinline__ void lj_gemv_bulk_pass(const unsigned char* xr, bool x_in, long long q0, long long total,
                                                  const unsigned char* const* rows, int warp, int lane, lj_gemv_bulk_ring<S, KB>& ring,
                                                  A (&c)[4]) {
  constexpr int SPS = KB / 64, SPW = SPS / WARPS;
  static_assert(SPS % WARPS == 0, "each warp the same number of steps per stage");
  static_assert(K % 16 == 0, "whole 16-byte chunks of each row");
  constexpr long long NST = (K + KB - 1) / KB;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (long long j = 0; j < NST; ++j) {
    const long long q = q0 + j;
    const int slot = (int)(q % S);
    uint4 xv[SPW];
#pragma unroll
    for (int i = 0; i < SPW; ++i) {
      const long long k = j * KB + (warp + i * WARPS) * 64 + 16 * t;
      xv[i] = lj_load16_or_zero(xr + k, x_in && k < K);
    }
    lj_mbar_wait(&ring.full[slot], (unsigned)(q / S & 1));
#pragma unroll
    for (int i = 0; i < SPW; ++i) {
      const int o = (warp + i * WARPS) * 64 + 16 * t;
      const bool in = j * KB + o < K;
      const uint4 a = in ? *reinterpret_cast<const uint4*>(&ring.w[slot][g][o]) : make_uint4(0u, 0u, 0u, 0u);
      const uint4 b = in ? *reinterpret_cast<const uint4*>(&ring.w[slot][g + 8][o]) : make_uint4(0u, 0u, 0u, 0u);
      MMA::m16n8k32(c, a.x, b.x, a.y, b.y, xv[i].x, xv[i].y);
      MMA::m16n8k32(c, a.z, b.z, a.w, b.w, xv[i].z, xv[i].w);
    }
    __syncthreads();  // every warp has read the slot
    if (threadIdx.x == 0 && q + S < total) lj_gemv_bulk_issue<S, KB, K>(rows, q + S, ring);
  }
}

// fp8 x and W.
template <class TW, class TX, int S, int KB, int WARPS, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_bulk(const TX* xr, bool x_in, long long q0, long long total, const unsigned char* const* rows,
                                                       int warp, int lane, lj_gemv_bulk_ring<S, KB>& ring, float (&c)[4]) {
  static_assert(sizeof(TW) == 1 && sizeof(TX) == 1, "fp8 codes");
  lj_gemv_bulk_pass<lj_fp8_mma<TW, TX>, S, KB, WARPS, K>(reinterpret_cast<const unsigned char*>(xr), x_in, q0, total, rows, warp, lane, ring, c);
}
// i8 x and W: int32 sums over the pass (exact), added to c at its end.
template <int S, int KB, int WARPS, long long K>
__device__ __forceinline__ void lj_gemv_mma_share_s8_bulk(const signed char* xr, bool x_in, long long q0, long long total,
                                                          const unsigned char* const* rows, int warp, int lane, lj_gemv_bulk_ring<S, KB>& ring,
                                                          float (&c)[4]) {
  int d[4] = {0, 0, 0, 0};
  lj_gemv_bulk_pass<lj_s8_mma, S, KB, WARPS, K>(reinterpret_cast<const unsigned char*>(xr), x_in, q0, total, rows, warp, lane, ring, d);
#pragma unroll
  for (int r = 0; r < 4; ++r) c[r] += (float)d[r];
}
#endif
