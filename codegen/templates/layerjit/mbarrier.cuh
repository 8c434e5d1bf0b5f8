// mbarriers and one-dimensional bulk copies (sm_90+): the phases the Hopper kernels' TMA loads
// complete on (wgmma.cuh) and the bulk-fed GEMV's ring (gemv_mma.cuh). PTX ISA references:
// "Parallel Synchronization and Communication Instructions: mbarrier", "cp.async.bulk".
#pragma once
#include "layerjit/cp_async.cuh"

// --- mbarriers -------------------------------------------------------------------------------
__device__ __forceinline__ void lj_mbar_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(lj_smem_addr(bar)), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the other threads and to the async proxy (TMA) before use.
__device__ __forceinline__ void lj_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival that also announces `bytes` of TMA transactions the phase must see complete.
__device__ __forceinline__ void lj_mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(lj_smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void lj_mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(lj_smem_addr(bar)) : "memory");
}
// Waits until the phase with parity `parity` has completed. A new barrier is in phase 0, and the
// phase before it (parity 1) counts as complete: a producer's first wait on an empty slot passes.
__device__ __forceinline__ void lj_mbar_wait(unsigned long long* bar, unsigned parity) {
  const unsigned addr = lj_smem_addr(bar);
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// --- bulk copies ----------------------------------------------------------------------------
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory by the
// tensor memory accelerator, counted in bytes on `bar` when they land. No tensor map: one contiguous
// run, which is what a row segment of a row-major weight is.
__device__ __forceinline__ void lj_bulk_load(void* smem, const void* gmem, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(lj_smem_addr(smem)),
               "l"(gmem), "r"(bytes), "r"(lj_smem_addr(bar))
               : "memory");
}
