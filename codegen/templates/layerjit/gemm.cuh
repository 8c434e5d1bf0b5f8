// The tensor-core GEMM main loop of matmul groups (sm_80+): y[m, n] = sum_k x[m, k] * w[n, k] with x
// an [M, K] row set (M a run-time value) and w an [N, K] row set, both K-contiguous, so the product is
// the "row.col" form mma.sync takes without any transpose.
//
// One CTA computes a BM x BN tile of y from STAGES shared-memory buffers filled by cp.async (a
// multi-stage pipeline: while the tensor cores work on tile kt, tiles kt+1 .. kt+STAGES-1 are in
// flight). WM x WN warps split the tile; each warp owns a (BM/WM) x (BN/WN) block of fp32
// accumulators, fed by ldmatrix from shared memory. Shared-memory rows are XOR-swizzled in 16-byte
// chunks so that neither the cp.async writes nor the ldmatrix reads conflict on banks.
//
// T is bf16, f16 or i8 (W8A8). Every layout is in bytes: a k step is 32 bytes of a row (m16n8k16 of
// 16-bit elements, m16n8k32 of i8 ones, fed by the same ldmatrix), BK * sizeof(T) is 32, 64 or 128
// bytes. i8 sums are exact int32 accumulators, converted to the float acc once after the loop.
//
// Edges: rows past M and columns past N are zero-filled on load (the epilogue never stores them); a K that is not a
// multiple of BK is zero-filled in the last tile. ASYNC = false is the path for operands whose rows are
// not 16-byte aligned (K not a multiple of 8, odd view offsets): element loads with a bound check,
// stored to the same swizzled layout.
//
// Tiles are rastered in groups of GROUP_M tile rows: consecutive CTAs share W tiles (and x tiles
// within a group), which keeps the working set of the CTAs in flight in L2.
//
// Q::ON (W from 4-bit codes, gemm_q4.cuh): each stage holds x's tile and W's codes (BK / 2 bytes per
// row, cp.async); after a k tile has landed the threads dequantize its codes into one W tile outside
// the ring, in the swizzled layout W's own copies would have, and a second barrier publishes it
// before the MMAs read it. BK is 32 or 64 (whole 32-element units per row).
#pragma once
#include "layerjit/mma.cuh"
#include "layerjit/split_k.cuh"
#include "layerjit/vec.cuh"

// A row scale for stage(): by default none. A folded RMSNorm passes its per-row factor instead (a
// functor of the tile row), which multiplies the fp32 sums before their one rounding.
struct lj_no_row_scale {
  __device__ __forceinline__ float operator()(int) const { return 1.f; }
};
template <class S>
struct lj_scales_rows {
  static constexpr bool value = true;
};
template <>
struct lj_scales_rows<lj_no_row_scale> {
  static constexpr bool value = false;
};

// The GEMMs' W as stored: no weight prologue (gemm_q4.cuh has the one that dequantizes 4-bit codes).
struct lj_no_q4 {
  static constexpr bool ON = false;
};

// Tile `bid`'s origin (m0, n0), grouped raster over a ceil(M / BM) x TILES_N grid of tiles (this
// CTA's tile when bid is blockIdx.x; a persistent CTA walks several).
template <int BM, int BN, int GROUP_M, lj_i64 TILES_N>
__device__ __forceinline__ void lj_grouped_tile_at(lj_i64 bid, lj_i64 M, lj_i64& m0, lj_i64& n0) {
  const lj_i64 tiles_m = (M + BM - 1) / BM;
  const lj_i64 per_group = (lj_i64)GROUP_M * TILES_N;
  const lj_i64 first = bid / per_group * GROUP_M;
  const lj_i64 rows = tiles_m - first < GROUP_M ? tiles_m - first : GROUP_M;
  const lj_i64 in_group = bid % per_group;
  m0 = (first + in_group % rows) * BM;
  n0 = in_group / rows * BN;
}
template <int BM, int BN, int GROUP_M, lj_i64 TILES_N>
__device__ __forceinline__ void lj_grouped_tile(lj_i64 M, lj_i64& m0, lj_i64& n0) {
  lj_grouped_tile_at<BM, BN, GROUP_M, TILES_N>(blockIdx.x, M, m0, n0);
}

