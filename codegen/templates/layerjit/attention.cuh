// Flash attention on tensor cores (sm_80+: mma.sync m16n8k16 with fp32 accumulation) for attention
// groups. S = Q K^T, the scale, the masks, an online softmax (running max and sum per row, in fp32, in
// the log2 domain) and O += P V run tile by tile over the keys; the score matrix never leaves registers.
//
// Rows. A query row is a (token, query head) pair. The G = Hq / Hkv query heads that read one KV head
// are packed into consecutive rows (row r: token r / G, head kvh * G + r % G), so every K/V tile a CTA
// brings into shared memory serves all G heads: grouped-query attention reads each KV head once per
// CTA instead of G times.
//
// Positions. Query token t sits at position first_pos + t; keys [0, n_valid) may be read; causal masks
// keys after the query's own position, a sliding window (WINDOW > 0) keys WINDOW or more positions
// before it. A row that sees no key stores zeros.
//
// Log-sum-exp. Each kernel also hands every row's log(sum_j exp(scale * q.k_j)) to an `lse(t, h,
// value)` functor, once per row, where the output row is stored: the kernel's store when the graph
// asks for it (attention {lse = true}), lj_no_lse otherwise, which compiles to nothing.
//
// Warps. A warp owns m-tiles of 16 rows (the mma M): their S (16 x keys) and O (16 x D) live in its
// registers, Q fragments are read from shared memory at each k step, and P is re-packed from S's accumulators straight into A fragments (the m16n8 C layout of two
// adjacent key blocks is the m16k16 A layout). The prefill kernel gives each warp its own MT x 16 rows
// of a BM-row tile; the decode kernel has one 16-row tile and splits the keys between warps and between
// CTAs (flash-decoding), merging the partial (max, sum, O) triples at the end.
//
// Shared memory: Q [rows][D] and a ring of STAGES (K, V) tiles [keys][D] filled by cp.async; rows are
// XOR-swizzled in 16-byte chunks (chunk c of row r at c ^ (r % 8)) so the ldmatrix reads of 8 rows at
// one chunk hit 8 different bank groups.
//
// Head dims. D is the tile's head_dim (16, 32, 64 or 128: whole k steps of the mma, whole 16-byte
// chunks); DV <= D the operands' (by default D). With DV < D (a model's head_dim 12, 80 or 96) the
// rows are read in copies of DV's largest power-of-two granule up to 16 bytes, the columns past DV
// are zero-filled in shared memory (so they add nothing to Q K^T and make zero output columns), and
// only DV columns are stored.
#pragma once
#include "layerjit/mma.cuh"
#include "layerjit/vec.cuh"

// Two floats rounded to nearest-even into one register of two 16-bit values (lo in the low half).
template <class T>
__device__ __forceinline__ unsigned lj_pack_pair(float lo, float hi);
template <>
__device__ __forceinline__ unsigned lj_pack_pair<lj_bf16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <>
__device__ __forceinline__ unsigned lj_pack_pair<lj_f16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#define LJ_NEG_INF __int_as_float(0xff800000)

// The natural log-sum-exp of a row from its log2-domain running max and its sum of 2^(s - max): -inf
// for a row that saw no key.
__device__ __forceinline__ float lj_row_lse(float max_log2, float sum) {
  return sum > 0.f ? (max_log2 + log2f(sum)) * 0.693147180559945309f : LJ_NEG_INF;
}

// The lse functor of a kernel whose graph does not ask for the log-sum-exp.
struct lj_no_lse {
  __device__ __forceinline__ void operator()(long long, int, float) const {}
};

// 2^x; 2^-inf = 0, which is how masked scores drop out.
__device__ __forceinline__ float lj_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// cp.async of BYTES = 4, 8 or 16 (16: .cg, bypassing L1; the smaller sizes exist only as .ca).
template <int BYTES>
__device__ __forceinline__ void lj_cp_async(void* smem, const void* gmem, int src_bytes) {
  if constexpr (BYTES == 16) {
    lj_cp_async16(smem, gmem, src_bytes);
  } else {
    static_assert(BYTES == 8 || BYTES == 4, "cp.async copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(lj_smem_addr(smem)), "l"(gmem), "n"(BYTES), "r"(src_bytes)
                 : "memory");
  }
}

