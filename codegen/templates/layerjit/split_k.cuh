// Split-K completion, shared by the GEMM families (gemm.cuh, gemm_wgmma.cuh): SPLIT CTAs multiply the
// same output tile over their own ranges of k, each holding N fp32 accumulators in each of THREADS
// threads. Each stores its accumulators into its slot of the tile's `part` area (SPLIT x N x THREADS
// floats, thread-minor so that a warp's stores are coalesced), fences and counts itself on the tile's
// `counter`; the CTA that counts last sums the SPLIT slots in split order — the same order whichever
// CTA is last, so results are reproducible — into its accumulators, zeroes the counter for the next
// launch and returns true (it runs the epilogue); the others return false.
#pragma once
#include "layerjit/types.cuh"

// Stream-K completion (gemm_wgmma.cuh, STREAM_K): a tile's k tiles are shared by `contributors` CTAs
// of consecutive indices, each holding a part of them. Each stores its accumulators into its own slot
// `my_slot` of `part`, counts itself on the tile's `counter`, and the last one adds the slots
// slot_of(0), slot_of(1), ... (CTA order, whichever CTA is last) into its accumulators, zeroes the
// counter and returns true; the others return false. `t`: this thread's index among the THREADS
// that hold accumulators; `bar`: a named barrier they all (and only they) take part in (0 when they
// are the whole CTA).
template <int N, int THREADS, class SlotOf>
__device__ __forceinline__ bool lj_stream_k_reduce(float (&acc)[N], float* part, unsigned* counter, lj_i64 my_slot, int contributors,
                                                   SlotOf slot_of, int t, int bar) {
  float* mine = part + my_slot * N * THREADS + t;
#pragma unroll
  for (int i = 0; i < N; ++i) mine[i * THREADS] = acc[i];
  if (!lj_arrive_last(counter, (unsigned)contributors, t, bar, THREADS)) return false;
  // Past L1 (other SMs wrote them): the first slot, then + each next one (this CTA's own read back too).
  const float* p = part + slot_of(0) * N * THREADS + t;
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = __ldcg(p + i * THREADS);
#pragma unroll 1
  for (int s = 1; s < contributors; ++s) {
    p = part + slot_of(s) * N * THREADS + t;
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] += __ldcg(p + i * THREADS);
  }
  if (t == 0) *counter = 0u;
  return true;
}

// Split-K: the tile's SPLIT CTAs own slots 0 .. SPLIT - 1 in split order.
template <int SPLIT, int N, int THREADS>
__device__ __forceinline__ bool lj_split_k_reduce(float (&acc)[N], float* part, unsigned* counter, int split, int t, int bar) {
  return lj_stream_k_reduce<N, THREADS>(acc, part, counter, split, SPLIT, [](int s) { return (lj_i64)s; }, t, bar);
}
