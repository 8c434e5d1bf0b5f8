// Counter-based random numbers shared by device and host: value i of the stream `seed` is a pure
// function of (seed, i), so a device fill is reproducible, parallel without state, and the CPU
// reference can regenerate the exact same inputs. The mixing function is the splitmix64 finaliser
// (Steele, Lea, Flood 2014), whose outputs pass BigCrush for consecutive counters.
//
// Compiled by NVRTC (embedded as "layerjit/random.cuh") and by the host compiler (tests include it
// directly). Bit-exact agreement needs the device side built with -fmad=false: a fused
// multiply-add rounds once where the host rounds twice.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LJ_HOST_DEVICE __host__ __device__
#else
#define LJ_HOST_DEVICE
#endif

namespace lj_device {

LJ_HOST_DEVICE inline unsigned long long mix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Uniform in [lo, hi): 24 random bits, so every value is exactly representable as a float.
LJ_HOST_DEVICE inline float uniform(unsigned long long seed, unsigned long long i, float lo, float hi) {
  const unsigned long long bits = mix64(seed * 0xD1342543DE82EF95ull + mix64(i)) >> 40;
  const float u = static_cast<float>(bits) * (1.0f / 16777216.0f);
  return lo + (hi - lo) * u;
}

/// float -> bfloat16 bits, round to nearest even (inputs here are finite).
LJ_HOST_DEVICE inline unsigned short float_to_bf16_bits(float f) {
  unsigned int u = 0;
  // A bit cast: the CUDA intrinsic on the device (NVRTC has no <cstring>), memcpy on the host.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, sizeof u);
#endif
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

}  // namespace lj_device
