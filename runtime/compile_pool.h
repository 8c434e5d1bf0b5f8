// The pool both compile paths share (compile_parallel's threads, compile_in_workers' worker
// drivers): `threads` threads, the caller's among them, each pulling the next job, results in job
// order, `done` told of each as it finishes. Jobs are taken longest first (estimated_compile_cost),
// the classic greedy for scheduling on identical machines: a big kernel started last would leave the
// other threads idle while it finishes.
#pragma once

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/nvrtc.h"

namespace lj::rt {

/// `make()` gives each thread its compiler (a callable taking a job, returning its result): the
/// in-process compile, or a driver of one worker process.
template <class MakeCompiler>
std::vector<Result<CompiledProgram>> run_compile_pool(std::span<const CompileJob> jobs, int threads, const CompileDone& done,
                                                      MakeCompiler make) {
  threads = std::clamp<int>(threads, 1, static_cast<int>(std::max<size_t>(jobs.size(), 1)));
  std::vector<std::optional<Result<CompiledProgram>>> slots(jobs.size());
  std::vector<size_t> order(jobs.size());
  {
    std::vector<size_t> cost(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      order[i] = i;
      cost[i] = estimated_compile_cost(jobs[i]);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  }
  std::atomic<size_t> next{0};
  auto drive = [&] {
    auto compiler = make();
    for (size_t n = next.fetch_add(1); n < jobs.size(); n = next.fetch_add(1)) {
      const size_t i = order[n];
      slots[i].emplace(compiler(jobs[i]));
      if (done) done(i, *slots[i]);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back(drive);
  drive();
  for (std::thread& t : pool) t.join();
  std::vector<Result<CompiledProgram>> out;
  out.reserve(jobs.size());
  for (auto& r : slots) out.push_back(std::move(*r));
  return out;
}

}  // namespace lj::rt
