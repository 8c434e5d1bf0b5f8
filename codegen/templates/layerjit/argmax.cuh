// The argmax of a row, as the CPU reference defines it (ops/reference/reductions.cpp): the first
// index of the largest value, a NaN counting as larger than any number (torch.argmax's rule).
// lj_argmax_better says whether (v, i) beats (best, bi); lj_block_argmax combines every thread's
// candidate (blockDim.x a multiple of 32, at most 1024) and gives every thread the winning index.
#pragma once

__device__ __forceinline__ bool lj_argmax_better(float v, int i, float best, int bi) {
  const bool vn = v != v, bn = best != best;
  if (vn || bn) return vn && (!bn || i < bi);
  return v > best || (v == best && i < bi);
}

__device__ __forceinline__ void lj_warp_argmax(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (lj_argmax_better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
}

__device__ __forceinline__ int lj_block_argmax(float v, int i) {
  __shared__ float pv[32];
  __shared__ int pi[32];
  lj_warp_argmax(v, i);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    pv[warp] = v;
    pi[warp] = i;
  }
  __syncthreads();
  const bool have = lane < (int)(blockDim.x >> 5);
  v = have ? pv[lane] : -__int_as_float(0x7f800000);
  i = have ? pi[lane] : 0x7fffffff;
  lj_warp_argmax(v, i);
  return i;
}
