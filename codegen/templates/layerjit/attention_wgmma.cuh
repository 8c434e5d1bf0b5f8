// Flash-attention prefill on Hopper (sm_90a): the K/V tiles arrive by TMA, S = Q K^T and O += P V run
// as warpgroup MMAs, the softmax stays in registers. Same contract as lj_flash_prefill (attention.cuh):
// rows are (token, query head) pairs of one KV head, causal tiles above the diagonal are never loaded,
// the online softmax (and its rounding) is lj_attn_warp's.
//
// Warp specialisation, as the GEMM (gemm_wgmma.cuh): warpgroup 0 is the producer — one thread loads
// Q once and then walks the K/V tiles through a STAGES-deep ring. K and V have their own "full" and
// "empty" barriers (an arrival per consumer warp): S can start before V lands, and the next K can
// load as soon as S has retired, while the previous P V still reads its V.
// Warpgroups 1 and 2 are consumers of 64 query rows each. Per tile: S (64 x BN fp32) = Q K^T as
// D / 16 wgmma from shared memory; mask, online softmax (the scale folded into the exponent's FFMA);
// P rounded to 16 bits straight from S's registers into A fragments; O (64 x D fp32) += P V as BN / 16
// wgmma with A from registers and V read MN-major (transposed) from the same swizzled tile TMA wrote.
// The P V of one tile runs on the tensor cores while the softmax of the next is computed.
//
// Rows. The BM = 128 rows are head-major: row r is query head kvh * G + r / TOKENS of token t0 +
// r % TOKENS, so Q arrives as G x (D / 64) boxes of TOKENS rows x 64 columns (the 128-byte swizzle
// span) stacked at row g * TOKENS; TOKENS must be a multiple of the 8-row swizzle group.
//
// Edges. TMA reads rows past the tensor as zeros; rows of the next sequence or past the valid cache
// are read but masked (scores -inf, so P = 0). P = 0 still multiplies V, and a stale cache slot may
// hold a NaN: rows at or past n_valid in a tile are zeroed in shared memory before P V, when the cache
// has such rows (n_valid < n_keys).
#pragma once
#include "layerjit/attention.cuh"
#include "layerjit/wgmma.cuh"

template <class T, int D, int BN, int STAGES, int G, bool CAUSAL>
struct lj_flash_prefill_wgmma {
  using W = lj_attn_warp<T, D>;
  using MMA = lj_wgmma_attn<T>;
  static constexpr int BM = 128, THREADS = 384, CONSUMERS = 256, TOKENS = BM / G;
  static constexpr int HALVES = D / 64;  // 128-byte column boxes per row
  static constexpr int Q_BYTES = BM * D * 2, KV_BYTES = BN * D * 2, STAGE_BYTES = 2 * KV_BYTES;
  static constexpr int NF = BN / 8, OF = D / 8;  // n8 blocks of S and of O per consumer thread
  // 1024 bytes of slack for the swizzle alignment, Q, the K/V ring, then the barriers.
  static constexpr int SMEM_BYTES = 1024 + Q_BYTES + STAGES * STAGE_BYTES + (1 + 4 * STAGES) * 8;
  static_assert(sizeof(T) == 2, "wgmma here takes 16-bit operands");
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(BN == 64 || BN == 128, "K/V tiles of 64 or 128 keys");
  static_assert(BM % G == 0 && TOKENS % 8 == 0, "whole 8-row swizzle groups of tokens per query head");
  static_assert(STAGES >= 2, "a pipeline needs two buffers");

