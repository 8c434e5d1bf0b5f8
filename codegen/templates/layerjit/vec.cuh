// Vector loads and stores of N consecutive elements as one aligned access (16 bytes for 8 bf16),
// converting to and from float registers. The emitter uses N > 1 only where it has proven the
// address aligned; N == 1 is the scalar path.
#pragma once
#include "layerjit/types.cuh"

template <class T, int N>
struct alignas(sizeof(T) * N) lj_pack {
  T v[N];
};

// Raw packs let a kernel issue its loads early and convert later: N elements of T take N * sizeof(T)
// bytes of registers instead of N floats while the load is in flight.
template <class T, int N>
__device__ __forceinline__ lj_pack<T, N> lj_load_raw(const T* p) {
  return *reinterpret_cast<const lj_pack<T, N>*>(p);
}

// The bits of one element, zero-extended.
__device__ __forceinline__ unsigned lj_bits(lj_bf16 v) { return v.bits; }
__device__ __forceinline__ unsigned lj_bits(lj_f16 v) { return v.bits; }
__device__ __forceinline__ unsigned lj_bits(lj_e4m3 v) { return v.bits; }
__device__ __forceinline__ unsigned lj_bits(lj_e5m2 v) { return v.bits; }
__device__ __forceinline__ unsigned lj_bits(signed char v) { return (unsigned char)v; }
__device__ __forceinline__ unsigned lj_bits(int v) { return (unsigned)v; }
__device__ __forceinline__ unsigned lj_bits(float v) { return __float_as_uint(v); }

// Stores go through 32-bit words: the compiler stores a copy of a pack of 1- or 2-byte structs
// element by element (8 st.global.u16 for 8 bf16: four times the L2 sectors of one 16-byte store),
// but words assembled in registers as one access.
template <class T, int N>
__device__ __forceinline__ void lj_store_raw(T* p, const lj_pack<T, N>& pk) {
  constexpr int BYTES = (int)sizeof(T) * N;
  if constexpr (sizeof(T) <= 4 && (BYTES == 4 || BYTES == 8 || BYTES == 16)) {
    constexpr int PER = 4 / (int)sizeof(T);  // elements per word
    unsigned w[BYTES / 4];
#pragma unroll
    for (int i = 0; i < BYTES / 4; ++i) {
      unsigned x = 0;
#pragma unroll
      for (int j = 0; j < PER; ++j) x |= lj_bits(pk.v[i * PER + j]) << (8 * (int)sizeof(T) * j);
      w[i] = x;
    }
    // In PTX, because NVVM was seen splitting a uint4 store of such words into four st.global.u32
    // in an unrolled epilogue loop (the address is 16-byte aligned by the emitter's proof).
    if constexpr (BYTES == 16) {
      asm volatile("st.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
    } else if constexpr (BYTES == 8) {
      asm volatile("st.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
    } else {
      *reinterpret_cast<unsigned*>(p) = w[0];
    }
  } else {
    *reinterpret_cast<lj_pack<T, N>*>(p) = pk;
  }
}

template <class T, int N>
__device__ __forceinline__ void lj_unpack(const lj_pack<T, N>& pk, float (&out)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = lj_to_float(pk.v[i]);
}

template <class T, int N>
__device__ __forceinline__ void lj_load(const T* p, float (&out)[N]) {
  lj_unpack(lj_load_raw<T, N>(p), out);
}

// The same from L2, past L1 (ld.global.cg): for data other CTAs of this kernel wrote, read after
// lj_arrive_last (a GEMV's row tail), which L1 may hold stale or the read-only path may not see.
template <class T, int N>
__device__ __forceinline__ void lj_load_cg(const T* p, float (&out)[N]) {
  constexpr int BYTES = (int)sizeof(T) * N;
  static_assert(BYTES == 1 || BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16, "one access of 1 to 16 bytes");
  lj_pack<T, N> pk;  // aligned to its size, as the emitter proved p is
  if constexpr (BYTES == 16) {
    *reinterpret_cast<uint4*>(&pk) = __ldcg(reinterpret_cast<const uint4*>(p));
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<uint2*>(&pk) = __ldcg(reinterpret_cast<const uint2*>(p));
  } else if constexpr (BYTES == 4) {
    *reinterpret_cast<unsigned*>(&pk) = __ldcg(reinterpret_cast<const unsigned*>(p));
  } else if constexpr (BYTES == 2) {
    *reinterpret_cast<unsigned short*>(&pk) = __ldcg(reinterpret_cast<const unsigned short*>(p));
  } else {
    *reinterpret_cast<unsigned char*>(&pk) = __ldcg(reinterpret_cast<const unsigned char*>(p));
  }
  lj_unpack(pk, out);
}

template <class T, int N>
__device__ __forceinline__ void lj_store(T* p, const float (&in)[N]) {
  lj_pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = lj_from_float<T>(in[i]);
  lj_store_raw(p, pk);
}

// Two adjacent elements (p aligned to both) as one store: the staged GEMM epilogue tiles.
template <class T>
__device__ __forceinline__ void lj_store2(T* p, float a, float b) {
  lj_pack<T, 2> pk;
  pk.v[0] = lj_from_float<T>(a);
  pk.v[1] = lj_from_float<T>(b);
  lj_store_raw(p, pk);
}
