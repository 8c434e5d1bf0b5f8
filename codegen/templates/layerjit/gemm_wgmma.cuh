// The Hopper (sm_90a) GEMM main loop of matmul groups: y[m, n] = sum_k x[m, k] * w[n, k], both
// operands K-contiguous, read through 2-D tensor maps (TMA) and multiplied by warpgroup MMAs.
//
// Warp specialisation: a CTA of three warpgroups computes a 128 x BN tile. Warpgroup 0 is the producer:
// one thread walks the k tiles, waits for a free slot of the STAGES-deep shared-memory ring ("empty"
// barrier), announces the slot's bytes on its "full" barrier and issues the TMA loads (x: 128 rows, w:
// two boxes of BN / 2 rows). Warpgroups 1 and 2 are the consumers, 64 rows each: they wait on "full",
// issue 4 wgmma m64nBN per k tile of 128 bytes (k16 steps of bf16/f16, k32 steps of fp8 or i8) straight
// from the swizzled shared memory, keep one group of MMAs in flight and release the previous slot
// once its MMAs have retired (one arrival per consumer warp). setmaxnreg moves registers from the
// producer (40) to the consumers (232), whose BN / 2 fp32 accumulators per thread stay in registers
// for the whole K loop. BN is 128 or 256 for large M; 64 or 96 give few rows (M = 128) more column
// tiles, so that fewer CTAs split K.
//
// Edges cost nothing here: TMA fills rows past M or N and k past K with zeros, so the last tiles need
// no masks (the epilogue never stores outside the output).
//
// PERSISTENT: one CTA per SM walks the tiles (blockIdx.x, + gridDim.x, ...; the emitted kernel gives
// the producer and the consumers a loop each, see producer_registers()): the producer runs on into
// the next tile's k tiles while the consumers run the epilogue, which stages into an area of its own
// after the ring instead of reusing it.
//
// PINGPONG (persistent too): each consumer warpgroup owns whole tiles of 128 x BN, two m64 halves
// each, and the two take the CTA's tiles in turn: while one runs its epilogue the other's MMAs keep
// the tensor cores busy, so the epilogue no longer stalls them. The ring's slots go to whichever
// warpgroup's tile they hold; a warpgroup steps its ring position over the other's tiles without
// waiting. Named barriers order the main loops (warpgroup 1's tile j + 1 starts once warpgroup 0 has
// waited on every slot of tile j, and so on), which also keeps every mbarrier wait within one phase
// of the barrier (parity waits cannot tell phase p from p + 2).
//
// SPLIT > 1 (split-K, one tile per CTA): SPLIT CTAs share an output tile, each multiplying its own
// range of k tiles (kt_begin). Each stores its fp32 accumulators in scratch, the last to finish (a
// counter per tile) adds all SPLIT partials in split order — the same order whichever CTA is last, so
// results are reproducible — and runs the epilogue; it sets the counter back to zero for the next
// launch.
//
// STREAM_K (persistent too): the CTAs take equal shares of all tiles' k tiles instead of whole tiles
// (stream_fixup), so that a few tiles still keep every SM busy.
//
// CLUSTER = 2 (128-row tiles, one per CTA or persistent; not split-K, stream-K or 4-bit codes): the
// CTAs run as clusters of two, the pair taking row tiles m0 and m0 + 128 of one column tile in step
// (tiles() counts pairs, tile_at() gives this CTA's half; past M a CTA still loads and multiplies,
// TMA filling zeros, and stores nothing).
// The W tile is common to both: each CTA's producer loads one of its two boxes with a TMA multicast
// into both CTAs' slot, so each reads half of W from L2 (cuBLASLt's int8 and fp8 kernels run such
// clusters; at the s8 rate a 128 x 128 tile wants 64 bytes per SM and cycle: docs/perf.md). A slot
// is refilled only when the consumers of both CTAs have released it: each consumer warp arrives on
// the slot's empty barrier in both CTAs. The mbarriers are initialised before a cluster barrier (the
// peer's copies and arrivals may come at once), and the producer waits for the last releases of
// every slot before it leaves (producer_tail), so that no arrival reaches a CTA that has exited.
//
// BM_ = 64 (one tile per CTA, neither persistent nor ping-pong nor stream-K): one consumer warpgroup
// and 64-row tiles, so that few rows (M = 128) make twice the row tiles: more CTAs without a split.
// It keeps its registers as launched instead of moving them with setmaxnreg: where two rings fit an
// SM's shared memory the emitter asks for two CTAs per SM (__launch_bounds__(256, 2): at most 128
// registers per thread).
//
// BM_ = 256 (one tile per CTA, not split; BN <= 128): each consumer warpgroup multiplies 128 rows as
// two m64 halves, as a ping-pong warpgroup does, but both at once on one tile. The MMAs per k tile
// are those of a 128 x 256 tile; what halves is W's tile per MAC: with 4-bit codes the dequantizing
// warps fill a 128-row W tile per k tile for 256 rows of x instead of a 256-row one for 128.
//
// SwiGLU (GLU = true): the two w boxes are the gate rows [c0, c0 + BN/2) and the up rows [N_OUT + c0,
// ...) of the same output columns; stage() interleaves them back into the 8-gate/8-up column order
// the matmul epilogue reads (see lj_gemm and emit_gemm.cpp).
//
// Q::ON (W from 4-bit codes, gemm_q4.cuh): the producer thread loads x and the codes of W's two boxes
// (32 bytes of each row per k tile) into the slot; warps 1-3 of the producer warpgroup wait for them
// ("full"), dequantize them into the slot's W tile in the layout TMA gives a bf16 or f16 tile (rows
// of 128 bytes, 16-byte chunks swizzled), order those writes before the async proxy's reads, and
// arrive on the slot's "ready" barrier, on which the consumers wait before their MMAs.
//
// WREG (with Q::ON, BM = 256, BN = 128, one tile per CTA): W in registers instead. The product is
// transposed, y^T = W x^T: consumer warpgroup g multiplies the tile's W rows 64 g .. 64 g + 63 (box
// b_lo, or b_hi: the gate or the up rows with SwiGLU) by all BM x rows, one wgmma m64n256k16 per
// k16 step with A from registers (each thread dequantizes its own m16k16 fragments from the slot's
// codes) and B = the x tile as TMA loads it. No W tile, no dequantizing warps, no ready barriers;
// the tile's group constants are staged (Q::STAGED) by the consumers. stage() writes the
// accumulators transposed, so the staged tile, and the epilogue, are as in the other modes.
#pragma once
#include "layerjit/gemm.cuh"
#include "layerjit/split_k.cuh"
#include "layerjit/wgmma.cuh"