template <class T, int D, int DV = D>
struct lj_attn_warp {
  static_assert(sizeof(T) == 2, "mma.sync m16n8k16 takes 16-bit operands");
  static_assert(D == 16 || D == 32 || D == 64 || D == 128, "head_dim 16, 32, 64 or 128");
  static_assert(DV > 0 && DV <= D && DV % 2 == 0, "the operands' head_dim: even, at most the tile's");
  static constexpr int CH = D / 8;     // 16-byte chunks per row
  static constexpr int KS = D / 16;    // k steps of Q K^T
  static constexpr int OF = D / 8;     // n8 blocks of O
  // Elements per copy: the largest of 8, 4, 2 that DV is a multiple of, and granules per tile row.
  static constexpr int LG = DV % 8 == 0 ? 8 : DV % 4 == 0 ? 4 : 2;
  static constexpr int NG = D / LG;

  // The 8 rows one ldmatrix reads span 8 * D * 2 bytes: with 8 or more chunks per row, XOR the chunk
  // with the row's position among the 8; shorter rows share 128-byte lines 8 / CH at a time, so XOR
  // with the line's position instead.
  static __device__ __forceinline__ int swz(int row, int c) {
    const int x = CH >= 8 ? (row & 7) : (row / (8 / CH)) % CH;
    return row * D + ((c ^ x) << 3);
  }

  // One [rows][D] tile row by row: row r comes from src(r) (nullptr: zeros). Threads stride by nthreads.
  template <class Src>
  static __device__ __forceinline__ void load_rows(T* tile, int rows, Src src, int tid, int nthreads) {
    if constexpr (DV == D) {
      for (int i = tid; i < rows * CH; i += nthreads) {
        const int r = i / CH, c = i % CH;
        const T* p = src(r);
        lj_cp_async16(tile + swz(r, c), p ? p + c * 8 : tile, p ? 16 : 0);
      }
    } else {
      for (int i = tid; i < rows * NG; i += nthreads) {
        const int r = i / NG, e = i % NG * LG;  // the granule's first element
        const T* p = e < DV ? src(r) : nullptr;
        lj_cp_async<LG * 2>(tile + swz(r, e / 8) + e % 8, p ? p + e : tile, p ? LG * 2 : 0);
      }
    }
  }

  // The same for rows one constant stride apart (a contiguous cache): row r at row0 + r * stride,
  // rows from n_valid on zero. A thread keeps its 16-byte chunk (nthreads is a multiple of CH) and
  // steps its source by one 64-bit add, where load_rows recomputes each row's address.
  static __device__ __forceinline__ void load_rows_strided(T* tile, int rows, const T* row0, lj_i64 stride, int n_valid, int tid,
                                                           int nthreads) {
    load_rows_strided_if(tile, rows, row0, stride, n_valid, [](int) { return true; }, tid, nthreads);
  }

  // ... only the rows r for which pick(r) holds (the rest are left for another call).
  template <class Pick>
  static __device__ __forceinline__ void load_rows_strided_if(T* tile, int rows, const T* row0, lj_i64 stride, int n_valid, Pick pick,
                                                              int tid, int nthreads) {
    if constexpr (DV == D) {
      const int c = tid % CH, rstep = nthreads / CH;
      int r = tid / CH;
      const T* p = row0 + r * stride + c * 8;
      const lj_i64 step = rstep * stride;
      for (; r < rows; r += rstep, p += step)
        if (pick(r)) lj_cp_async16(tile + swz(r, c), r < n_valid ? p : tile, r < n_valid ? 16 : 0);
    } else {
      const int e = tid % NG * LG, rstep = nthreads / NG;
      int r = tid / NG;
      const T* p = row0 + r * stride + e;
      const lj_i64 step = rstep * stride;
      for (; r < rows; r += rstep, p += step) {
        const bool ok = r < n_valid && e < DV;
        if (pick(r)) lj_cp_async<LG * 2>(tile + swz(r, e / 8) + e % 8, ok ? p : tile, ok ? LG * 2 : 0);
      }
    }
  }

