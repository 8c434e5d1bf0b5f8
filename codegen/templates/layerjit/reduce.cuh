// Warp and block reductions for row kernels. Block reductions need blockDim.x to be a multiple of
// 32 and use 32 floats of shared memory; every thread gets the result.
#pragma once

__device__ __forceinline__ float lj_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float lj_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float lj_block_sum(float v) {
  __shared__ float partial[32];
  v = lj_warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // partial[] may still be read by a previous reduction
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.f;
  return lj_warp_sum(v);
}

__device__ __forceinline__ float lj_block_max(float v) {
  __shared__ float partial[32];
  v = lj_warp_max(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partial[lane] : -__int_as_float(0x7f800000);
  return lj_warp_max(v);
}