// Q's tile of group constants in shared memory (gemm_q4.cuh): W rows staged (0: none) and bytes.
template <class Q, bool = Q::ON>
struct lj_q4_tile {
  static constexpr int STAGED = 0, BYTES = 0;
};
template <class Q>
struct lj_q4_tile<Q, true> {
  static constexpr int STAGED = Q::STAGED, BYTES = Q::TILE_BYTES;
};

template <class T, lj_i64 N, lj_i64 K, int BN, int STAGES, int GROUP_M, bool GLU, bool PERSISTENT = false, bool PINGPONG = false,
          int SPLIT_K = 1, bool STREAM_K = false, int BM_ = 128, class Q = lj_no_q4, int CLUSTER_ = 1, bool WREG_ = false>
struct lj_wgmma_gemm {
  static constexpr bool WREG = WREG_;  // W dequantized into registers, the product transposed (above)
  static constexpr int CLUSTER = CLUSTER_;  // CTAs per cluster: 2 share the W tile by multicast
  static constexpr int SPLIT = SPLIT_K;  // CTAs per output tile (split-K)
  // BK: one 128-byte swizzle row of k, 64 16-bit or 128 8-bit elements; every size below is in bytes
  // and the same for both.
  static constexpr int BM = BM_, BK = 128 / (int)sizeof(T);
  static constexpr int CONSUMER_THREADS = BM == 64 ? 128 : 256;  // one or two consumer warpgroups
  static constexpr int THREADS = 128 + CONSUMER_THREADS;
  static constexpr int EPI_THREADS = PINGPONG ? 128 : CONSUMER_THREADS;  // the threads that stage and store one tile
  // m64 halves of the tile per consumer warpgroup (WREG: its 64 W rows, one m64 block).
  static constexpr int MI = !WREG && (PINGPONG || BM_ == 256) ? 2 : 1;
  // Q::ON: after W's tile, its codes (32 bytes per row; a multiple of 1024 bytes for every BN).
  static constexpr int A_BYTES = BM * 128, B_BYTES = WREG ? 0 : BN * 128, CODE_BYTES = Q::ON ? BN * 32 : 0;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + CODE_BYTES;
  static constexpr int TRANSFORM_THREADS = 96;  // Q::ON: warps 1-3 of the producer warpgroup
  // fp32 accumulators per thread and m64 half (64 x BN over 128 threads; WREG: 64 W rows x BM)
  static constexpr int ACC = WREG ? BM / 2 : BN / 2;
  static constexpr lj_i64 TILES_N = (N + BN - 1) / BN;
  static constexpr lj_i64 K_TILES = (K + BK - 1) / BK;
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  // Ring buffers (1024-byte aligned for the 128-byte swizzle), then the full, empty (and with Q::ON
  // ready) barriers (128 bytes), then, when persistent, the epilogue tile (the ring is refilled during
  // the epilogue).
  // Q_STAGED (one tile per CTA): the tile's scales and zero points after the barriers' 128 bytes.
  static constexpr int BARRIERS = Q::ON && !WREG ? 3 : 2, Q_STAGED = lj_q4_tile<Q>::STAGED;
  static constexpr int SMEM_BYTES = 1024 + RING_BYTES + (PERSISTENT ? 128 : Q_STAGED ? 128 + lj_q4_tile<Q>::BYTES : BARRIERS * STAGES * 8);
  static constexpr int STAGE_LD = BN + 8;  // staged epilogue tile row, as lj_gemm's

  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "wgmma here takes 16-bit, fp8 or i8 operands");
  static_assert(BN == 64 || BN == 96 || BN == 128 || BN == 256, "consumer tiles are m64n64, m64n96, m64n128 or m64n256");
  static_assert(STAGES >= 2 && BARRIERS * STAGES * 8 <= 128, "a pipeline needs two buffers; barriers fit 128 bytes");
  static_assert(!Q::ON || sizeof(T) == 2, "W from 4-bit codes is dequantized to bf16 or f16");
  static_assert(PERSISTENT || BM * STAGE_LD * 2 <= RING_BYTES, "the staged tile reuses the ring");
  static_assert(!PINGPONG || PERSISTENT, "ping-pong consumers take turns over a persistent CTA's tiles");
  static_assert(SPLIT >= 1 && SPLIT <= K_TILES && !(SPLIT > 1 && PERSISTENT), "split-K: one tile per CTA, a k tile each at least");
  static_assert(!STREAM_K || (PERSISTENT && !PINGPONG), "stream-K: a persistent grid, both consumer warpgroups on each share");
  static_assert(BM == 128 || (BM == 64 && !PERSISTENT) || (BM == 256 && !PERSISTENT && SPLIT == 1 && BN <= 128),
                "tiles of 128 rows, or of 64 (one consumer warpgroup) or 256 (BN <= 128, not split) one per CTA");
  static_assert(Q_STAGED == 0 || (Q_STAGED == BN && !PERSISTENT), "a tile's W rows' constants staged, one tile per CTA");
  static_assert(!WREG || (Q::ON && Q_STAGED == BN && BM == 256 && BN == 128 && SPLIT == 1 && sizeof(T) == 2),
                "W in registers: 4-bit codes, 256 x 128 tiles one per CTA, the tile's constants staged");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && SPLIT == 1 && !STREAM_K && !Q::ON && BM == 128),
                "clusters of two: whole 128-row tiles, W loaded by TMA");
  // Split-K: floats of one CTA's partial (the consumer threads' accumulators, thread-minor).
  static constexpr int PART_FLOATS = CONSUMER_THREADS * MI * ACC;

  // Roles after begin(): the producer thread (thread 0), the idle rest of the producer warpgroup
  // (with Q::ON: the rest of warp 0; warps 1-3 dequantize), the consumer threads.
  enum Role { PRODUCER, IDLE, CONSUMER, TRANSFORM };
  // A position in the ring; the producer's and each consumer's advance in step, tile after tile.
  struct Pipe {
    int stage = 0;
    unsigned phase = 0;
    __device__ __forceinline__ void advance() {
      if (++stage == STAGES) stage = 0, phase ^= 1;
    }
    // Steps over one tile of the other consumer warpgroup (PINGPONG), without waiting on its slots.
    __device__ __forceinline__ void skip_tile() {
      const lj_i64 to = stage + K_TILES;
      stage = (int)(to % STAGES);
      phase ^= (unsigned)((to / STAGES) & 1);
    }
  };

  static __device__ __forceinline__ int consumer_wg() { return threadIdx.x / 128 - 1; }  // 0 (or 1 with BM >= 128)
  // This thread's index among the EPI_THREADS that stage and store its tile (consumers only).
  static __device__ __forceinline__ int epi_thread() { return PINGPONG ? threadIdx.x & 127 : threadIdx.x - 128; }
  // PINGPONG: whether the CTA's j-th tile is this consumer warpgroup's.
  static __device__ __forceinline__ bool mine(int j) { return !PINGPONG || (j & 1) == consumer_wg(); }

  static __device__ __forceinline__ unsigned char* aligned(unsigned char* smem_raw) {
    return reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  }
  static __device__ __forceinline__ unsigned long long* full_bars(unsigned char* smem_raw) {
    return reinterpret_cast<unsigned long long*>(aligned(smem_raw) + RING_BYTES);
  }
  // Q_STAGED: the tile's group constants (gemm_q4.cuh).
  static __device__ __forceinline__ unsigned char* tile_constants(unsigned char* smem_raw) { return aligned(smem_raw) + RING_BYTES + 128; }
  // Where the epilogue stages the tile: the start of shared memory once the ring is idle, or, in a
  // persistent kernel, the area after the barriers (with PINGPONG the two warpgroups' epilogues take
  // turns on it: stage() and epilogue_done()).
  template <class TY>
  static __device__ __forceinline__ TY* staging(unsigned char* smem_raw) {
    return reinterpret_cast<TY*>(PERSISTENT ? aligned(smem_raw) + RING_BYTES + 128 : smem_raw);
  }

  // Tiles, or with CLUSTER = 2 pairs of row tiles (this CTA's tile of pair t: rows m0 + 128 rank).
  static __device__ __forceinline__ lj_i64 tiles(lj_i64 M) { return (M + CLUSTER * BM - 1) / (CLUSTER * BM) * TILES_N; }
  static __device__ __forceinline__ void tile_at(lj_i64 t, lj_i64 M, lj_i64& m0, lj_i64& n0) {
    lj_grouped_tile_at<CLUSTER * BM, BN, GROUP_M, TILES_N>(t, M, m0, n0);
    if constexpr (CLUSTER > 1) m0 += (lj_i64)lj_cluster_rank() * BM;
  }
  static __device__ __forceinline__ void tile(lj_i64 M, lj_i64& m0, lj_i64& n0) { tile_at(blockIdx.x / CLUSTER, M, m0, n0); }

  // Once per CTA: the barriers. Returns this thread's role; the caller then branches on it for good,
  // the producer warpgroup into producer_registers() and its own code up to its exit, the consumers
  // into consumer_registers() and theirs.
  static __device__ __forceinline__ Role begin(unsigned char* smem_raw) {
    unsigned long long* full = full_bars(smem_raw);
    unsigned long long* empty = full + STAGES;
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        lj_mbar_init(&full[s], 1);   // the producer's arrive.expect_tx (plus the bytes)
        // One arrival per warp of the slot's consumer(s), in every CTA of the cluster.
        lj_mbar_init(&empty[s], CLUSTER * (PINGPONG ? 4 : CONSUMER_THREADS / 32));
        if constexpr (Q::ON && !WREG) lj_mbar_init(&empty[STAGES + s], TRANSFORM_THREADS / 32);  // ready: one per dequantizing warp
      }
      lj_mbar_init_fence();
    }
    if constexpr (CLUSTER > 1)
      lj_cluster_sync();  // (and the CTA's threads): the peer's copies and arrivals may follow at once
    else
      __syncthreads();
    if (threadIdx.x < 128) return threadIdx.x == 0 ? PRODUCER : Q::ON && !WREG && threadIdx.x >= 32 ? TRANSFORM : IDLE;
    return CONSUMER;
  }

  // The register budgets (not with BM = 64): setmaxnreg moves registers from the producer
  // warpgroup, 40 a thread, to the consumers, 232, by every warp of the warpgroup; with 4-bit codes
  // warps 1-3 of the producer warpgroup dequantize, which takes 120 (at Llama sizes 72 spilled 20-148
  // bytes, 104 still 32) and leaves the consumers 192, enough for a 64 x 256 accumulator: each split
  // keeps the 384 x 168 registers of the launch (40 + 2 x 232 = 120 + 2 x 192 = 504 = 3 x 168).
  // ptxas honours them only where no code after the producer's decrease can reach the consumers'
  // (C7507: "'setmaxnreg' ignored to maintain minimum register requirements", every thread then
  // capped at the 168 of a 384-thread CTA): so the two never join after begin(), each role's
  // branch runs to its own exit.
  static constexpr int PRODUCER_REGS = Q::ON && !WREG ? 120 : 40, CONSUMER_REGS = Q::ON && !WREG ? 192 : 232;
  static __device__ __forceinline__ void producer_registers() {
    if constexpr (BM >= 128) lj_setmaxnreg_dec<PRODUCER_REGS>();
  }
  static __device__ __forceinline__ void consumer_registers() {
    if constexpr (BM >= 128) lj_setmaxnreg_inc<CONSUMER_REGS>();
  }

  // The producer thread: one tile's k tiles into the ring (x: BM rows; w: two boxes of BN / 2 rows
  // from b_lo and b_hi), each slot once its consumers have released it.
  static __device__ __forceinline__ void produce(const lj_tensor_map* tx, const lj_tensor_map* tw, lj_i64 m0, lj_i64 b_lo,
                                                 lj_i64 b_hi, Pipe& pipe, unsigned char* smem_raw, int kt0 = 0, int kt1 = (int)K_TILES) {
    unsigned char* smem = aligned(smem_raw);
    unsigned long long* full = full_bars(smem_raw);
    unsigned long long* empty = full + STAGES;
    for (int kt = kt0; kt < kt1; ++kt) {
      lj_mbar_wait(&empty[pipe.stage], pipe.phase ^ 1);
      // (Q::ON: x's bytes and the codes', the W tile being the dequantizing warps' to fill.)
      lj_mbar_arrive_expect_tx(&full[pipe.stage], Q::ON ? A_BYTES + CODE_BYTES : STAGE_BYTES);
      unsigned char* sa = smem + pipe.stage * STAGE_BYTES;
      const int k = (int)(kt * BK);
      lj_tma_load_2d(sa, tx, k, (int)m0, &full[pipe.stage]);
      if constexpr (Q::ON) {  // the codes of W's rows (tw: a map over the codes' bytes)
        lj_tma_load_2d(sa + A_BYTES + B_BYTES, tw, k / 2, (int)b_lo, &full[pipe.stage]);
        lj_tma_load_2d(sa + A_BYTES + B_BYTES + CODE_BYTES / 2, tw, k / 2, (int)b_hi, &full[pipe.stage]);
      } else if constexpr (CLUSTER > 1) {  // this CTA's box of W into the slot of both (the peer sends the other)
        const unsigned r = lj_cluster_rank();
        lj_tma_load_2d_multicast(sa + A_BYTES + r * (B_BYTES / 2), tw, k, (int)(r ? b_hi : b_lo), &full[pipe.stage], 0x3);
      } else {
        lj_tma_load_2d(sa + A_BYTES, tw, k, (int)b_lo, &full[pipe.stage]);
        lj_tma_load_2d(sa + A_BYTES + B_BYTES / 2, tw, k, (int)b_hi, &full[pipe.stage]);
      }
      pipe.advance();
    }
  }

  // CLUSTER > 1, the producer thread after its last tile: waits until every slot's last fill has
  // been released by the consumers of both CTAs, so that no arrival from the peer is still to come
  // when this CTA exits.
  static __device__ __forceinline__ void producer_tail(Pipe& pipe, unsigned char* smem_raw) {
    unsigned long long* empty = full_bars(smem_raw) + STAGES;
#pragma unroll 1
    for (int s = 0; s < STAGES; ++s) {
      lj_mbar_wait(&empty[pipe.stage], pipe.phase ^ 1);
      pipe.advance();
    }
  }

  // A consumer warp's release of a slot: its arrival on the slot's empty barrier in every CTA of
  // the cluster (the slot's W tile came to both).
  static __device__ __forceinline__ void release(unsigned long long* bar) {
    if constexpr (CLUSTER > 1) {
#pragma unroll
      for (unsigned r = 0; r < CLUSTER; ++r) lj_mbar_arrive_cluster(bar, r);
    } else {
      lj_mbar_arrive(bar);
    }
  }

  // Q::ON, warps 1-3 of the producer warpgroup: one tile's k tiles of W dequantized from the codes in
  // each slot into its W tile, in the producer's order. A unit is 32 elements of a row (16 bytes of
  // codes, four 16-byte chunks of W); units are dealt round-robin, a row's two per k tile to
  // neighbouring threads (conflict-free: a quarter warp reads 128 contiguous bytes of codes and
  // writes 8 distinct swizzled chunk positions).
  static __device__ __forceinline__ void transform(const Q& q, lj_i64 b_lo, lj_i64 b_hi, Pipe& pipe, unsigned char* smem_raw,
                                                   int kt0 = 0, int kt1 = (int)K_TILES) {
    if constexpr (Q::ON && !WREG) {
      unsigned char* smem = aligned(smem_raw);
      unsigned long long* full = full_bars(smem_raw);
      unsigned long long* ready = full + 2 * STAGES;
      const int tt = threadIdx.x - 32;
      constexpr int UNITS = 2 * BN, PER_THREAD = (UNITS + TRANSFORM_THREADS - 1) / TRANSFORM_THREADS;
      // Unit u = tt + 96 j of a k tile is tile row i = u / 2, elements 32 h .. 32 h + 31 with h = u % 2:
      // the same rows every k tile, and one h (96 is even), so one group index, for all of a thread's.
      const int h = tt & 1;
      auto tile_row = [&](int j) { return (tt >> 1) + j * (TRANSFORM_THREADS / 2); };
      auto present = [&](int j) { return UNITS % TRANSFORM_THREADS == 0 || tt + j * TRANSFORM_THREADS < UNITS; };
      typename Q::Row rows[PER_THREAD];
#pragma unroll
      for (int j = 0; j < PER_THREAD; ++j) {
        const int i = tile_row(j);
        rows[j] = q.row(i < BN / 2 ? b_lo + i : b_hi + (i - BN / 2));
      }
      // The scales and zero points a k tile ahead: from L2 (gemm_q4.cuh), or with Q::STAGED from the
      // tile's copy in shared memory, made once by these threads (named barrier 2) while the first
      // codes are on their way.
      unsigned char* consts = tile_constants(smem_raw);
      if constexpr (Q_STAGED > 0) {
        q.stage_tile(consts, b_lo, b_hi, tt, TRANSFORM_THREADS);
        lj_cp_async_wait<0>();
        lj_named_barrier(2, TRANSFORM_THREADS);
      }
      typename Q::Group next[PER_THREAD];
      auto fetch = [&](int kt) {
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j)
          if (present(j)) {
            const lj_i64 k = (lj_i64)kt * BK + 32 * h;
            if constexpr (Q_STAGED > 0) next[j] = q.group_staged(consts, tile_row(j), rows[j].live, k);
            else next[j] = q.group(rows[j], k);
          }
      };
      fetch(kt0);
      for (int kt = kt0; kt < kt1; ++kt) {
        typename Q::Group cur[PER_THREAD];
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) cur[j] = next[j];
        if (kt + 1 < kt1) fetch(kt + 1);
        lj_mbar_wait(&full[pipe.stage], pipe.phase);
        unsigned char* sb = smem + pipe.stage * STAGE_BYTES + A_BYTES;
        const unsigned char* sq = sb + B_BYTES;
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) {
          if (!present(j)) break;
          const int i = tile_row(j);
          uint4 out[4];
          q.expand(*reinterpret_cast<const uint4*>(sq + i * 32 + h * 16), cur[j], out);
#pragma unroll
          for (int c = 0; c < 4; ++c) lj_st_shared16(sb + i * 128 + (((4 * h + c) ^ (i & 7)) << 4), out[c]);
        }
        lj_fence_proxy_async();  // these writes before the consumers' wgmma reads (async proxy)
        __syncwarp();
        if ((threadIdx.x & 31) == 0) lj_mbar_arrive(&ready[pipe.stage]);
        pipe.advance();
      }
    }
  }

  // A consumer warpgroup: acc = its rows of the tile (64, or with PINGPONG all 128 as two m64
  // halves), 4 wgmma m64nBN per k tile and half straight from the swizzled ring, one group of MMAs
  // in flight, each slot released (one arrival per warp) once its MMAs have retired — the last one
  // too, so a persistent producer can refill it. PINGPONG: the CTA's j-th tile waits for the other
  // warpgroup's main loop of tile j - 1 (named barrier 3 + j % 2) and, when a tile j + 1 follows,
  // lets it start once this one has waited on all of its slots.
  // i8: the MMAs add exact s32 sums, converted to acc's floats once at the end.
  static __device__ __forceinline__ void consume(float (&acc)[MI][ACC], Pipe& pipe, unsigned char* smem_raw, int j = 0,
                                                 bool more = false, int kt0 = 0, int kt1 = (int)K_TILES) {
    if constexpr (lj_int_operands<T>) {
      int sums[MI][ACC];
      consume_into(sums, pipe, smem_raw, j, more, kt0, kt1);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[mi][i] = (float)sums[mi][i];
    } else {
      consume_into(acc, pipe, smem_raw, j, more, kt0, kt1);
    }
  }
  template <class A>
  static __device__ __forceinline__ void consume_into(A (&acc)[MI][ACC], Pipe& pipe, unsigned char* smem_raw, int j, bool more, int kt0,
                                                      int kt1) {
    const unsigned char* smem = aligned(smem_raw);
    unsigned long long* full = full_bars(smem_raw);
    unsigned long long* empty = full + STAGES;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int i = 0; i < ACC; ++i) acc[mi][i] = 0;
      lj_wgmma_fence_acc(acc[mi]);
    }
    if (PINGPONG && j > 0) lj_named_barrier(3 + (j & 1), 256);
    // The rows of 128 bytes this warpgroup multiplies: its 64 of the shared tile, or both halves.
    const int a_off = PINGPONG ? 0 : consumer_wg() * MI * 64 * 128;
    const bool signals = (threadIdx.x & 31) == 0;
    int prev = 0;
    for (int kt = kt0; kt < kt1; ++kt) {
      lj_mbar_wait(&full[pipe.stage], pipe.phase);
      if constexpr (Q::ON) lj_mbar_wait(&full[2 * STAGES + pipe.stage], pipe.phase);  // ... and W dequantized
      const unsigned char* sa = smem + pipe.stage * STAGE_BYTES;
      const unsigned long long db = lj_wgmma_desc_sw128(sa + A_BYTES);
      lj_wgmma_fence();
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const unsigned long long da = lj_wgmma_desc_sw128(sa + a_off + mi * 64 * 128);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) lj_wgmma_64xN<T>(acc[mi], da + 2 * kk, db + 2 * kk);  // +32 bytes: the next k step
      }
      lj_wgmma_commit();
      // At most this tile's MMAs still run: the previous tile's slot can be refilled.
      lj_wgmma_wait<1>();
      if (kt > kt0 && signals) release(&empty[prev]);
      prev = pipe.stage;
      pipe.advance();
    }
    if (PINGPONG && more) lj_named_arrive(3 + ((j + 1) & 1), 256);
    lj_wgmma_wait<0>();
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) lj_wgmma_fence_acc(acc[mi]);
    if (signals) release(&empty[prev]);
  }

  // One tile, one CTA (the non-persistent kernel): acc = x[m0 .. m0+BM, :] * w[b_lo.., b_hi..]^T for
  // this consumer warpgroup's 64 rows. Returns false outside the consumers, whose work is done.
  static __device__ __forceinline__ bool mainloop(const lj_tensor_map* tx, const lj_tensor_map* tw, lj_i64 m0, lj_i64 b_lo,
                                                  lj_i64 b_hi, float (&acc)[MI][ACC], unsigned char* smem_raw, int split = 0,
                                                  const Q& q = Q{}) {
    const Role role = begin(smem_raw);
    Pipe pipe;
    const int kt0 = kt_begin(split), kt1 = kt_begin(split + 1);
    if (role != CONSUMER) {
      producer_registers();
      if (role == PRODUCER) {
        lj_tma_prefetch(tx);
        lj_tma_prefetch(tw);
        produce(tx, tw, m0, b_lo, b_hi, pipe, smem_raw, kt0, kt1);
        if constexpr (CLUSTER > 1) producer_tail(pipe, smem_raw);
      }
      if (role == TRANSFORM) transform(q, b_lo, b_hi, pipe, smem_raw, kt0, kt1);
      return false;
    }
    consumer_registers();
    if constexpr (WREG)
      consume_wreg(acc, q, b_lo, b_hi, pipe, smem_raw);
    else
      consume(acc, pipe, smem_raw, 0, false, kt0, kt1);
    return true;
  }

  // WREG, the consumer warpgroups of the CTA's one tile: first the tile's group constants into shared
  // memory (all 256 threads, named barrier 2), then per k tile and k16 step s: each thread's A
  // fragments of its two W rows (tile rows r0 and r0 + 8 of its warp's 16) dequantized from the slot's
  // codes, and one m64n256k16 with B = the slot's x tile. Each step's MMAs are a commit group, and
  // step s's fragment registers are rewritten only once the group that read them last (the previous
  // k tile's step s) has retired (wait for all but the 3 newest groups); after step 3's wait the
  // previous k tile's slot is released.
  static __device__ __forceinline__ void consume_wreg(float (&acc)[MI][ACC], const Q& q, lj_i64 b_lo, lj_i64 b_hi, Pipe& pipe,
                                                      unsigned char* smem_raw) {
    if constexpr (WREG) {
      const unsigned char* smem = aligned(smem_raw);
      unsigned long long* full = full_bars(smem_raw);
      unsigned long long* empty = full + STAGES;
      unsigned char* consts = tile_constants(smem_raw);
      q.stage_tile(consts, b_lo, b_hi, threadIdx.x - 128, CONSUMER_THREADS);
#pragma unroll
      for (int i = 0; i < ACC; ++i) acc[0][i] = 0;
      lj_wgmma_fence_acc(acc[0]);
      lj_cp_async_wait<0>();
      lj_named_barrier(2, CONSUMER_THREADS);
      const int lane = threadIdx.x & 31, t = lane & 3;
      const int r0 = consumer_wg() * 64 + ((threadIdx.x & 127) >> 5) * 16 + (lane >> 2);
      auto live = [&](int r) { return (r < BN / 2 ? b_lo + r : b_hi + (r - BN / 2)) < Q::NW; };
      const bool live0 = live(r0), live8 = live(r0 + 8);
      const unsigned sel = (unsigned)t | (unsigned)(4 + t) << 4;
      const bool signals = (threadIdx.x & 31) == 0;
      int prev = 0;
      unsigned a[4][4];
      typename Q::Dequant d0, d8;
#pragma unroll 1
      for (int kt = 0; kt < (int)K_TILES; ++kt) {
        lj_mbar_wait(&full[pipe.stage], pipe.phase);
        const unsigned char* sa = smem + pipe.stage * STAGE_BYTES;
        const unsigned long long db = lj_wgmma_desc_sw128(sa);  // the x tile, B
        // Row r0's 32 code bytes of the k tile (row r0 + 8's 256 bytes on), 8 a k16 step; unswizzled
        // (see emit_gemm.cpp: constant offsets keep the k steps' address arithmetic out of the chain).
        const uint2* c0 = reinterpret_cast<const uint2*>(sa + A_BYTES + r0 * 32);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          if (s == 0 || (Q::GROUP < BK && (16 * s) % Q::GROUP == 0)) {  // a new group (a k step lies in one)
            const lj_i64 k = (lj_i64)kt * BK + 16 * s;
            d0 = Q::dequant(q.group_staged(consts, r0, live0, k));
            d8 = Q::dequant(q.group_staged(consts, r0 + 8, live8, k));
          }
          const uint2 k0 = c0[s], k8 = c0[32 + s];
          lj_wgmma_wait<3>();
          Q::wreg_pairs(k0.x, k0.y, sel, d0, a[s][0], a[s][2]);
          Q::wreg_pairs(k8.x, k8.y, sel, d8, a[s][1], a[s][3]);
          lj_wgmma_fence();
          lj_wgmma_rs<T>::n256(acc[0], a[s], db + 2 * s);  // +32 bytes: the next k16 of the x tile
          lj_wgmma_commit();
        }
        if (kt > 0 && signals) release(&empty[prev]);
        prev = pipe.stage;
        pipe.advance();
      }
      lj_wgmma_wait<0>();
      lj_wgmma_fence_acc(acc[0]);
      if (signals) release(&empty[prev]);
    }
  }

  // Split-K: the first k tile of split `s` (kt_begin(SPLIT) = K_TILES), ranges within one tile apart.
  static __device__ __forceinline__ int kt_begin(int s) { return (int)((lj_i64)s * K_TILES / SPLIT); }

  // Split-K, by the consumer threads after the main loop (split_k.cuh, named barrier 1): false
  // unless this CTA finished its tile last; the last one's acc then holds the whole sum.
  static __device__ __forceinline__ bool split_reduce(float (&acc)[MI][ACC], float* part, unsigned* counter, int split) {
    if (SPLIT == 1) return true;
    return lj_split_k_reduce<SPLIT, MI * ACC, CONSUMER_THREADS>(reinterpret_cast<float(&)[MI * ACC]>(acc), part, counter, split, threadIdx.x - 128, 1);
  }

  // Stream-K: the grid's CTAs take the `total` = tiles x K_TILES k tiles in tile order, CTA c the
  // share [share_begin(c), share_begin(c + 1)) (grid <= total: none is empty); owner(i) is the CTA whose share
  // holds k tile i.
  static __device__ __forceinline__ lj_i64 share_begin(lj_i64 c, lj_i64 total, lj_i64 grid) { return c * total / grid; }
  static __device__ __forceinline__ lj_i64 owner(lj_i64 i, lj_i64 total, lj_i64 grid) { return ((i + 1) * grid - 1) / total; }

  // Stream-K, by the 256 consumer threads after CTA `c`'s main loop over k tiles [kt0, kt1) of tile
  // t: true at once where that is the whole tile. Otherwise the tile's owners, CTAs first .. last,
  // each hold a part: each stores its partial in its slot of `scratch` (2 per CTA: the first tile its
  // share touches, and the last; grid x 2 partials, then grid counters), counts on the counter of the first
  // owner (the only tile a CTA shares as the first owner is the one its share ends in), and the last
  // to arrive adds the partials in CTA order (split_k.cuh) and returns true.
  static __device__ __forceinline__ bool stream_fixup(float (&acc)[MI][ACC], float* scratch, lj_i64 t, int kt0, int kt1, lj_i64 total,
                                                      lj_i64 grid) {
    if (kt0 == 0 && kt1 == K_TILES) return true;
    const lj_i64 c = blockIdx.x;
    const lj_i64 first = owner(t * K_TILES, total, grid), last = owner((t + 1) * K_TILES - 1, total, grid);
    auto slot = [&](lj_i64 cta) { return 2 * cta + (share_begin(cta, total, grid) / K_TILES == t ? 0 : 1); };
    unsigned* counters = reinterpret_cast<unsigned*>(scratch + 2 * grid * PART_FLOATS);
    return lj_stream_k_reduce<MI * ACC, 256>(reinterpret_cast<float(&)[MI * ACC]>(acc), scratch, counters + first, slot(c),
                                             (int)(last - first + 1), [&](int s) { return slot(first + s); }, threadIdx.x - 128, 1);
  }

  // Where tile column c (W tile row c) is staged: with SwiGLU the gate rows [0, BN / 2) and the up
  // rows [BN / 2, BN) interleave, 8 gate then 8 up columns per 16, as the matmul epilogue reads them.
  static __device__ __forceinline__ int staged_column(int c) {
    return !GLU ? c : c < BN / 2 ? (c >> 3) * 16 + (c & 7) : ((c - BN / 2) >> 3) * 16 + 8 + (c & 7);
  }

  // Epilogue staging by the EPI_THREADS that own the tile: the tile rounded to TY into
  // [BM][STAGE_LD] at staging<TY>() (the first barrier: the tile's consumers are done with the ring,
  // and with the previous tile's staged values in a persistent kernel). Barrier 1, or with PINGPONG
  // 1 + the warpgroup, after the epilogue of the CTA's tile j - 1 (the other warpgroup's) has let go
  // of the shared staging area (named barrier 5 + j % 2, see epilogue_done).
  // The row scales of a consumer thread's rows of its tile, s[mi][h] for tile row r0 + 64 mi + 8 h
  // (the rows its accumulators hold, as stage() and stage_half() store them). Read before the main
  // loop (row_scales(scale)), their one global load per row waits under the MMAs instead of after
  // them; 1 in the producer warpgroup, which never stages.
  struct RowScales {
    float s[MI][2];
  };
  template <class Scale>
  static __device__ __forceinline__ RowScales row_scales(Scale scale) {
    RowScales rs;
    const int lane = threadIdx.x & 31;
    const int r0 = (PINGPONG ? 0 : consumer_wg() * MI * 64) + ((threadIdx.x & 127) / 32) * 16 + (lane >> 2);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) rs.s[mi][h] = threadIdx.x >= 128 ? scale(r0 + mi * 64 + 8 * h) : 1.f;
    return rs;
  }

  template <class TY, class Scale = lj_no_row_scale>
  static __device__ __forceinline__ void stage(const float (&acc)[MI][ACC], TY* tile, int j = 0, Scale scale = {}) {
    stage_scaled<lj_scales_rows<Scale>::value>(acc, tile, j, [&] { return lj_scales_rows<Scale>::value ? row_scales(scale) : RowScales{}; });
  }
  // ... with the row scales read before the main loop.
  template <class TY>
  static __device__ __forceinline__ void stage(const float (&acc)[MI][ACC], TY* tile, int j, const RowScales& rs) {
    stage_scaled<true>(acc, tile, j, [&] { return rs; });
  }
  // Both: `scales()` gives the row scales, called after the first barrier (where stage() reads them
  // itself, its loads come there, as before the scales could be read ahead).
  template <bool SCALED, class TY, class Scales>
  static __device__ __forceinline__ void stage_scaled(const float (&acc)[MI][ACC], TY* tile, int j, Scales scales) {
    const int bar = PINGPONG ? 1 + consumer_wg() : 1;
    if (PINGPONG && j > 0) lj_named_barrier(5 + (j & 1), 256);
    lj_named_barrier(bar, EPI_THREADS);
    const RowScales rs = scales();
    const int lane = threadIdx.x & 31;
    const int r0 = (PINGPONG || WREG ? 0 : consumer_wg() * MI * 64) + ((threadIdx.x & 127) / 32) * 16 + (lane >> 2);
    if constexpr (WREG) {
      // acc: W rows (tile columns) 64 g + r0 and + 8 by x rows (tile rows) 8 j + 2 (lane % 4) + e.
      static_assert(!SCALED, "W in registers: no row scales (their rows run along acc's columns)");
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = staged_column(consumer_wg() * 64 + r0 + 8 * h);
#pragma unroll
        for (int j = 0; j < BM / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) tile[(8 * j + 2 * (lane & 3) + e) * STAGE_LD + c] = lj_from_float<TY>(acc[0][4 * j + 2 * h + e]);
      }
    } else {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = r0 + mi * 64 + 8 * h;
            const int c = staged_column(j * 8 + (lane & 3) * 2);
            if (SCALED)
              lj_store2<TY>(tile + r * STAGE_LD + c, acc[mi][4 * j + 2 * h] * rs.s[mi][h], acc[mi][4 * j + 2 * h + 1] * rs.s[mi][h]);
            else
              lj_store2<TY>(tile + r * STAGE_LD + c, acc[mi][4 * j + 2 * h], acc[mi][4 * j + 2 * h + 1]);
          }
    }
    lj_named_barrier(bar, EPI_THREADS);
  }

  // PINGPONG, where the whole tile's staging would leave the ring too few stages: the H-th m64 half
  // of the tile (acc[H], rows 64 H ..) into [64][STAGE_LD] at staging<TY>(), the epilogue storing
  // one half before the next is staged (this function's first barrier: the warpgroup's threads are
  // done reading the half before). `scale(r)`: the row scale of the half's row r. The other
  // warpgroup's epilogue lets go of the staging area before half 0 (named barrier 5 + j % 2).
  template <int H, class TY, class Scale = lj_no_row_scale>
  static __device__ __forceinline__ void stage_half(const float (&acc)[MI][ACC], TY* tile, int j = 0, Scale scale = {}) {
    const int r0 = ((threadIdx.x & 127) / 32) * 16 + ((threadIdx.x & 31) >> 2);
    float s[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) s[h] = lj_scales_rows<Scale>::value ? scale(r0 + 8 * h) : 1.f;
    stage_half_scaled<H>(acc, tile, j, s);
  }
  // ... with the row scales read before the main loop.
  template <int H, class TY>
  static __device__ __forceinline__ void stage_half(const float (&acc)[MI][ACC], TY* tile, int j, const RowScales& rs) {
    stage_half_scaled<H>(acc, tile, j, rs.s[H]);
  }
  template <int H, class TY>
  static __device__ __forceinline__ void stage_half_scaled(const float (&acc)[MI][ACC], TY* tile, int j, const float (&s)[2]) {
    static_assert(PINGPONG && H >= 0 && H < MI, "a ping-pong tile's m64 halves");
    const int bar = 1 + consumer_wg();
    if (H == 0 && j > 0) lj_named_barrier(5 + (j & 1), 256);
    lj_named_barrier(bar, EPI_THREADS);
    const int lane = threadIdx.x & 31;
    const int r0 = ((threadIdx.x & 127) / 32) * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        const int c = staged_column(j * 8 + (lane & 3) * 2);
        lj_store2<TY>(tile + r * STAGE_LD + c, acc[H][4 * j + 2 * h] * s[h], acc[H][4 * j + 2 * h + 1] * s[h]);
      }
    lj_named_barrier(bar, EPI_THREADS);
  }

  // A barrier among the threads of one tile's epilogue, after they fill shared memory together (the
  // RoPE tables of the tile's rows beside the staged tile).
  static __device__ __forceinline__ void epi_sync() { lj_named_barrier(PINGPONG ? 1 + consumer_wg() : 1, EPI_THREADS); }

  // PINGPONG: this warpgroup's epilogue of the CTA's j-th tile has read all it staged; the tile j + 1
  // (the other warpgroup's), when there is one, may stage.
  static __device__ __forceinline__ void epilogue_done(int j, bool more) {
    if (PINGPONG && more) lj_named_arrive(5 + ((j + 1) & 1), 256);
  }
};