  // Online softmax over one block of scores s (already scaled to the log2 domain, masked = -inf):
  // raises the running max m of each of the thread's two rows, rescales l and o to it, and turns s
  // into p = 2^(s - m). l stays this thread's partial sum (its quad's four threads share a row).
  template <int NF>
  static __device__ __forceinline__ void softmax(float (&s)[NF][4], float (&m)[2], float (&l)[2], float (&o)[OF][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m[h];
#pragma unroll
      for (int f = 0; f < NF; ++f) mx = fmaxf(mx, fmaxf(s[f][2 * h], s[f][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // The running max is rounded up to an integer (log2 domain): every rescale is then an exact power
      // of two, and P = 2^(s - m) rounds to the same significand whatever max a split saw, so split-KV
      // partials merge to the unsplit result within fp32 rounding. A row with nothing visible yet stays
      // at zero.
      mx = mx == LJ_NEG_INF ? LJ_NEG_INF : ceilf(mx);
      const float base = mx == LJ_NEG_INF ? 0.f : mx;
      const float corr = lj_exp2(m[h] - base);
      m[h] = mx;
      l[h] *= corr;
#pragma unroll
      for (int f = 0; f < OF; ++f) {
        o[f][2 * h] *= corr;
        o[f][2 * h + 1] *= corr;
      }
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        s[f][2 * h] = lj_exp2(s[f][2 * h] - base);
        s[f][2 * h + 1] = lj_exp2(s[f][2 * h + 1] - base);
        l[h] += s[f][2 * h] + s[f][2 * h + 1];
      }
    }
  }

  // s[mt] = Q K^T for MT m-tiles (Q rows row0 + 16 * mt .., fragments read from the Q tile at each k
  // step) against the 8 * NF keys at rows key0.. of the K tile: each K fragment serves every m-tile.
  // ldmatrix lanes: Q rows 0-15 at k lo (lanes 0-15) and k hi (16-31); K keys 0-7 at k lo / hi (lanes
  // 0-7 / 8-15), keys 8-15 (16-31).
  template <int MT, int NF>
  static __device__ __forceinline__ void scores_mt(float (&s)[MT][NF][4], const T* sq, int row0, const T* sk, int key0, int lane) {
    static_assert(NF % 2 == 0, "keys in blocks of 16");
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int f = 0; f < NF; ++f) s[mt][f][0] = s[mt][f][1] = s[mt][f][2] = s[mt][f][3] = 0.f;
    const int krow = key0 + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      unsigned a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) lj_ldmatrix_x4(a[mt], sq + swz(row0 + mt * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
      for (int nj = 0; nj < NF / 2; ++nj) {
        unsigned r[4];
        lj_ldmatrix_x4(r, sk + swz(krow + nj * 16, 2 * kk + ((lane >> 3) & 1)));
        const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          lj_mma<T>::m16n8k16(s[mt][2 * nj], a[mt], b0);
          lj_mma<T>::m16n8k16(s[mt][2 * nj + 1], a[mt], b1);
        }
      }
    }
  }

  // o[mt] += p[mt] V for MT m-tiles: each V fragment serves every m-tile. V is [key][d] in memory, so
  // its B fragments (k = key) come from ldmatrix.trans: matrices (keys 0-7, d lo), (keys 8-15, d lo),
  // (keys 0-7, d hi), (keys 8-15, d hi).
  template <int MT, int NF>
  static __device__ __forceinline__ void pv_mt(float (&o)[MT][OF][4], const float (&p)[MT][NF][4], const T* sv, int key0, int lane) {
    const int row = key0 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
    for (int kk = 0; kk < NF / 2; ++kk) {
      unsigned a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = lj_pack_pair<T>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
        a[mt][1] = lj_pack_pair<T>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
        a[mt][2] = lj_pack_pair<T>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
        a[mt][3] = lj_pack_pair<T>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dj = 0; dj < OF / 2; ++dj) {
        unsigned r[4];
        lj_ldmatrix_x4_trans(r, sv + swz(row + kk * 16, 2 * dj + (lane >> 4)));
        const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          lj_mma<T>::m16n8k16(o[mt][2 * dj], a[mt], b0);
          lj_mma<T>::m16n8k16(o[mt][2 * dj + 1], a[mt], b1);
        }
      }
    }
  }

  // -inf for keys a row may not see: past `key_end`, (causal) after the row's position, or (a
  // sliding window of WINDOW > 0 keys) WINDOW or more positions before it.
  template <int NF, bool CAUSAL, long long WINDOW = 0>
  static __device__ __forceinline__ void mask(float (&s)[NF][4], lj_i64 key0, lj_i64 key_end, const lj_i64 (&qpos)[2], int lane) {
#pragma unroll
    for (int f = 0; f < NF; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const lj_i64 j = key0 + f * 8 + 2 * (lane & 3) + (e & 1);
        if (j >= key_end || (CAUSAL && j > qpos[e >> 1]) || (WINDOW > 0 && j <= qpos[e >> 1] - WINDOW)) s[f][e] = LJ_NEG_INF;
      }
  }
};