  template <class OAt, class Lse>
  static __device__ __forceinline__ void run(const lj_tensor_map* tq, const lj_tensor_map* tk, const lj_tensor_map* tv,
                                             T* __restrict__ o, OAt o_at, Lse lse, lj_i64 n_tok, lj_i64 t0, lj_i64 q_row0, lj_i64 kv_row0,
                                             lj_i64 first_pos, lj_i64 n_valid, lj_i64 n_keys, int kvh, float scale_log2,
                                             unsigned char* smem_raw) {
    unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
    unsigned char* sq = smem;
    unsigned char* ring = smem + Q_BYTES;
    unsigned long long* q_full = reinterpret_cast<unsigned long long*>(ring + STAGES * STAGE_BYTES);
    unsigned long long* k_full = q_full + 1;
    unsigned long long* v_full = k_full + STAGES;
    unsigned long long* k_empty = v_full + STAGES;
    unsigned long long* v_empty = k_empty + STAGES;
    const int wg = threadIdx.x / 128;

    const lj_i64 t_end = t0 + TOKENS < n_tok ? t0 + TOKENS : n_tok;
    const lj_i64 last_pos = first_pos + t_end - 1;
    const lj_i64 kv_end = CAUSAL && last_pos + 1 < n_valid ? last_pos + 1 : n_valid;
    const lj_i64 n_tiles = kv_end > 0 ? (kv_end + BN - 1) / BN : 0;

    if (threadIdx.x == 0) {
      lj_mbar_init(q_full, 1);
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        lj_mbar_init(&k_full[s], 1);
        lj_mbar_init(&v_full[s], 1);
        lj_mbar_init(&k_empty[s], 8);  // one arrival per consumer warp
        lj_mbar_init(&v_empty[s], 8);
      }
      lj_mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
      lj_setmaxnreg_dec<24>();
      if (threadIdx.x == 0) {
        lj_tma_prefetch(tq);
        lj_tma_prefetch(tk);
        lj_tma_prefetch(tv);
        lj_mbar_arrive_expect_tx(q_full, Q_BYTES);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int h = 0; h < HALVES; ++h)
            lj_tma_load_2d(sq + h * BM * 128 + g * TOKENS * 128, tq, (kvh * G + g) * D + h * 64, (int)(q_row0 + t0), q_full);
        int stage = 0;
        unsigned phase = 0;
        for (lj_i64 it = 0; it < n_tiles; ++it) {
          unsigned char* sk = ring + stage * STAGE_BYTES;
          const int row = (int)(kv_row0 + it * BN);
          lj_mbar_wait(&k_empty[stage], phase ^ 1);
          lj_mbar_arrive_expect_tx(&k_full[stage], KV_BYTES);
#pragma unroll
          for (int h = 0; h < HALVES; ++h) lj_tma_load_2d(sk + h * BN * 128, tk, kvh * D + h * 64, row, &k_full[stage]);
          lj_mbar_wait(&v_empty[stage], phase ^ 1);
          lj_mbar_arrive_expect_tx(&v_full[stage], KV_BYTES);
#pragma unroll
          for (int h = 0; h < HALVES; ++h) lj_tma_load_2d(sk + KV_BYTES + h * BN * 128, tv, kvh * D + h * 64, row, &v_full[stage]);
          if (++stage == STAGES) stage = 0, phase ^= 1;
        }
      }
      return;
    }

    lj_setmaxnreg_inc<240>();
    const int cw = wg - 1, ct = threadIdx.x - 128, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int r_lo = cw * 64 + warp * 16 + (lane >> 2);  // this thread's rows: r_lo and r_lo + 8
    const lj_i64 first_row_pos = first_pos + t0;
    lj_i64 qpos[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) qpos[h] = first_row_pos + (r_lo + 8 * h) % TOKENS;
    float m[2] = {LJ_NEG_INF, LJ_NEG_INF}, l[2] = {0.f, 0.f};
    float acc[OF][4];
