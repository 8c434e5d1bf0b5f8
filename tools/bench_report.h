// What `layerjit bench` measured, as data: the tables it prints, and the same rows as JSON, CSV
// and a roofline picture (an SVG layerjit draws itself, no plotting stack needed).
#pragma once

#include <string>
#include <vector>

namespace lj::cli {

struct BenchReport {
  std::string device, graph, sizes;  // "NVIDIA H200", "llama3_8b_decode", "B=1,C=4096"
  // The ceilings measured in the same run.
  double hbm_bytes_per_s = 0, copy_ms = 0;
  double tensor_flops_per_s = 0, gemm_ms = 0;
  std::string gemm_config;
  struct Kernel {
    size_t group = 0;
    std::string name, config;
    double ms_alone = 0, ms_in_order = 0;
    double flops = 0, bytes = 0;  // what the planner says the group must do and move
    double roofline_fraction = 0;
    bool compute_bound = false;
  };
  std::vector<Kernel> kernels;  // per-call kernels of the fused plan, in order
  struct Plan {
    std::string name;      // "unfused", "fused", "fused, one CUDA graph"
    size_t kernels = 0;
    std::string launches;  // "16", "1 graph"
    double bytes = 0, ms = 0, vs_unfused = 0;
  };
  std::vector<Plan> plans;
};

/// The plan's modelled HBM bytes at the copy bandwidth of the same run, over its measured time: how
/// close a memory-bound plan (a decode layer) runs to the floor its bytes set (0 without a ceiling).
double hbm_floor_fraction(const BenchReport& r, const BenchReport::Plan& p);

/// {"schema": "layerjit.bench/1", device, graph, sizes, ceilings, kernels[], plans[]}.
std::string bench_json(const BenchReport& r);
/// One header line, then a row per kernel (section "kernel") and per plan (section "plan").
std::string bench_csv(const BenchReport& r);
/// Log-log roofline: arithmetic intensity (FLOP per byte) against TFLOP/s, the measured ceilings as
/// the roof, each kernel a point (a <circle> with data-group, data-intensity, data-tflops) numbered
/// by its group and listed beside the plot with its fraction of the roof.
std::string roofline_svg(const BenchReport& r);

/// Writes `text` to `path` beside and renamed into place (a reader never sees half a file); a
/// UserError naming the file when it cannot.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace lj::cli