// Prefill: a CTA computes BM rows (BM / G tokens of the G query heads of one KV head) over every key
// they may see, K/V tiles of BN keys in a STAGES-deep cp.async ring. Each warp owns MT m-tiles of 16
// rows, so every K or V fragment it reads from shared memory feeds MT tensor-core products (shared
// memory bandwidth, not the tensor cores, bounds one m-tile per warp). Causal tiles wholly above the
// diagonal are never loaded; the mask is evaluated only on tiles that cross it or the end. With a
// sliding window (WINDOW > 0 keys) the tiles before the first row's window are never loaded either,
// and every tile is masked.
template <class T, int D, int BM, int MT, int BN, int STAGES, int G, bool CAUSAL, long long WINDOW = 0, int DV = D>
struct lj_flash_prefill {
  using W = lj_attn_warp<T, D, DV>;
  static constexpr int WARPS = BM / (16 * MT), THREADS = WARPS * 32;
  static constexpr int TOKENS = BM / G;  // tokens per CTA
  static constexpr int NF = BN / 8;
  static constexpr int SMEM_BYTES = (BM + 2 * STAGES * BN) * D * (int)sizeof(T);
  static_assert(BM % (16 * MT) == 0 && BM % G == 0, "BM: whole warps of MT x 16 rows and whole tokens");
  static_assert(BN % 16 == 0 && STAGES >= 2, "BN keys in blocks of 16, at least a double buffer");

  // Row offsets (elements) are given by the kernel: q_at(t, h), k_at(j), v_at(j), o_at(t, h) for this
  // CTA's sequence and KV head; lse(t, h, value) takes each row's log-sum-exp.
  template <class QAt, class KAt, class VAt, class OAt, class Lse>
  static __device__ __forceinline__ void run(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                             T* __restrict__ o, QAt q_at, KAt k_at, VAt v_at, OAt o_at, Lse lse, lj_i64 n_tok,
                                             lj_i64 t0, lj_i64 first_pos, lj_i64 n_valid, int kvh, float scale_log2,
                                             T* smem) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int row0 = warp * 16 * MT;  // the warp's first row
    T* sq = smem;
    T* skv = smem + BM * D;
    const lj_i64 t_end = t0 + TOKENS < n_tok ? t0 + TOKENS : n_tok;
    const lj_i64 last_pos = first_pos + t_end - 1;
    const lj_i64 kv_end = CAUSAL && last_pos + 1 < n_valid ? last_pos + 1 : n_valid;
    // Tiles [tile0, tile_end): with a window, none before the first row's first visible key.
    const lj_i64 win0 = WINDOW > 0 ? first_pos + t0 - WINDOW + 1 : 0;
    const lj_i64 tile0 = WINDOW > 0 && win0 > 0 ? win0 / BN : 0;
    const lj_i64 tile_end = kv_end > 0 ? (kv_end + BN - 1) / BN : 0;
    const lj_i64 n_tiles = WINDOW > 0 ? (tile_end > tile0 ? tile_end - tile0 : 0) : tile_end;

