// The command line the GEMM benchmarks share: --sweep, --shape NAME, --m ROWS, --config CONFIG...
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/matmul_config.h"

namespace lj::bench {

struct GemmBenchArgs {
  bool sweep = false;                ///< also time every config the pruner accepts
  const char* shape = nullptr;       ///< only the shape of this name
  int64_t m = 0;                     ///< only this row count (0: the benchmark's own)
  std::vector<MatmulConfig> extra;   ///< --config: timed beside the default where it applies
};

/// Parses argv[1..]; on a bad argument prints what and the usage line ("usage: PROGRAM [--sweep]
/// [--shape SHAPES] [--m ROWS] [--config CONFIG]...") to stderr and returns false.
bool parse_gemm_bench_args(int argc, char** argv, const char* shapes, GemmBenchArgs& out);

}  // namespace lj::bench
