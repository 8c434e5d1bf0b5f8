// Shared-memory addresses and cp.async (sm_80+): the GEMMs' tile pipelines (mma.cuh) and the staged
// GEMVs' per-warp rings (gemv_mma.cuh, gemv_q4.cuh).
#pragma once
#include "layerjit/types.cuh"

__device__ __forceinline__ unsigned lj_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// 16 bytes into shared memory as a shared-space store (tile pointers are generic: a generic store
// would resolve the window at run time).
__device__ __forceinline__ void lj_st_shared16(void* p, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(lj_smem_addr(p)), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// 16 bytes global -> shared without passing through registers. src_bytes < 16 zero-fills the rest
// (0: nothing is read, so a masked-off row or k chunk becomes zeros that add nothing to the dot
// products). .cg: bypass L1, the tile is used once per CTA.
__device__ __forceinline__ void lj_cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(lj_smem_addr(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void lj_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void lj_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