    W::load_rows(sq, BM, [&](int r) -> const T* {
      const lj_i64 t = t0 + r / G;
      return t < n_tok ? q + q_at(t, kvh * G + r % G) : nullptr;
    }, tid, THREADS);
    lj_cp_async_commit();
    auto load_kv = [&](int stage, lj_i64 j0) {
      T* sk = skv + stage * 2 * BN * D;
      W::load_rows(sk, BN, [&](int r) -> const T* { return j0 + r < kv_end ? k + k_at(j0 + r) : nullptr; }, tid, THREADS);
      W::load_rows(sk + BN * D, BN, [&](int r) -> const T* { return j0 + r < kv_end ? v + v_at(j0 + r) : nullptr; }, tid, THREADS);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n_tiles) load_kv(s, (WINDOW > 0 ? tile0 + s : (lj_i64)s) * BN);
      lj_cp_async_commit();
    }

    lj_i64 qpos[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) qpos[mt][h] = first_pos + t0 + (row0 + mt * 16 + (lane >> 2) + 8 * h) / G;
    const lj_i64 first_row_pos = first_pos + t0;
    float m[MT][2], l[MT][2], acc[MT][W::OF][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      m[mt][0] = m[mt][1] = LJ_NEG_INF;
      l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
      for (int f = 0; f < W::OF; ++f) acc[mt][f][0] = acc[mt][f][1] = acc[mt][f][2] = acc[mt][f][3] = 0.f;
    }

    int read_stage = 0, write_stage = STAGES - 1;
    for (lj_i64 it = 0; it < n_tiles; ++it) {
      lj_cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (it + STAGES - 1 < n_tiles) load_kv(write_stage, (WINDOW > 0 ? tile0 + it + STAGES - 1 : it + STAGES - 1) * BN);
      lj_cp_async_commit();
      const T* sk = skv + read_stage * 2 * BN * D;
      float s[MT][NF][4];
      W::template scores_mt<MT, NF>(s, sq, row0, sk, 0, lane);
      const lj_i64 j0 = (WINDOW > 0 ? tile0 + it : it) * BN;
      const bool masked = WINDOW > 0 || j0 + BN > kv_end || (CAUSAL && j0 + BN - 1 > first_row_pos);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int f = 0; f < NF; ++f)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][f][e] *= scale_log2;
        if (masked) W::template mask<NF, CAUSAL, WINDOW>(s[mt], j0, kv_end, qpos[mt], lane);
        W::template softmax<NF>(s[mt], m[mt], l[mt], acc[mt]);
      }
      W::template pv_mt<MT, NF>(acc, s, sk + BN * D, 0, lane);
      read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
    }
    lj_cp_async_wait<0>();

#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = l[mt][h];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        const int r = row0 + mt * 16 + (lane >> 2) + 8 * h;
        const lj_i64 t = t0 + r / G;
        if (t >= n_tok) continue;
        if ((lane & 3) == 0) lse(t, kvh * G + r % G, lj_row_lse(m[mt][h], sum));
        T* row = o + o_at(t, kvh * G + r % G);
#pragma unroll
        for (int f = 0; f < W::OF; ++f)
          if (DV == D || f * 8 + 2 * (lane & 3) < DV)
            *reinterpret_cast<unsigned*>(row + f * 8 + 2 * (lane & 3)) =
                lj_pack_pair<T>(acc[mt][f][2 * h] * inv, acc[mt][f][2 * h + 1] * inv);
      }
  }
};

// Decode (flash-decoding): ROWS = tokens x G <= 16 query rows of one KV head, over keys [0, kv_end)
// split into CHUNK-key pieces, one CTA each. Inside a CTA, each of WARPS warps takes BN keys of every
// stage. The warps' partial (max, sum, O) are merged through shared memory; a CTA whose sequence needs
// more than one chunk writes its merged partial to `part` (a [chunks][ROWS * (D + 2)] f32 area of
// the scratch buffer) and bumps `counter`; the CTA that finishes last merges every chunk, stores the
// output and sets the counter back to zero for the next launch. PAGED: k_at and v_at look keys up in a
// block table; otherwise they are affine in the key and stages load rows at a stride.
// WINDOW > 0: a sliding window; a chunk reads no key before the first row's window (a chunk wholly
// before it contributes an empty partial, which the merge ignores).
// run<true> (a contiguous cache that no kernel of the graph writes but at the new tokens' positions,
// FusionGroup::cache_before_wait): the kernel does not wait for the kernel before it on entry; its
// first stages' keys before first_pos go out first, then lj_pdl_begin, then q and the new rows
// (the kernel before wrote them), so the cache streams while that kernel runs.
template <class T, int D, int ROWS, int G, int BN, int WARPS, int STAGES, int CHUNK, bool CAUSAL, bool PAGED = false,
          long long WINDOW = 0, int DV = D>
struct lj_flash_decode {
  using W = lj_attn_warp<T, D, DV>;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int STAGE_KEYS = WARPS * BN;
  static constexpr int NF = BN / 8;
  // Floats per chunk partial: O [ROWS][DV] (packed), m [ROWS] and l [ROWS] from ROWS * D on.
  static constexpr int PART = ROWS * (D + 2);
  // Warp partials in shared memory: per warp, ROWS rows of O at a stride of D + 8 floats (the 8 rows
  // of one 64-bit store land on distinct banks), then m [16] and l [16].
  static constexpr int OS = D + 8;
  static constexpr int WSTRIDE = ROWS * OS + 32;
  static constexpr int MERGE_BYTES = WARPS * WSTRIDE * 4;
  static constexpr int PIPE_BYTES = (16 + 2 * STAGES * STAGE_KEYS) * D * (int)sizeof(T);
  static constexpr int SMEM_BYTES = PIPE_BYTES > MERGE_BYTES ? PIPE_BYTES : MERGE_BYTES;
  static_assert(ROWS >= 1 && ROWS <= 16 && ROWS % G == 0, "decode rows: whole tokens, one 16-row tile");
  static_assert(BN % 16 == 0 && CHUNK % STAGE_KEYS == 0 && STAGES >= 2, "chunks of whole stages");

