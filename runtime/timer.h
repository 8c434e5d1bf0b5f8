// Kernel timing by the method of DESIGN.md: warm-up runs first (module load, first-touch and clock
// ramp stay out of the numbers), CUDA events around each repeat, many repeats, median and spread, and
// inputs rotated through several copies so repeats do not find the previous run's data in L2.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/stream.h"

namespace lj::rt {

struct TimerOptions {
  int warmup = 5;
  int repeats = 50;
  /// The body is called with rotation = repeat % rotations: it should read input set `rotation`.
  int rotations = 1;
};

struct Timing {
  std::vector<double> samples_ms;  ///< one per repeat, in order
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  /// (p90 - p10) / median: the relative spread of the middle 80% of repeats.
  double spread() const { return median_ms > 0 ? (p90_ms - p10_ms) / median_ms : 0; }
  /// "0.123 ms median (p10 0.120, p90 0.130, min 0.119, max 0.150, n=50)".
  std::string format() const;
};

/// Order statistics of a set of samples (CPU-only; what time_on_stream reports).
Timing summarize(std::vector<double> samples_ms);

/// How many copies of a `bytes_per_set` input make repeats miss L2: enough that the copies together
/// span at least twice the L2 size (at least 1, at most 64).
int rotations_for(size_t bytes_per_set, size_t l2_bytes);

/// Where a kernel stands against the roofline of a device with `peak_flops_per_s` and
/// `peak_bytes_per_s`: it moved `bytes` and did `flops` in `seconds`. Below the ridge point
/// (intensity x bandwidth < compute) memory bounds it and the fraction is of intensity x bandwidth;
/// above, of the compute ceiling; with no FLOPs, of the bandwidth. CPU-only (`layerjit bench`).
struct RooflinePoint {
  double fraction = 0;  ///< achieved / attainable at this intensity
  bool compute_bound = false;
};
RooflinePoint roofline(double flops, double bytes, double seconds, double peak_flops_per_s, double peak_bytes_per_s);

/// Times `body` (which enqueues work on `stream`) as TimerOptions says.
Result<Timing> time_on_stream(Stream& stream, const std::function<Status(int rotation)>& body,
                              const TimerOptions& options = {});

/// Times each of `steps` where it runs in sequence: every repeat enqueues all steps back to back with
/// an event between neighbours, so each step is timed after the one before it, as in a real call
/// (the caches, clocks and tails it leaves), not alone. One Timing per step; `options.rotations` is
/// ignored.
Result<std::vector<Timing>> time_steps_on_stream(Stream& stream, const std::vector<std::function<Status()>>& steps,
                                                 const TimerOptions& options = {});

}  // namespace lj::rt
