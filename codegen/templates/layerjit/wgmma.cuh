// Hopper (sm_90a) building blocks of the warp-specialised GEMM: tensor-memory-accelerator (TMA) tile
// loads (completing on the mbarriers of mbarrier.cuh), warpgroup MMA (wgmma) from shared-memory
// descriptors, and register re-allocation between warpgroups (setmaxnreg). PTX ISA references:
// "cp.async.bulk.tensor", "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"
// (matrix descriptor format and the 128-byte swizzle layout).
#pragma once
#include "layerjit/mbarrier.cuh"
#include "layerjit/mma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "layerjit/wgmma.cuh: wgmma and setmaxnreg need the arch-specific sm_90a target"
#endif

// The 128-byte CUtensorMap the host encodes (cuTensorMapEncodeTiled) and passes by value as a
// `const __grid_constant__` kernel parameter: TMA reads it from parameter space by its generic address.
struct __align__(64) lj_tensor_map {
  unsigned long long opaque[16];
};

// --- TMA ------------------------------------------------------------------------------------
__device__ __forceinline__ void lj_tma_prefetch(const lj_tensor_map* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// One box of a 2-D tensor map at element coordinates (col, row) into shared memory; completion is
// counted in bytes on `bar`. Parts of the box outside the tensor arrive as zeros.
__device__ __forceinline__ void lj_tma_load_2d(void* smem, const lj_tensor_map* map, int col, int row,
                                               unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          lj_smem_addr(smem)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(col), "r"(row), "r"(lj_smem_addr(bar))
      : "memory");
}

// The same box into the same shared-memory offset of every CTA of the cluster in `cta_mask` (bit r:
// rank r), each copy counted in bytes on the mbarrier at `bar`'s offset in that CTA.
__device__ __forceinline__ void lj_tma_load_2d_multicast(void* smem, const lj_tensor_map* map, int col, int row, unsigned long long* bar,
                                                         unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(
          lj_smem_addr(smem)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(col), "r"(row), "r"(lj_smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

// --- thread-block clusters ------------------------------------------------------------------
// This CTA's rank in its cluster.
__device__ __forceinline__ unsigned lj_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster (release / acquire at cluster scope): after it the
// cluster's mbarriers are initialised for remote arrivals and multicast copies.
__device__ __forceinline__ void lj_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// One arrival on the mbarrier at `bar`'s offset in the shared memory of cluster CTA `rank` (this
// CTA's own included). The arrival's default semantics (release at CTA scope) suffice: it tells the
// peer's producer that this warp's wgmma reads of the slot are done (wgmma.wait_group before it), and
// no write of this thread has to be seen there. `.release.cluster` made the GEMM 2-3x slower on the
// H100 (a cluster-wide fence per arrival: docs/perf.md).
__device__ __forceinline__ void lj_mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          lj_smem_addr(bar)),
      "r"(rank)
      : "memory");
}