  template <bool PREFETCH = false, class QAt, class KAt, class VAt, class OAt, class Lse>
  static __device__ __forceinline__ void run(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                             T* __restrict__ o, QAt q_at, KAt k_at, VAt v_at, OAt o_at, Lse lse, lj_i64 first_pos,
                                             lj_i64 n_valid, int kvh, lj_i64 chunk, float scale_log2, float* part,
                                             unsigned* counter, unsigned char* smem_bytes) {
    static_assert(!(PREFETCH && PAGED), "a paged cache is read after the wait (another sequence may write its pages)");
    T* smem = reinterpret_cast<T*>(smem_bytes);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    constexpr int TOKENS = ROWS / G;
    const lj_i64 last_pos = first_pos + TOKENS - 1;
    const lj_i64 kv_end = CAUSAL && last_pos + 1 < n_valid ? last_pos + 1 : n_valid;
    const lj_i64 chunks = kv_end > 0 ? (kv_end + CHUNK - 1) / CHUNK : 1;
    if (chunk >= chunks) return;  // past this sequence's keys
    const lj_i64 c1 = chunk * CHUNK + CHUNK < kv_end ? chunk * CHUNK + CHUNK : kv_end;
    const lj_i64 win0 = WINDOW > 0 ? first_pos - WINDOW + 1 : 0;  // the first row's first visible key
    const lj_i64 c0 = WINDOW > 0 && win0 > chunk * CHUNK ? win0 : chunk * CHUNK;
    const lj_i64 n_tiles = c1 > c0 ? (c1 - c0 + STAGE_KEYS - 1) / STAGE_KEYS : 0;

    T* sq = smem;
    T* skv = smem + 16 * D;
    auto load_q = [&] {
      W::load_rows(sq, 16, [&](int r) -> const T* { return r < ROWS ? q + q_at(r / G, kvh * G + r % G) : nullptr; }, tid, THREADS);
    };
    if constexpr (!PREFETCH) {
      load_q();
      lj_cp_async_commit();
    }
    static_assert(THREADS % W::NG == 0, "whole rows of copies per pass of the CTA");
    // A paged k_at reads the block table (and may trap): the strides exist only for contiguous caches.
    lj_i64 k_stride = 0, v_stride = 0;
    if constexpr (!PAGED) k_stride = k_at(1) - k_at(0), v_stride = v_at(1) - v_at(0);
    // rows: 0 all of the stage's, 1 those before first_pos (and the zeros past c1), 2 the others.
    auto load_kv = [&](int stage, lj_i64 j0, int rows) {
      T* sk = skv + stage * 2 * STAGE_KEYS * D;
      if constexpr (PAGED) {
        W::load_rows(sk, STAGE_KEYS, [&](int r) -> const T* { return j0 + r < c1 ? k + k_at(j0 + r) : nullptr; }, tid, THREADS);
        W::load_rows(sk + STAGE_KEYS * D, STAGE_KEYS, [&](int r) -> const T* { return j0 + r < c1 ? v + v_at(j0 + r) : nullptr; },
                     tid, THREADS);
      } else if (rows == 0) {
        const int n = c1 - j0 < STAGE_KEYS ? (int)(c1 - j0) : STAGE_KEYS;
        W::load_rows_strided(sk, STAGE_KEYS, k + k_at(j0), k_stride, n, tid, THREADS);
        W::load_rows_strided(sk + STAGE_KEYS * D, STAGE_KEYS, v + v_at(j0), v_stride, n, tid, THREADS);
      } else {
        const int n = c1 - j0 < STAGE_KEYS ? (int)(c1 - j0) : STAGE_KEYS;
        const int n_old = first_pos - j0 < 0 ? 0 : first_pos - j0 < n ? (int)(first_pos - j0) : n;
        auto pick = [&](int r) { return (r >= n_old && r < n) == (rows == 2); };
        W::load_rows_strided_if(sk, STAGE_KEYS, k + k_at(j0), k_stride, n, pick, tid, THREADS);
        W::load_rows_strided_if(sk + STAGE_KEYS * D, STAGE_KEYS, v + v_at(j0), v_stride, n, pick, tid, THREADS);
      }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n_tiles) load_kv(s, c0 + (lj_i64)s * STAGE_KEYS, PREFETCH ? 1 : 0);
      lj_cp_async_commit();
    }
    if constexpr (PREFETCH) {
      lj_pdl_begin();  // q and the new keys are the kernel before's writes
      load_q();
#pragma unroll
      for (int s = 0; s < STAGES - 1; ++s)
        if (s < n_tiles) load_kv(s, c0 + (lj_i64)s * STAGE_KEYS, 2);
      lj_cp_async_commit();
    }
    lj_i64 qpos[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) qpos[h] = first_pos + ((lane >> 2) + 8 * h) / G;
    float m[2] = {LJ_NEG_INF, LJ_NEG_INF}, l[2] = {0.f, 0.f}, acc[1][W::OF][4];
#pragma unroll
    for (int f = 0; f < W::OF; ++f) acc[0][f][0] = acc[0][f][1] = acc[0][f][2] = acc[0][f][3] = 0.f;

