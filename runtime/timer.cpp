// Event-based timing (see timer.h).
#include "runtime/timer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace lj::rt {
namespace {

/// Linear interpolation between order statistics (the common "type 7" quantile).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

/// Owns the events of one timing run.
class EventSet {
 public:
  explicit EventSet(const Context& ctx) : ctx_(ctx) {}
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  ~EventSet() {
    for (CUevent e : events_) ctx_.api().cuEventDestroy_(e);
  }
  Result<CUevent> make() {
    CUevent e = nullptr;
    LJ_CU(ctx_.driver(), cuEventCreate, &e, CU_EVENT_DEFAULT);
    events_.push_back(e);
    return e;
  }

 private:
  const Context& ctx_;
  std::vector<CUevent> events_;
};

}  // namespace

std::string Timing::format() const {
  return fmt::format("{:.4f} ms median (p10 {:.4f}, p90 {:.4f}, min {:.4f}, max {:.4f}, n={})", median_ms, p10_ms,
                     p90_ms, min_ms, max_ms, samples_ms.size());
}

Timing summarize(std::vector<double> samples_ms) {
  Timing t;
  t.samples_ms = samples_ms;
  std::sort(samples_ms.begin(), samples_ms.end());
  if (samples_ms.empty()) return t;
  t.min_ms = samples_ms.front();
  t.max_ms = samples_ms.back();
  t.median_ms = quantile(samples_ms, 0.5);
  t.p10_ms = quantile(samples_ms, 0.1);
  t.p90_ms = quantile(samples_ms, 0.9);
  return t;
}

RooflinePoint roofline(double flops, double bytes, double seconds, double peak_flops_per_s, double peak_bytes_per_s) {
  RooflinePoint r;
  if (seconds <= 0) return r;
  const double intensity = bytes > 0 ? flops / bytes : 0;
  r.compute_bound = flops > 0 && (bytes <= 0 || intensity * peak_bytes_per_s > peak_flops_per_s);
  if (r.compute_bound) r.fraction = flops / seconds / peak_flops_per_s;
  else if (flops > 0) r.fraction = flops / seconds / (intensity * peak_bytes_per_s);
  else r.fraction = bytes / seconds / peak_bytes_per_s;
  return r;
}

int rotations_for(size_t bytes_per_set, size_t l2_bytes) {
  if (bytes_per_set == 0) return 1;
  const size_t n = (2 * l2_bytes + bytes_per_set - 1) / bytes_per_set;
  return static_cast<int>(std::clamp<size_t>(n, 1, 64));
}

Result<Timing> time_on_stream(Stream& stream, const std::function<Status(int rotation)>& body,
                              const TimerOptions& options) {
  if (options.repeats < 1 || options.rotations < 1 || options.warmup < 0) {
    return Error{fmt::format("bad timer options: warmup {}, repeats {}, rotations {}", options.warmup,
                             options.repeats, options.rotations)};
  }
  const Context& ctx = stream.context();
  const Driver& drv = ctx.driver();
  for (int i = 0; i < options.warmup; ++i) LJ_RT_TRY(body(i % options.rotations));
  LJ_RT_TRY(stream.synchronize());

  // All events are recorded first and read at the end, so the host never waits between repeats and
  // the GPU runs them back to back.
  EventSet events(ctx);
  std::vector<std::pair<CUevent, CUevent>> marks;
  for (int i = 0; i < options.repeats; ++i) {
    LJ_RT_ASSIGN(CUevent start, events.make());
    LJ_RT_ASSIGN(CUevent stop, events.make());
    marks.emplace_back(start, stop);
  }
  for (int i = 0; i < options.repeats; ++i) {
    LJ_CU(drv, cuEventRecord, marks[static_cast<size_t>(i)].first, stream.handle());
    LJ_RT_TRY(body(i % options.rotations));
    LJ_CU(drv, cuEventRecord, marks[static_cast<size_t>(i)].second, stream.handle());
  }
  LJ_CU(drv, cuEventSynchronize, marks.back().second);
  std::vector<double> samples;
  for (const auto& [start, stop] : marks) {
    float ms = 0;
    LJ_CU(drv, cuEventElapsedTime, &ms, start, stop);
    samples.push_back(ms);
  }
  return summarize(std::move(samples));
}

Result<std::vector<Timing>> time_steps_on_stream(Stream& stream, const std::vector<std::function<Status()>>& steps,
                                                 const TimerOptions& options) {
  if (options.repeats < 1 || options.warmup < 0 || steps.empty()) {
    return Error{fmt::format("bad timer options: warmup {}, repeats {}, {} steps", options.warmup, options.repeats, steps.size())};
  }
  const Context& ctx = stream.context();
  const Driver& drv = ctx.driver();
  for (int i = 0; i < options.warmup; ++i)
    for (const auto& step : steps) LJ_RT_TRY(step());
  LJ_RT_TRY(stream.synchronize());

  // marks[r][s] is recorded before step s of repeat r, marks[r][steps] after the last step.
  EventSet events(ctx);
  std::vector<std::vector<CUevent>> marks(static_cast<size_t>(options.repeats));
  for (auto& row : marks)
    for (size_t s = 0; s <= steps.size(); ++s) {
      LJ_RT_ASSIGN(CUevent e, events.make());
      row.push_back(e);
    }
  for (auto& row : marks) {
    for (size_t s = 0; s < steps.size(); ++s) {
      LJ_CU(drv, cuEventRecord, row[s], stream.handle());
      LJ_RT_TRY(steps[s]());
    }
    LJ_CU(drv, cuEventRecord, row.back(), stream.handle());
  }
  LJ_CU(drv, cuEventSynchronize, marks.back().back());
  std::vector<Timing> out;
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<double> samples;
    for (const auto& row : marks) {
      float ms = 0;
      LJ_CU(drv, cuEventElapsedTime, &ms, row[s], row[s + 1]);
      samples.push_back(ms);
    }
    out.push_back(summarize(std::move(samples)));
  }
  return out;
}

}  // namespace lj::rt
