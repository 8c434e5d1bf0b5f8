#include "bench/gemm/gemm_bench_args.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/common/plan_runner.h"

namespace lj::bench {

bool parse_gemm_bench_args(int argc, char** argv, const char* shapes, GemmBenchArgs& out) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sweep") == 0) {
      out.sweep = true;
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      out.shape = argv[++i];
    } else if (std::strcmp(argv[i], "--m") == 0 && i + 1 < argc) {
      out.m = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      std::string error;
      auto c = parse_matmul_config(argv[++i], &error);
      if (!c) {
        std::fprintf(stderr, "%s: --config '%s': %s\n", g_program, argv[i], error.c_str());
        return false;
      }
      out.extra.push_back(*c);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--sweep] [--shape %s] [--m ROWS] [--config CONFIG]...\n", g_program,
                   argv[i], g_program, shapes);
      return false;
    }
  }
  return true;
}

}  // namespace lj::bench