    int read_stage = 0, write_stage = STAGES - 1;
    for (lj_i64 it = 0; it < n_tiles; ++it) {
      // (With PREFETCH the first stage's rows are in two groups, the last one committed: wait for all.)
      if (PREFETCH && it == 0) lj_cp_async_wait<0>();
      else lj_cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (it + STAGES - 1 < n_tiles) load_kv(write_stage, c0 + (it + STAGES - 1) * STAGE_KEYS, 0);
      lj_cp_async_commit();
      const T* sk = skv + read_stage * 2 * STAGE_KEYS * D;
      float s[1][NF][4];
      W::template scores_mt<1, NF>(s, sq, 0, sk, warp * BN, lane);
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[0][f][e] *= scale_log2;
      W::template mask<NF, CAUSAL, WINDOW>(s[0], c0 + it * STAGE_KEYS + warp * BN, c1, qpos, lane);
      W::template softmax<NF>(s[0], m, l, acc[0]);
      W::template pv_mt<1, NF>(acc, s, sk + STAGE_KEYS * D, warp * BN, lane);
      read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
      write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
    }
    lj_cp_async_wait<0>();
    __syncthreads();  // the pipeline buffers become the merge area

    // Warp partials -> shared memory: only the ROWS rows that hold queries (the rest of the 16-row
    // tile is padding).
    float* mo = reinterpret_cast<float*>(smem_bytes);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int r = (lane >> 2) + 8 * h;
      if (8 * h >= ROWS || r >= ROWS) continue;
      float* wo = mo + warp * WSTRIDE;
#pragma unroll
      for (int f = 0; f < W::OF; ++f)
        *reinterpret_cast<float2*>(wo + r * OS + f * 8 + 2 * (lane & 3)) = make_float2(acc[0][f][2 * h], acc[0][f][2 * h + 1]);
      if ((lane & 3) == 0) {
        wo[ROWS * OS + r] = m[h];
        wo[ROWS * OS + 16 + r] = sum;
      }
    }
    __syncthreads();
    // Merge the warps: element (r, d) per thread step; also each row's merged max and sum.
    auto merged = [&](int r, int d, float& mx, float& sum) {
      mx = LJ_NEG_INF;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, mo[w * WSTRIDE + ROWS * OS + r]);
      const float base = mx == LJ_NEG_INF ? 0.f : mx;
      float val = 0.f;
      sum = 0.f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        const float* wo = mo + w * WSTRIDE;
        const float c = lj_exp2(wo[ROWS * OS + r] - base);
        sum += wo[ROWS * OS + 16 + r] * c;
        val += wo[r * OS + d] * c;
      }
      return val;
    };
    if (chunks == 1) {
      for (int i = tid; i < ROWS * DV; i += THREADS) {
        const int r = i / DV, d = i % DV;
        float mx, sum;
        const float val = merged(r, d, mx, sum);
        o[o_at(r / G, kvh * G + r % G) + d] = lj_from_float<T>(sum > 0.f ? val / sum : 0.f);
        if (d == 0) lse(r / G, kvh * G + r % G, lj_row_lse(mx, sum));
      }
      return;
    }
    float* mine = part + chunk * PART;
    for (int i = tid; i < ROWS * DV; i += THREADS) {
      const int r = i / DV, d = i % DV;
      float mx, sum;
      __stcg(mine + i, merged(r, d, mx, sum));
      if (d == 0) {
        __stcg(mine + ROWS * D + r, mx);
        __stcg(mine + ROWS * D + ROWS + r, sum);
      }
    }
    // Publish, count, and let the last CTA of this (sequence, KV head) merge the chunks.
    if (!lj_arrive_last(counter, (unsigned)chunks, tid, 0, THREADS)) return;
    // Merge the chunks CG at a time. The merge is the serial tail of the kernel (at B = 1, C = 4096
    // it took 3 us of a 10 us kernel), so it is built for latency: per group, every thread issues the
    // L2 loads of its elements' O values (constant offsets from one pointer) and threads < 2 x CG x
    // ROWS one chunk maximum or sum each, all before any is used (one round trip); the maxima and
    // sums go through shared memory (one barrier), and each thread weighs the chunks of its own rows
    // by 2^(m_c - max) (exact powers of two) into its running max, sum and O.
    constexpr int E = (ROWS * DV + THREADS - 1) / THREADS;  // elements per thread
    constexpr int CG_REGS = 32 / E > 4 ? 32 / E : 4;       // at most 32 O values in flight
    constexpr int CG = CG_REGS < THREADS / (2 * ROWS) ? CG_REGS : THREADS / (2 * ROWS);  // chunks per group
    static_assert(2 * CG * ROWS <= THREADS, "one chunk maximum or sum per thread and group");
    float* gm = reinterpret_cast<float*>(smem_bytes);     // [CG][ROWS] chunk maxima, then [CG][ROWS] sums
    float run_m[E], run_l[E], run_o[E];