// --- warpgroup MMA --------------------------------------------------------------------------
// Shared-memory matrix descriptor of a K-major tile written by TMA with the 128-byte swizzle: rows of
// 64 16-bit elements (128 bytes), 8-row core groups 1024 bytes apart (stride byte offset), leading
// byte offset unused for this layout. The tile must start 1024-byte aligned; a k step of 16 elements
// inside the 128-byte row advances the start address by 32 bytes (the hardware applies the swizzle
// to the computed addresses).
__device__ __forceinline__ unsigned long long lj_wgmma_desc_sw128(const void* smem) {
  const unsigned long long addr = lj_smem_addr(smem);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
// The same swizzle with the tile MN-major (a transposed B: the N index contiguous, as V [keys][d] is
// for O += P V): each k row of the operand is 128 bytes of 64 N elements, 8-row k groups 1024 bytes
// apart (stride byte offset), and the next 64 N elements `lbo_bytes` further on (leading byte
// offset). A k step of 16 advances the start address by 16 rows, 2048 bytes.
__device__ __forceinline__ unsigned long long lj_wgmma_desc_sw128_mn(const void* smem, unsigned lbo_bytes) {
  const unsigned long long addr = lj_smem_addr(smem);
  return ((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo_bytes >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void lj_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void lj_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void lj_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator accesses across the asynchronous MMAs that own them.
template <int R>
__device__ __forceinline__ void lj_wgmma_fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void lj_wgmma_fence_acc(int (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Register budgets: the producer warpgroup gives registers back, the consumers take them. Takes
// effect only under __launch_bounds__(threads, 1) (a register cap at entry).
template <int R>
__device__ __forceinline__ void lj_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void lj_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads (wgmma, TMA).
__device__ __forceinline__ void lj_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Barrier among `threads` threads (a multiple of 32) on hardware barrier `id` (0 is __syncthreads).
__device__ __forceinline__ void lj_named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives on named barrier `id` without waiting: the other `threads` - (this warp group) wait there
// with lj_named_barrier (one side signals, the other side syncs).
__device__ __forceinline__ void lj_named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// D(64 x N, fp32 in registers; s32 for i8) += A(64 x k, smem) * B(N x k, smem)^T, both K-major, k 32
// bytes (16 bf16/f16 or 32 fp8 or i8 elements). The accumulator layout per warp matches mma.sync's m16n8 C fragments: warp w of the warpgroup owns rows 16w..16w+15,
// d[4j + 2h + e] is row 16w + lane / 4 + 8h, column 8j + 2 (lane % 4) + e. Inline asm cannot take an
// array, so the operand lists are spelled out in macros (the scale-d operand is a predicate).
template <class T>
struct lj_wgmma;

// The accumulator operands, spelled out once for the 32-, 48-, 64- and 128-register shapes, with their
// constraint C: "+f" for fp32 accumulators, "+r" for the s32 ones of i8.

#define LJ_WGMMA_REGS_LO \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LJ_WGMMA_REGS_HI \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define LJ_WGMMA_REGS_32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LJ_WGMMA_REGS_48 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define LJ_WGMMA_REGS_64 "{" LJ_WGMMA_REGS_LO "}"
#define LJ_WGMMA_REGS_128 "{" LJ_WGMMA_REGS_LO ", " LJ_WGMMA_REGS_HI "}"

#define LJ_WGMMA_ACC_32(C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
  C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31])

#define LJ_WGMMA_ACC_48(C) LJ_WGMMA_ACC_32(C), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
  C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47])

#define LJ_WGMMA_ACC_64(C) \
  C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), \
  C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), \
  C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), \
  C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]), \
  C(d[32]), C(d[33]), C(d[34]), C(d[35]), C(d[36]), C(d[37]), C(d[38]), C(d[39]), \
  C(d[40]), C(d[41]), C(d[42]), C(d[43]), C(d[44]), C(d[45]), C(d[46]), C(d[47]), \
  C(d[48]), C(d[49]), C(d[50]), C(d[51]), C(d[52]), C(d[53]), C(d[54]), C(d[55]), \
  C(d[56]), C(d[57]), C(d[58]), C(d[59]), C(d[60]), C(d[61]), C(d[62]), C(d[63])

#define LJ_WGMMA_ACC_128(C) LJ_WGMMA_ACC_64(C), \
  C(d[64]), C(d[65]), C(d[66]), C(d[67]), C(d[68]), C(d[69]), C(d[70]), C(d[71]), \
  C(d[72]), C(d[73]), C(d[74]), C(d[75]), C(d[76]), C(d[77]), C(d[78]), C(d[79]), \
  C(d[80]), C(d[81]), C(d[82]), C(d[83]), C(d[84]), C(d[85]), C(d[86]), C(d[87]), \
  C(d[88]), C(d[89]), C(d[90]), C(d[91]), C(d[92]), C(d[93]), C(d[94]), C(d[95]), \
  C(d[96]), C(d[97]), C(d[98]), C(d[99]), C(d[100]), C(d[101]), C(d[102]), C(d[103]), \
  C(d[104]), C(d[105]), C(d[106]), C(d[107]), C(d[108]), C(d[109]), C(d[110]), C(d[111]), \
  C(d[112]), C(d[113]), C(d[114]), C(d[115]), C(d[116]), C(d[117]), C(d[118]), C(d[119]), \
  C(d[120]), C(d[121]), C(d[122]), C(d[123]), C(d[124]), C(d[125]), C(d[126]), C(d[127])

// One wgmma with B's descriptor after A's and the scale-d predicate (1: accumulate) last. The 16-bit
// forms also take the two transpose immediates (0: both K-major); the fp8 forms have none (fp8
// operands must be K-major), and NVRTC 13.0 has crashed on a wgmma with a wrong operand list, so the
// two spellings stay apart.
#define LJ_WGMMA_ASM(INSTR, REGS, A, B, SCALE, ...)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p, 1, 1, 0, 0;\n}\n"                                                         \
               : __VA_ARGS__                                                                           \
               : "l"(a), "l"(b), "r"(1))
