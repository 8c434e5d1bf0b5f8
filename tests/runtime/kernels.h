// CUDA C++ sources the CPU-tier runtime tests compile with NVRTC.
#pragma once

namespace lj_test {

/// A plain kernel every target compiles.
inline constexpr const char* kSaxpy = R"(extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

/// Uses the embedded device header, which must come from memory, not from the source tree.
inline constexpr const char* kUsesEmbeddedHeader = R"(#include "layerjit/random.cuh"
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = lj_device::uniform(7, i, -1.0f, 1.0f);
}
)";

/// One warpgroup issuing a Hopper wgmma (m64n8k16, f16 inputs, f32 accumulators) from shared-memory
/// descriptors: valid only for sm_90a.
inline constexpr const char* kWgmma = R"(extern "C" __global__ void wgmma_m64n8k16(float* out, unsigned long long desc_a,
                                              unsigned long long desc_b) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "l"(desc_a), "l"(desc_b), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float* o = out + 4 * threadIdx.x;
  o[0] = d0; o[1] = d1; o[2] = d2; o[3] = d3;
}
)";

/// A kernel with an error on line 6 (an undeclared identifier), inside `scale_rows`.
inline constexpr const char* kBroken = R"(// line 1
extern "C" __global__ void fine(float* x) { x[0] = 1.0f; }
// line 3
extern "C" __global__ void scale_rows(float* x, int n) {
  int i = threadIdx.x;
  if (i < n) x[i] = x[i] * undeclared_scale;
  // line 7
}
// line 9
)";

}  // namespace lj_test
