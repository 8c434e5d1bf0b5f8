#pragma once
// The mma.sync ceiling of the device: what the m16n8k16 instruction itself delivers with no memory
// traffic, the number that an mma.sync GEMM's TFLOP/s is held to (as a read of the same bytes is for
// a GEMV).
#include <utility>
#include <vector>

#include "bench/common/plan_runner.h"

namespace lj::bench {

/// TFLOP/s of bf16 m16n8k16 mma.sync with fp32 accumulation: every warp of a full grid runs long
/// chains of independent products on register operands.
struct MmaPeak {
  double best = 0;                             ///< the best of the grids below
  std::vector<std::pair<int, double>> by_warps;  ///< (warps per SM, TFLOP/s): 4, 8 and 16
};
MmaPeak mma_sync_peak(rt::Context& ctx, rt::Stream& stream);

}  // namespace lj::bench