#define LJ_WGMMA_F8_ASM(INSTR, REGS, A, B, SCALE, ...)                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p, 1, 1;\n}\n"                                                              \
               : __VA_ARGS__                                                                           \
               : "l"(a), "l"(b), "r"(1))

// i8 (W8A8): s32 accumulators, and neither scale nor transpose immediates (integer operands are
// K-major).
#define LJ_WGMMA_S8_ASM(INSTR, REGS, A, B, SCALE, ...)                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p;\n}\n"                                                                  \
               : __VA_ARGS__                                                                           \
               : "l"(a), "l"(b), "r"(1))

// One k step of 32 bytes of a K-major row: k16 for 16-bit operands, k32 for fp8 ones, so the
// descriptors of a 128-byte swizzle row advance alike (+32 bytes per step) whatever the dtype.
#define LJ_WGMMA_STEPS(ASM, TYPES, ACC_T, C)                                                          \
  static __device__ __forceinline__ void n64(ACC_T (&d)[32], unsigned long long a, unsigned long long b) {   \
    ASM("m64n64" TYPES, LJ_WGMMA_REGS_32, "%32", "%33", "%34", LJ_WGMMA_ACC_32(C));                   \
  }                                                                                                  \
  static __device__ __forceinline__ void n96(ACC_T (&d)[48], unsigned long long a, unsigned long long b) {   \
    ASM("m64n96" TYPES, LJ_WGMMA_REGS_48, "%48", "%49", "%50", LJ_WGMMA_ACC_48(C));                   \
  }                                                                                                  \
  static __device__ __forceinline__ void n128(ACC_T (&d)[64], unsigned long long a, unsigned long long b) {  \
    ASM("m64n128" TYPES, LJ_WGMMA_REGS_64, "%64", "%65", "%66", LJ_WGMMA_ACC_64(C));                  \
  }                                                                                                  \
  static __device__ __forceinline__ void n256(ACC_T (&d)[128], unsigned long long a, unsigned long long b) { \
    ASM("m64n256" TYPES, LJ_WGMMA_REGS_128, "%128", "%129", "%130", LJ_WGMMA_ACC_128(C));             \
  }

template <>
struct lj_wgmma<lj_bf16> {
  LJ_WGMMA_STEPS(LJ_WGMMA_ASM, "k16.f32.bf16.bf16", float, "+f")
};
template <>
struct lj_wgmma<lj_f16> {
  LJ_WGMMA_STEPS(LJ_WGMMA_ASM, "k16.f32.f16.f16", float, "+f")
};
template <>
struct lj_wgmma<lj_e4m3> {
  LJ_WGMMA_STEPS(LJ_WGMMA_F8_ASM, "k32.f32.e4m3.e4m3", float, "+f")
};
template <>
struct lj_wgmma<lj_e5m2> {
  LJ_WGMMA_STEPS(LJ_WGMMA_F8_ASM, "k32.f32.e5m2.e5m2", float, "+f")
};
template <>
struct lj_wgmma<signed char> {
  LJ_WGMMA_STEPS(LJ_WGMMA_S8_ASM, "k32.s32.s8.s8", int, "+r")
};

// D(64 x 256, fp32) += A(64 x 16, registers) * B(256 x 16, smem, K-major)^T: the 4-bit GEMM whose
// product is transposed (gemm_wgmma.cuh, WREG): A is W dequantized in registers, in mma.sync's m16k16
// fragment layout per warp (a[0..3]: rows lane/4 and +8, k pairs 2 (lane%4) and +8); B is the x
// tile as TMA loads it (imm-trans-b 0).
#define LJ_WGMMA_RS_K_ASM(INSTR, REGS, A, B, SCALE, ...)                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p, 1, 1, 0;\n}\n"                                                            \
               : __VA_ARGS__                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))
template <class T>
struct lj_wgmma_rs;
template <>
struct lj_wgmma_rs<lj_bf16> {
  static __device__ __forceinline__ void n256(float (&d)[128], const unsigned (&a)[4], unsigned long long b) {
    LJ_WGMMA_RS_K_ASM("m64n256k16.f32.bf16.bf16", LJ_WGMMA_REGS_128, "{%128, %129, %130, %131}", "%132", "%133", LJ_WGMMA_ACC_128("+f"));
  }
};
template <>
struct lj_wgmma_rs<lj_f16> {
  static __device__ __forceinline__ void n256(float (&d)[128], const unsigned (&a)[4], unsigned long long b) {
    LJ_WGMMA_RS_K_ASM("m64n256k16.f32.f16.f16", LJ_WGMMA_REGS_128, "{%128, %129, %130, %131}", "%132", "%133", LJ_WGMMA_ACC_128("+f"));
  }
};