#pragma unroll
    for (int e = 0; e < E; ++e) run_m[e] = LJ_NEG_INF, run_l[e] = 0.f, run_o[e] = 0.f;
    for (lj_i64 g0 = 0; g0 < chunks; g0 += CG) {
      const int n = chunks - g0 < CG ? (int)(chunks - g0) : CG;
      const float* pg = part + g0 * PART;
      float cv[E][CG];
#pragma unroll
      for (int e = 0; e < E; ++e)
#pragma unroll
        for (int c = 0; c < CG; ++c)
          cv[e][c] = c < n && tid + e * THREADS < ROWS * DV ? __ldcg(pg + c * PART + e * THREADS + tid) : 0.f;
      float ml = 0.f;  // this thread's chunk maximum (c, r) or sum (CG + c, r)
      const int mc = tid / ROWS, mr = tid % ROWS;
      if (tid < 2 * CG * ROWS) {
        const int c = mc < CG ? mc : mc - CG;
        ml = c < n ? __ldcg(pg + c * PART + ROWS * D + (mc < CG ? 0 : ROWS) + mr) : (mc < CG ? LJ_NEG_INF : 0.f);
      }
      __syncthreads();  // the previous group's maxima and sums are read
      if (tid < 2 * CG * ROWS) gm[tid] = ml;
      __syncthreads();
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int r = (tid + e * THREADS) / DV < ROWS ? (tid + e * THREADS) / DV : ROWS - 1;
        float mx = run_m[e];
#pragma unroll
        for (int c = 0; c < CG; ++c) mx = fmaxf(mx, gm[c * ROWS + r]);
        const float base = mx == LJ_NEG_INF ? 0.f : mx;
        const float corr = lj_exp2(run_m[e] - base);
        float sum = run_l[e] * corr, val = run_o[e] * corr;
#pragma unroll
        for (int c = 0; c < CG; ++c) {
          const float w = lj_exp2(gm[c * ROWS + r] - base);
          sum += gm[(CG + c) * ROWS + r] * w;
          val += cv[e][c] * w;
        }
        run_m[e] = mx, run_l[e] = sum, run_o[e] = val;
      }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = tid + e * THREADS;
      if (i < ROWS * DV) {
        const int r = i / DV, d = i % DV;
        o[o_at(r / G, kvh * G + r % G) + d] = lj_from_float<T>(run_l[e] > 0.f ? run_o[e] / run_l[e] : 0.f);
        if (d == 0) lse(r / G, kvh * G + r % G, lj_row_lse(run_m[e], run_l[e]));
      }
    }
    if (tid == 0) *counter = 0u;
  }
};
