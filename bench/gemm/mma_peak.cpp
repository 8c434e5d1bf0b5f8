#include "bench/gemm/mma_peak.h"

#include <algorithm>

#include "runtime/kernel_args.h"

namespace lj::bench {

MmaPeak mma_sync_peak(rt::Context& ctx, rt::Stream& stream) {
  // Eight independent accumulator chains per warp hide the instruction's latency; the operands are
  // small bf16 values (0.25) so the sums stay finite. The store is guarded by a value the sums never
  // take, so no product can be dropped.
  RawKernel mma = load_raw_kernel(ctx, R"(extern "C" __global__ void __launch_bounds__(512) mma_peak(int iters, float* sink) {
  const unsigned a0 = 0x3e803e80u, b0 = 0x3e803e80u;  // bf16 pairs (0.25, 0.25)
  float c[8][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                   : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                   : "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(b0), "r"(b0));
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == -1.0f) sink[threadIdx.x] = s;
})", "mma_peak");
  rt::DeviceBuffer sink = must(rt::DeviceBuffer::allocate(ctx, 512 * sizeof(float)), "alloc sink");
  const int iters = 2048;
  MmaPeak peak;
  for (int warps_per_sm : {4, 8, 16}) {
    // CTAs of 4 warps, so that every count is whole CTAs on every SM.
    const unsigned threads = 128, ctas = static_cast<unsigned>(ctx.info().sm_count * warps_per_sm / 4);
    std::vector<rt::KernelArgs> args{rt::KernelArgs::of(iters, sink.ptr())};
    const double ms = time_launches(stream, mma.kernel, rt::LaunchConfig::linear(ctas, threads), args);
    const double flops = 2.0 * 16 * 8 * 16 * 8 * static_cast<double>(iters) * (ctas * threads / 32);
    const double tflops = flops / (ms * 1e-3) / 1e12;
    peak.by_warps.emplace_back(warps_per_sm, tflops);
    peak.best = std::max(peak.best, tflops);
  }
  return peak;
}

}  // namespace lj::bench