// SPLIT_K > 1: SPLIT_K CTAs per output tile, each multiplying its range of k tiles (kt_begin), the
// last to finish adding up the partials (split_k.cuh) and running the epilogue.
template <class T, lj_i64 N, lj_i64 K, int BM, int BN, int BK, int WM, int WN, int STAGES, int GROUP_M, bool ASYNC, int SPLIT_K = 1,
          class Q = lj_no_q4>
struct lj_gemm {
  static constexpr int SPLIT = SPLIT_K;
  static constexpr int EPI_THREADS = WM * WN * 32;  // threads of the epilogue: all of them
  static __device__ __forceinline__ int epi_thread() { return threadIdx.x; }
  static constexpr int THREADS = WM * WN * 32;
  static constexpr int CE = 16 / (int)sizeof(T);      // elements per 16-byte chunk
  static constexpr int CHUNKS = BK / CE;              // 16-byte chunks per tile row
  static constexpr int K_STEPS = BK / (2 * CE);       // mma k steps of 32 bytes per k tile
  static constexpr int WTM = BM / WM, WTN = BN / WN;  // the warp's tile
  static constexpr int MI = WTM / 16, NI = WTN / 8;   // mma tiles per warp
  static constexpr int A_LOADS = BM * CHUNKS / THREADS, B_LOADS = BN * CHUNKS / THREADS;
  // A stage: x's tile, then W's (Q::ON: W's codes, BK / 2 bytes per row; the one W tile follows the ring).
  static constexpr int STAGE_ELEMS = Q::ON ? BM * BK + BN * BK / 4 : (BM + BN) * BK;
  static constexpr int SMEM_BYTES = (STAGES * STAGE_ELEMS + (Q::ON ? BN * BK : 0)) * (int)sizeof(T);
  static constexpr int UNITS_PER_ROW = BK / 32;  // Q::ON: 32-element units (16 bytes of codes) per row and k tile
  static constexpr int Q_LOADS = Q::ON ? (BN * UNITS_PER_ROW + THREADS - 1) / THREADS : 0;
  static constexpr lj_i64 TILES_N = (N + BN - 1) / BN;
  static constexpr lj_i64 K_TILES = (K + BK - 1) / BK;

  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "mma.sync here takes 16-bit operands (m16n8k16) or i8 (m16n8k32)");
  static_assert(!Q::ON || (sizeof(T) == 2 && (BK == 32 || BK == 64)), "W from 4-bit codes: 16-bit tiles of whole 32-element units");
  static_assert(CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8, "BK: 2, 4 or 8 chunks of 16 bytes per row");
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "a warp tile is whole 16x16 ldmatrix blocks");
  static_assert(BM * CHUNKS % THREADS == 0 && BN * CHUNKS % THREADS == 0, "every thread copies the same chunk count");
  static_assert(STAGES >= 2, "a pipeline needs two buffers");
  static_assert(SPLIT >= 1 && SPLIT <= K_TILES, "split-K: a k tile per CTA at least");
  static constexpr int PART_FLOATS = THREADS * MI * NI * 4;  // split-K: one CTA's partial

  // Element offset of chunk c of tile row `row`. Rows of CHUNKS chunks share 128-byte lines 8 / CHUNKS
  // at a time; XOR-ing the chunk index with the row's position among the 8 rows an ldmatrix reads
  // puts those 8 rows' chunks in 8 different bank groups.
  static __device__ __forceinline__ int swz(int row, int c) {
    return row * BK + (c ^ ((row / (8 / CHUNKS)) % CHUNKS)) * CE;
  }

  static __device__ __forceinline__ void tile(lj_i64 M, lj_i64& m0, lj_i64& n0) {
    lj_grouped_tile<BM, BN, GROUP_M, TILES_N>(M, m0, n0);
  }
  static __device__ __forceinline__ void tile_at(lj_i64 t, lj_i64 M, lj_i64& m0, lj_i64& n0) {
    lj_grouped_tile_at<BM, BN, GROUP_M, TILES_N>(t, M, m0, n0);
  }
  // Split-K: the first k tile of split `s` (kt_begin(SPLIT) = K_TILES), ranges within one tile apart.
  static __device__ __forceinline__ lj_i64 kt_begin(int s) { return (lj_i64)s * K_TILES / SPLIT; }
  // Split-K after the main loop (all threads): false unless this CTA finished its tile last.
  static __device__ __forceinline__ bool split_reduce(float (&acc)[MI][NI][4], float* part, unsigned* counter, int split) {
    if (SPLIT == 1) return true;
    return lj_split_k_reduce<SPLIT, MI * NI * 4, THREADS>(reinterpret_cast<float(&)[MI * NI * 4]>(acc), part, counter, split,
                                                         threadIdx.x, 0);
  }

  // One 16-byte chunk of a tile row: `avail` elements of it exist in memory (<= 0: none).
  static __device__ __forceinline__ void copy_chunk(T* dst, const T* row, lj_i64 k, lj_i64 avail) {
    if (ASYNC) {
      // Aligned rows with K % CE == 0: a chunk is wholly inside or wholly past the end.
      lj_cp_async16(dst, avail > 0 ? row + k : row, avail > 0 ? 16 : 0);
    } else {
      lj_pack<T, CE> p;
#pragma unroll
      for (int e = 0; e < CE; ++e) {
        p.v[e] = T{};
        if (e < avail) p.v[e] = row[k + e];
      }
      *reinterpret_cast<lj_pack<T, CE>*>(dst) = p;
    }
  }

  // acc += x[m0 .. m0+BM, :] * w[n0 .. n0+BN, :]^T. x_row(m) / w_row(n): element offsets of row starts
  // (w_row may remap columns to rows, e.g. interleaving gate and up rows, and returns -1 for none).
  // (Q::ON: `w` is the lj_q4 of W's codes, and w_row(n) a row index of them, -1 for none.)
  template <class W, class XRow, class WRow>
  static __device__ __forceinline__ void mainloop(const T* __restrict__ x, const W& w, XRow x_row, WRow w_row,
                                                  lj_i64 M, lj_i64 m0, lj_i64 n0, float (&acc)[MI][NI][4], T* smem, int split = 0) {
    if constexpr (lj_int_operands<T>) {
      int sums[MI][NI][4] = {};  // exact integer sums; one rounding to float each
      run(x, w, x_row, w_row, M, m0, n0, sums, smem, split);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mi][ni][e] += (float)sums[mi][ni][e];
    } else {
      run(x, w, x_row, w_row, M, m0, n0, acc, smem, split);
    }
  }

  template <class W, class XRow, class WRow, class A>
  static __device__ __forceinline__ void run(const T* __restrict__ x, const W& w, XRow x_row, WRow w_row, lj_i64 M,
                                             lj_i64 m0, lj_i64 n0, A (&acc)[MI][NI][4], T* smem, int split) {
    const int tid = threadIdx.x;
    const lj_i64 kt0 = kt_begin(split), kt1 = kt_begin(split + 1);  // this CTA's k tiles
    // Each thread copies the same chunks of every k tile: row starts and masks are computed once.
    const T* a_row[A_LOADS];
    constexpr int B_ROWS = Q::ON ? 1 : B_LOADS;  // (Q::ON: the codes' rows below)
    const T* b_row[B_ROWS];
    bool a_ok[A_LOADS], b_ok[B_ROWS];
#pragma unroll
    for (int j = 0; j < A_LOADS; ++j) {
      const int i = tid + j * THREADS;
      const lj_i64 m = m0 + i / CHUNKS;
      a_ok[j] = m < M;
      a_row[j] = a_ok[j] ? x + x_row(m) : x;
    }
    if constexpr (!Q::ON) {
#pragma unroll
      for (int j = 0; j < B_LOADS; ++j) {
        const int i = tid + j * THREADS;
        const lj_i64 n = n0 + i / CHUNKS;
        const lj_i64 r = n < N ? w_row(n) : -1;  // w_row < 0: no such row (a gap of a remapped tile)
        b_ok[j] = r >= 0;
        b_row[j] = b_ok[j] ? w + r : w;
      }
    }
    // Q::ON: the W row of each unit this thread copies and dequantizes (NW for none: zeros).
    lj_i64 q_row[Q_LOADS > 0 ? Q_LOADS : 1];
    if constexpr (Q::ON) {
#pragma unroll
      for (int j = 0; j < Q_LOADS; ++j) {
        const int i = tid + j * THREADS;
        const lj_i64 n = n0 + i / UNITS_PER_ROW;
        const lj_i64 r = i < BN * UNITS_PER_ROW && n < N ? w_row(n) : -1;
        q_row[j] = r >= 0 ? r : Q::NW;
      }
    }

    auto load = [&](int stage, lj_i64 kt) {
      T* sa = smem + stage * STAGE_ELEMS;
      T* sb = sa + BM * BK;
#pragma unroll
      for (int j = 0; j < A_LOADS; ++j) {
        const int i = tid + j * THREADS, c = i % CHUNKS;
        const lj_i64 k = kt * BK + c * CE;
        copy_chunk(sa + swz(i / CHUNKS, c), a_row[j], k, a_ok[j] ? K - k : 0);
      }
      if constexpr (Q::ON) {  // 16 bytes of codes per unit, rows of BK / 2 bytes
        unsigned char* sq = reinterpret_cast<unsigned char*>(sb);
#pragma unroll
        for (int j = 0; j < Q_LOADS; ++j) {
          const int i = tid + j * THREADS;
          if (BN * UNITS_PER_ROW % THREADS != 0 && i >= BN * UNITS_PER_ROW) break;
          const lj_i64 k = kt * BK + (i % UNITS_PER_ROW) * 32;
          const bool in = q_row[j] < Q::NW && k < K;
          lj_cp_async16(sq + i * 16, in ? w.codes(q_row[j], k) : w.q, in ? 16 : 0);
        }
      } else {
#pragma unroll
        for (int j = 0; j < B_LOADS; ++j) {
          const int i = tid + j * THREADS, c = i % CHUNKS;
          const lj_i64 k = kt * BK + c * CE;
          copy_chunk(sb + swz(i / CHUNKS, c), b_row[j], k, b_ok[j] ? K - k : 0);
        }
      }
    };
    // Q::ON: W's tile, dequantized from the codes of the stage's k tile kt.
    T* const q_tile = smem + STAGES * STAGE_ELEMS;
    auto dequantize = [&](int stage, lj_i64 kt) {
      if constexpr (Q::ON) {
        const unsigned char* sq = reinterpret_cast<const unsigned char*>(smem + stage * STAGE_ELEMS + BM * BK);
#pragma unroll
        for (int j = 0; j < Q_LOADS; ++j) {
          const int i = tid + j * THREADS, h = i % UNITS_PER_ROW;
          if (BN * UNITS_PER_ROW % THREADS != 0 && i >= BN * UNITS_PER_ROW) break;
          uint4 out[4];
          w.expand(*reinterpret_cast<const uint4*>(sq + i * 16), w.group(q_row[j], kt * BK + 32 * h), out);
#pragma unroll
          for (int c = 0; c < 4; ++c) lj_st_shared16(q_tile + swz(i / UNITS_PER_ROW, 4 * h + c), out[c]);
        }
      }
    };

    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp % WM, wn = warp / WM;
    // ldmatrix addresses, hoisted out of the k loop: warp tiles start at multiples of 16 rows and the
    // swizzle pattern repeats every 8 rows, so a row's XOR term depends on the lane alone. With c =
    // 2 * kk + half (half in {0, 1}), swz's chunk c ^ x equals (2 * kk) ^ (half ^ x): one XOR per k step.
    const int a_r = lane & 15, b_r = (lane & 7) + ((lane >> 4) << 3);
    const int a_base = (wm * WTM + a_r) * BK, b_base = (wn * WTN + b_r) * BK;
    const int a_x = (lane >> 4) ^ ((a_r / (8 / CHUNKS)) % CHUNKS);
    const int b_x = ((lane >> 3) & 1) ^ ((b_r / (8 / CHUNKS)) % CHUNKS);
    auto compute = [&](int stage) {
      const T* sa = smem + stage * STAGE_ELEMS + a_base;
      const T* sb = (Q::ON ? q_tile : smem + stage * STAGE_ELEMS + BM * BK) + b_base;
#pragma unroll
      for (int kk = 0; kk < K_STEPS; ++kk) {
        unsigned a[MI][4], b[NI][2];
        const int a_chunk = ((2 * kk) ^ a_x) * CE, b_chunk = ((2 * kk) ^ b_x) * CE;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)  // lanes 0-15: rows at k 0-7, lanes 16-31: the same rows at k 8-15
          lj_ldmatrix_x4(a[mi], sa + mi * 16 * BK + a_chunk);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {  // two n8 tiles: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi)
          unsigned r[4];
          lj_ldmatrix_x4(r, sb + nj * 16 * BK + b_chunk);
          b[2 * nj][0] = r[0];
          b[2 * nj][1] = r[1];
          b[2 * nj + 1][0] = r[2];
          b[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) lj_mma<T>::step(acc[mi][ni], a[mi], b[ni]);
      }
    };

    // Prologue: STAGES - 1 tiles in flight. One commit group per tile (empty past the end), so the
    // wait below always counts the same number of groups.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (kt0 + s < kt1) load(s, kt0 + s);
      lj_cp_async_commit();
    }
    // Ring positions as wrapped int counters: a 64-bit modulo per k tile costs more than the wrap.
    int read_stage = 0, write_stage = STAGES - 1;
    // One loop body, spelled by a macro because `#pragma unroll` cannot depend on T: i8's loop is
    // not unrolled. With few k tiles (K = 1024 is 8 of its 128-element tiles) NVVM unrolled all of it
    // and ptxas spilled (255 registers and 248 bytes of spills where the loop takes 109); the 16-bit
    // loop stays as it was measured.
