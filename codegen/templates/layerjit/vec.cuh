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

template <class T, int N>
__device__ __forceinline__ void lj_store_raw(T* p, const lj_pack<T, N>& pk) {
  *reinterpret_cast<lj_pack<T, N>*>(p) = pk;
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

template <class T, int N>
__device__ __forceinline__ void lj_store(T* p, const float (&in)[N]) {
  lj_pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = lj_from_float<T>(in[i]);
  *reinterpret_cast<lj_pack<T, N>*>(p) = pk;
}
