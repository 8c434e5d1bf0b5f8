// The autotuner's measuring core, independent of what is being tuned: given candidate kernels that
// share one parameter list (candidate 0 is the default config, the reference), it compiles them all
// in parallel, runs each once on the same inputs and compares its outputs with the default's, then
// times the survivors (warm-up, CUDA events, median, inputs rotated past L2) in interleaved rounds,
// so that a clock that drops under sustained load slows all of them alike. A candidate that fails
// to compile, to load, to launch or to match is recorded with the reason and skipped — never fatal.
//
// What a "config" means, and how outputs are compared, belongs to the caller (tune/ for matmul
// groups); this layer sees sources, launch configs and bytes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runtime/launch.h"
#include "runtime/memory.h"
#include "runtime/nvrtc.h"
#include "runtime/timer.h"

namespace lj::rt {

struct TuneCandidate {
  std::string config;       ///< the caller's text for it (stored in the tuning DB)
  CompileJob job;           ///< its NVRTC job (source, headers, target)
  std::string kernel_name;  ///< the extern "C" entry point
  LaunchConfig launch;      ///< grid, block, dynamic shared memory
  /// Its own argument sets, laid out like the problem's (same count, same buffers) where its
  /// parameter list differs (a kernel reading through TMA tensor maps); empty: the problem's.
  std::vector<KernelArgs> arg_sets;
};

/// One buffer the kernels write: poisoned before every verification run, compared afterwards.
struct TuneOutput {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  size_t element_bytes = 2;  ///< poison pattern width
};

struct TuneProblem {
  std::vector<TuneCandidate> candidates;  ///< [0]: the default, the reference the others must match
  /// Argument sets with identical layout: set 0 is verified; timing rotates through all of them so
  /// that repeats do not find their inputs in L2.
  std::vector<KernelArgs> arg_sets;
  std::vector<TuneOutput> outputs;  ///< the buffers arg set 0 writes
  /// Is `got` (a candidate's bytes of output `index`) acceptable given the default's `want`? Sets
  /// `why` (first bad element, values) when not.
  std::function<bool(size_t index, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got, std::string* why)>
      compare;
};

enum class CandidateStatus { kTimed, kCompileFailed, kLoadFailed, kLaunchFailed, kMismatch, kOverBudget };
std::string_view to_string(CandidateStatus s);

struct CandidateResult {
  std::string config;
  CandidateStatus status = CandidateStatus::kOverBudget;
  std::string detail;  ///< why it was skipped (compile log excerpt, launch error, first mismatch)
  Timing timing;       ///< kTimed only
  double compile_seconds = 0;
};

struct TuneReport {
  std::vector<CandidateResult> results;  ///< in candidate order
  int best = -1;                         ///< index of the fastest timed candidate (-1: none)
  double seconds = 0;                    ///< wall time of the whole run
};

struct AutotuneOptions {
  /// Wall-clock budget in seconds for timing (0: none). Candidates not reached are kOverBudget; the
  /// default is always measured.
  double budget_seconds = 0;
  TimerOptions timer{5, 30, 1};  ///< warm-up before the first round; repeats spread over the rounds
  int compile_workers = 0;  ///< 0: default_compile_workers()
  /// Progress lines ("compiled 12/28", "timed 5/28, best 0.412 ms: mma ..."), for the terminal.
  std::function<void(const std::string&)> progress;
  /// Compiles the jobs (in order); unset: compile_parallel. The tuner's caller passes the kernel
  /// cache here so that a second tuning run compiles nothing.
  std::function<std::vector<Result<CompiledProgram>>(std::span<const CompileJob>)> compiler;
};

/// Runs the tuning. Fails only if the default candidate itself cannot be compiled, run or timed (the
/// reference is missing) or the problem is malformed.
Result<TuneReport> autotune(Stream& stream, const TuneProblem& problem, const AutotuneOptions& options = {});

}  // namespace lj::rt
