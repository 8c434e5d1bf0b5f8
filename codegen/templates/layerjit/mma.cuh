// Tensor-core building blocks for sm_80 and newer (cp.async copies into shared memory: cp_async.cuh): ldmatrix
// fragment loads and the mma.sync of the GEMM: m16n8k16 with fp32 accumulation for bf16 and f16
// operands, m16n8k32 with exact int32 accumulation for i8 (W8A8).
// Fragment layouts follow the PTX ISA ("Matrix Fragments for mma.m16n8k16"): lane = 4 * group + t,
// A holds rows {group, group + 8} x k {2t, 2t + 1, 2t + 8, 2t + 9}, B holds k {2t, 2t + 1, 2t + 8,
// 2t + 9} x column group, C holds rows {group, group + 8} x columns {2t, 2t + 1}.
#pragma once
#include "layerjit/cp_async.cuh"
#include "layerjit/types.cuh"

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it.
__device__ __forceinline__ void lj_ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lj_smem_addr(smem)));
}

// The same four matrices transposed: register i receives matrix i with rows and columns swapped, the
// B operand of a product whose k runs along the rows in memory (P * V with V stored [key][d]).
__device__ __forceinline__ void lj_ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lj_smem_addr(smem)));
}

// An 8-bit m16n8k32 fragment holds the same bytes where a 16-bit m16n8k16 one holds its elements (A:
// rows {group, group + 8} x bytes {4t .. 4t + 3, 16 + 4t ..}; B likewise by column), so one ldmatrix
// of b16 rows feeds both: a k step is 32 bytes of a row whatever the dtype. step() is the GEMM's
// instruction per k step; its accumulators are int where lj_int_operands (i8: exact sums, converted to
// float once after the main loop), else float.
template <class T>
constexpr bool lj_int_operands = false;
template <>
constexpr bool lj_int_operands<signed char> = true;

template <class T>
struct lj_mma;  // bf16, f16 and i8 have tensor-core paths

template <>
struct lj_mma<lj_bf16> {
  static __device__ __forceinline__ void m16n8k16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ void step(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) { m16n8k16(c, a, b); }
};

template <>
struct lj_mma<lj_f16> {
  static __device__ __forceinline__ void m16n8k16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  static __device__ __forceinline__ void step(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) { m16n8k16(c, a, b); }
};

template <>
struct lj_mma<signed char> {
  static __device__ __forceinline__ void step(int (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