#define LJ_GEMM_K_TILE(kt)                                                                              \
  lj_cp_async_wait<STAGES - 2>(); /* tile kt has landed (this thread's copies) */                      \
  __syncthreads();                /* ... everyone's, and everyone is done with tile kt - 1's buffer */ \
  if (kt + STAGES - 1 < kt1) load(write_stage, kt + STAGES - 1);                                      \
  lj_cp_async_commit();                                                                                \
  if constexpr (Q::ON) {                                                                               \
    dequantize(read_stage, kt);                                                                        \
    __syncthreads(); /* W's tile written by all before any warp reads it */                            \
  }                                                                                                    \
  compute(read_stage);                                                                                 \
  read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;                                          \
  write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
    if constexpr (lj_int_operands<T>) {
#pragma unroll 1
      for (lj_i64 kt = kt0; kt < kt1; ++kt) {
        LJ_GEMM_K_TILE(kt)
      }
    } else {
      for (lj_i64 kt = kt0; kt < kt1; ++kt) {
        LJ_GEMM_K_TILE(kt)
      }
    }
#undef LJ_GEMM_K_TILE
    lj_cp_async_wait<0>();
  }

  // Epilogue staging. Once the main loop is done the pipeline's shared memory is free: every thread
  // writes its accumulators, rounded to the product's dtype TY (what an unfused matmul would store),
  // into a [BM][STAGE_LD] tile. The 8 elements of padding per row put the 8 rows a warp writes at once
  // in different banks. The kernel then reads the tile back a row chunk of 8 columns per thread, so
  // the epilogue's loads and the stores to device memory are 16-byte accesses along rows.
  static constexpr int STAGE_LD = BN + 8;
  // A barrier among the threads of the epilogue (all of them), after they fill shared memory together.
  static __device__ __forceinline__ void epi_sync() { __syncthreads(); }
  template <class TY, class Scale = lj_no_row_scale>
  static __device__ __forceinline__ void stage(const float (&acc)[MI][NI][4], TY* tile, Scale scale = {}) {
    __syncthreads();  // every warp is done reading the pipeline buffers
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wm * WTM + mi * 16 + (lane >> 2) + h * 8;
        const float s = lj_scales_rows<Scale>::value ? scale(r) : 1.f;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int c = wn * WTN + ni * 8 + (lane & 3) * 2;
          if (lj_scales_rows<Scale>::value)
            lj_store2<TY>(tile + r * STAGE_LD + c, acc[mi][ni][2 * h] * s, acc[mi][ni][2 * h + 1] * s);
          else
            lj_store2<TY>(tile + r * STAGE_LD + c, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        }
      }
    __syncthreads();
  }
};