#pragma unroll
    for (int f = 0; f < OF; ++f) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.f;
    float(&acc_flat)[OF * 4] = reinterpret_cast<float(&)[OF * 4]>(acc);
    float s[NF][4];
    float(&s_flat)[NF * 4] = reinterpret_cast<float(&)[NF * 4]>(s);
    unsigned p[BN / 16][4];  // P of the previous tile, the A operand of its P V
    const unsigned long long dq = lj_wgmma_desc_sw128(sq + cw * 64 * 128);
    const bool stale_rows = n_valid < n_keys;  // the cache holds slots past the valid keys

    // S = Q K^T of the tile in `stage`: D / 16 wgmma, issued and committed (not waited for).
    auto issue_s = [&](int stage) {
      const unsigned long long dk = lj_wgmma_desc_sw128(ring + stage * STAGE_BYTES);
      lj_wgmma_fence();
#pragma unroll
      for (int h = 0; h < HALVES; ++h)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // +32 bytes (2 in descriptor units): 16 more of the 64 columns
          MMA::ss(s_flat, dq + h * (BM * 128 / 16) + 2 * kk, dk + h * (BN * 128 / 16) + 2 * kk, h + kk > 0);
      lj_wgmma_commit();
    };
    // O += P V of tile `it` in `stage`, issued and committed, once V has landed (and its stale rows,
    // if any, are zeros).
    auto issue_pv = [&](int stage, unsigned v_phase, lj_i64 it) {
      unsigned char* sv = ring + stage * STAGE_BYTES + KV_BYTES;
      const lj_i64 j0 = it * BN;
      lj_mbar_wait(&v_full[stage], v_phase);
      if (stale_rows && j0 + BN > n_valid) {
        // Both consumer warpgroups zero their share of the stale rows, then meet before either reads V.
        const int z0 = (int)(n_valid - j0);
        for (int i = ct; i < (BN - z0) * HALVES * 8; i += CONSUMERS) {
          const int r = z0 + i / (HALVES * 8), h = (i / 8) % HALVES, c = i % 8;
          *reinterpret_cast<uint4*>(sv + h * BN * 128 + r * 128 + c * 16) = make_uint4(0, 0, 0, 0);
        }
        lj_fence_proxy_async();
        lj_named_barrier(1, CONSUMERS);
      }
      const unsigned long long dv = lj_wgmma_desc_sw128_mn(sv, BN * 128);
      lj_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) MMA::rs(acc_flat, p[kk], dv + kk * (16 * 128 / 16));  // 16 keys: 2048 bytes
      lj_wgmma_commit();
    };
    // The online softmax of tile `it`'s raw scores, in place: masks, raises the running max m (the
    // log2-domain max rounded up to an integer, as lj_attn_warp::softmax, so the rounding is the
    // mma.sync kernel's), turns s into 2^(s * scale - m) with one FFMA per score and adds it to l.
    // Returns the factor O must be rescaled by, which waits until the previous P V has retired.
    auto softmax = [&](lj_i64 it, float (&corr)[2]) {
      const lj_i64 j0 = it * BN;
      if (j0 + BN > kv_end || (CAUSAL && j0 + BN - 1 > first_row_pos)) W::template mask<NF, CAUSAL>(s, j0, kv_end, qpos, lane);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = LJ_NEG_INF;
#pragma unroll
        for (int f = 0; f < NF; ++f) mx = fmaxf(mx, fmaxf(s[f][2 * h], s[f][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = mx == LJ_NEG_INF ? m[h] : fmaxf(m[h], ceilf(mx * scale_log2));  // scale_log2 > 0: order kept
        const float base = mx == LJ_NEG_INF ? 0.f : mx;
        corr[h] = lj_exp2(m[h] - base);
        m[h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int f = 0; f < NF; ++f) {
          s[f][2 * h] = lj_exp2(fmaf(s[f][2 * h], scale_log2, -base));
          s[f][2 * h + 1] = lj_exp2(fmaf(s[f][2 * h + 1], scale_log2, -base));
          sum += s[f][2 * h] + s[f][2 * h + 1];
        }
        l[h] = l[h] * corr[h] + sum;
      }
    };
    auto rescale_and_pack = [&](const float (&corr)[2]) {
#pragma unroll
      for (int f = 0; f < OF; ++f) {
        acc[f][0] *= corr[0], acc[f][1] *= corr[0];
        acc[f][2] *= corr[1], acc[f][3] *= corr[1];
      }
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        p[kk][0] = lj_pack_pair<T>(s[2 * kk][0], s[2 * kk][1]);
        p[kk][1] = lj_pack_pair<T>(s[2 * kk][2], s[2 * kk][3]);
        p[kk][2] = lj_pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        p[kk][3] = lj_pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
    };

    // Software pipeline: S of tile it and P V of tile it - 1 are issued together; the softmax of
    // tile it runs while P V does, and O is rescaled once P V has retired.
    lj_mbar_wait(q_full, 0);
    int stage = 0, prev = 0;
    unsigned phase = 0, prev_phase = 0;
    for (lj_i64 it = 0; it < n_tiles; ++it) {
      lj_mbar_wait(&k_full[stage], phase);
      issue_s(stage);
      if (it > 0) {
        issue_pv(prev, prev_phase, it - 1);
        lj_wgmma_wait<1>();  // S retired (groups retire in order); P V may still run
      } else {
        lj_wgmma_wait<0>();
      }
      lj_wgmma_fence_acc(s_flat);
      if (lane == 0) lj_mbar_arrive(&k_empty[stage]);  // K is free as soon as S has retired
      float corr[2];
      softmax(it, corr);
      lj_wgmma_wait<0>();
      lj_wgmma_fence_acc(acc_flat);
      if (it > 0 && lane == 0) lj_mbar_arrive(&v_empty[prev]);
      rescale_and_pack(corr);
      prev = stage, prev_phase = phase;
      if (++stage == STAGES) stage = 0, phase ^= 1;
    }
    if (n_tiles > 0) {
      issue_pv(prev, prev_phase, n_tiles - 1);
      lj_wgmma_wait<0>();
      lj_wgmma_fence_acc(acc_flat);
      if (lane == 0) lj_mbar_arrive(&v_empty[prev]);
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int r = r_lo + 8 * h;
      const lj_i64 t = t0 + r % TOKENS;
      if (t >= n_tok) continue;
      if ((lane & 3) == 0) lse(t, kvh * G + r / TOKENS, lj_row_lse(m[h], sum));
      T* row = o + o_at(t, kvh * G + r / TOKENS);
#pragma unroll
      for (int f = 0; f < OF; ++f)
        *reinterpret_cast<unsigned*>(row + f * 8 + 2 * (lane & 3)) = lj_pack_pair<T>(acc[f][2 * h] * inv, acc[f][2 * h + 1] * inv);
    }
  }
};