template <class T, class ACC>
__device__ __forceinline__ void lj_wgmma_64xN(ACC (&d)[32], unsigned long long a, unsigned long long b) {
  lj_wgmma<T>::n64(d, a, b);
}
template <class T, class ACC>
__device__ __forceinline__ void lj_wgmma_64xN(ACC (&d)[48], unsigned long long a, unsigned long long b) {
  lj_wgmma<T>::n96(d, a, b);
}
template <class T, class ACC>
__device__ __forceinline__ void lj_wgmma_64xN(ACC (&d)[64], unsigned long long a, unsigned long long b) {
  lj_wgmma<T>::n128(d, a, b);
}
template <class T, class ACC>
__device__ __forceinline__ void lj_wgmma_64xN(ACC (&d)[128], unsigned long long a, unsigned long long b) {
  lj_wgmma<T>::n256(d, a, b);
}

// Flash attention's two products (attention_wgmma.cuh), for N of 64 or 128 (R = N / 2 accumulators):
//   ss: D (+)= A(64 x 16, smem) * B(N x 16, smem)^T, both K-major; `accumulate` 0 overwrites D (the
//       first k step of S = Q K^T), else adds.
//   rs: D += A(64 x 16, registers) * B(16 x N, smem, MN-major: imm-trans-b = 1), A in the per-warp
//       m16k16 fragment layout of mma.sync (a[0..3]: rows lane/4 and +8, k pairs 2 (lane%4) and +8),
//       which is also the layout of two adjacent n8 blocks of a 64 x N fp32 accumulator: P goes from
//       S's registers into O += P V without touching shared memory.
#define LJ_WGMMA_SS_ASM(INSTR, REGS, A, B, SCALE, ...)                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p, 1, 1, 0, 0;\n}\n"                                                         \
               : __VA_ARGS__                                                                           \
               : "l"(a), "l"(b), "r"(accumulate))
#define LJ_WGMMA_RS_ASM(INSTR, REGS, A, B, SCALE, ...)                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\nwgmma.mma_async.sync.aligned." INSTR " " REGS \
               ", " A ", " B ", p, 1, 1, 1;\n}\n"                                                            \
               : __VA_ARGS__                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))

#define LJ_WGMMA_ATTN_OPS(TY, NAME)                                                                              \
  static __device__ __forceinline__ void ss(float (&d)[32], unsigned long long a, unsigned long long b, int accumulate) { \
    LJ_WGMMA_SS_ASM("m64n64k16.f32." NAME "." NAME, LJ_WGMMA_REGS_32, "%32", "%33", "%34", LJ_WGMMA_ACC_32("+f"));       \
  }                                                                                                              \
  static __device__ __forceinline__ void ss(float (&d)[64], unsigned long long a, unsigned long long b, int accumulate) { \
    LJ_WGMMA_SS_ASM("m64n128k16.f32." NAME "." NAME, LJ_WGMMA_REGS_64, "%64", "%65", "%66", LJ_WGMMA_ACC_64("+f"));      \
  }                                                                                                              \
  static __device__ __forceinline__ void rs(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {     \
    LJ_WGMMA_RS_ASM("m64n64k16.f32." NAME "." NAME, LJ_WGMMA_REGS_32, "{%32, %33, %34, %35}", "%36", "%37",      \
                    LJ_WGMMA_ACC_32("+f"));                                                                            \
  }                                                                                                              \
  static __device__ __forceinline__ void rs(float (&d)[64], const unsigned (&a)[4], unsigned long long b) {     \
    LJ_WGMMA_RS_ASM("m64n128k16.f32." NAME "." NAME, LJ_WGMMA_REGS_64, "{%64, %65, %66, %67}", "%68", "%69",     \
                    LJ_WGMMA_ACC_64("+f"));                                                                            \
  }

template <class T>
struct lj_wgmma_attn;
template <>
struct lj_wgmma_attn<lj_bf16> {
  LJ_WGMMA_ATTN_OPS(lj_bf16, "bf16")
};
template <>
struct lj_wgmma_attn<lj_f16> {
  LJ_WGMMA_ATTN_OPS(lj_f16, "f16")
};
