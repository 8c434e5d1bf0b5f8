#include "runtime/autotune.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "runtime/fill.h"
#include "runtime/module.h"

namespace lj::rt {

std::string_view to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::kTimed: return "timed";
    case CandidateStatus::kCompileFailed: return "compile failed";
    case CandidateStatus::kLoadFailed: return "load failed";
    case CandidateStatus::kLaunchFailed: return "launch failed";
    case CandidateStatus::kMismatch: return "wrong result";
    case CandidateStatus::kOverBudget: return "over budget";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// First line of a (possibly long) message: enough to say why in a one-line progress report.
std::string first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Poisons the outputs, runs `kernel` once on arg set 0 and reads every output back.
Result<std::vector<std::vector<unsigned char>>> run_once(Stream& stream, Kernel& kernel, const TuneCandidate& c,
                                                          const TuneProblem& p) {
  for (const TuneOutput& o : p.outputs) LJ_RT_TRY(fill_poison(stream, o.ptr, o.bytes, o.element_bytes));
  KernelArgs args = c.arg_sets.empty() ? p.arg_sets[0] : c.arg_sets[0];
  LJ_RT_TRY(launch(stream, kernel, c.launch, args));
  std::vector<std::vector<unsigned char>> out;
  for (const TuneOutput& o : p.outputs) {
    out.emplace_back(o.bytes);
    LJ_RT_TRY(copy_to_host(stream, out.back().data(), o.ptr, o.bytes));
  }
  LJ_RT_TRY(stream.synchronize());
  return out;
}

}  // namespace

Result<TuneReport> autotune(Stream& stream, const TuneProblem& p, const AutotuneOptions& options) {
  if (p.candidates.empty()) return Error{"autotune: no candidates (the default config must be candidate 0)"};
  if (p.arg_sets.empty()) return Error{"autotune: no argument set"};
  if (!p.compare) return Error{"autotune: no output comparison"};
  const Clock::time_point t0 = Clock::now();
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  TuneReport report;
  report.results.resize(p.candidates.size());
  const size_t n = p.candidates.size();

  // 1. Compile everything at once: NVRTC dominates a tuning run.
  std::vector<CompileJob> jobs;
  for (const TuneCandidate& c : p.candidates) jobs.push_back(c.job);
  say(fmt::format("compiling {} candidates", n));
  std::vector<Result<CompiledProgram>> programs =
      options.compiler ? options.compiler(jobs) : compile_parallel(jobs, options.compile_workers);
  if (programs.size() != n) return Error{fmt::format("autotune: the compiler returned {} results for {} jobs", programs.size(), n)};

  // 2. Load, run once, verify against the default. Modules stay loaded for timing.
  std::vector<std::optional<Module>> modules(n);
  std::vector<std::optional<Kernel>> kernels(n);
  std::vector<std::vector<std::vector<unsigned char>>> outputs(n);
  size_t compiled = 0;
  for (size_t i = 0; i < n; ++i) {
    CandidateResult& r = report.results[i];
    const TuneCandidate& c = p.candidates[i];
    r.config = c.config;
    if (!programs[i].ok()) {
      r.status = CandidateStatus::kCompileFailed;
      r.detail = programs[i].message();
      say(fmt::format("  [{}] {}: compile failed: {}", i, c.config, first_line(r.detail)));
      continue;
    }
    r.compile_seconds = programs[i]->seconds;
    ++compiled;
    auto mod = Module::load(stream.context(), programs[i]->image());
    if (!mod.ok()) {
      r.status = CandidateStatus::kLoadFailed;
      r.detail = mod.message();
      continue;
    }
    auto kern = mod->kernel(c.kernel_name);
    if (!kern.ok()) {
      r.status = CandidateStatus::kLoadFailed;
      r.detail = kern.message();
      continue;
    }
    modules[i].emplace(std::move(*mod));
    kernels[i].emplace(*kern);
    auto out = run_once(stream, *kernels[i], c, p);
    if (!out.ok()) {
      r.status = CandidateStatus::kLaunchFailed;
      r.detail = out.message();
      say(fmt::format("  [{}] {}: launch failed: {}", i, c.config, first_line(r.detail)));
      continue;
    }
    outputs[i] = std::move(*out);
    if (i > 0 && !outputs[0].empty()) {
      for (size_t o = 0; o < p.outputs.size(); ++o) {
        std::string why;
        if (!p.compare(o, outputs[0][o], outputs[i][o], &why)) {
          r.status = CandidateStatus::kMismatch;
          r.detail = fmt::format("output {} differs from the default config's: {}", o, why);
          say(fmt::format("  [{}] {}: rejected, {}", i, c.config, r.detail));
          break;
        }
      }
      outputs[i].clear();  // only the default's outputs are kept: a candidate's may be a whole KV cache
      if (r.status == CandidateStatus::kMismatch) continue;
    }
    r.status = CandidateStatus::kTimed;  // provisional: verified, timing below
  }
  if (report.results[0].status != CandidateStatus::kTimed)
    return Error{fmt::format("autotune: the default config '{}' does not work ({}): {}", p.candidates[0].config,
                             to_string(report.results[0].status), report.results[0].detail)};
  say(fmt::format("compiled {}/{}, verified against the default", compiled, n));

  // 3. Time the verified candidates, default first, until the budget runs out: in rounds, each round
  // a few repeats of every candidate, so that the drop of the SM clock under sustained tensor-core
  // load (1980 -> ~1700 MHz seen on an H200 within a second) is shared by all candidates instead of
  // charged to those timed last. A candidate's timing is over the samples of all its rounds.
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> samples(n);
  std::vector<std::vector<KernelArgs>> args(n);
  for (size_t i = 0; i < n; ++i) args[i] = p.candidates[i].arg_sets.empty() ? p.arg_sets : p.candidates[i].arg_sets;
  for (int round = 0; round < kRounds; ++round) {
    TimerOptions timer = options.timer;
    timer.rotations = static_cast<int>(p.arg_sets.size());
    timer.warmup = round == 0 ? options.timer.warmup : 1;
    timer.repeats = std::max(1, (options.timer.repeats + kRounds - 1) / kRounds);
    // Each round starts further down the list (the default first in the first), so that no candidate
    // always follows the same one or always meets the clock at the same point of a round.
    for (size_t step = 0; step < n; ++step) {
      const size_t i = (step + static_cast<size_t>(round) * n / kRounds) % n;
      CandidateResult& r = report.results[i];
      if (r.status != CandidateStatus::kTimed) continue;
      if (i > 0 && options.budget_seconds > 0 && seconds_since(t0) > options.budget_seconds) {
        if (samples[i].empty()) r.status = CandidateStatus::kOverBudget;  // else: timed in the rounds before
        continue;
      }
      Kernel& k = *kernels[i];
      auto t = time_on_stream(
          stream, [&](int rotation) { return launch(stream, k, p.candidates[i].launch, args[i][static_cast<size_t>(rotation)]); }, timer);
      if (!t.ok()) {
        if (i == 0) return Error{fmt::format("autotune: timing the default config failed: {}", t.message())};
        r.status = CandidateStatus::kLaunchFailed;
        r.detail = t.message();
        continue;
      }
      samples[i].insert(samples[i].end(), t->samples_ms.begin(), t->samples_ms.end());
    }
    // The standings after this round.
    report.best = -1;
    double best_ms = 0;
    size_t timed = 0;
    for (size_t i = 0; i < n; ++i) {
      CandidateResult& r = report.results[i];
      if (r.status != CandidateStatus::kTimed || samples[i].empty()) continue;
      r.timing = summarize(samples[i]);
      ++timed;
      if (report.best < 0 || r.timing.median_ms < best_ms) {
        report.best = static_cast<int>(i);
        best_ms = r.timing.median_ms;
      }
    }
    say(fmt::format("round {}/{}: timed {}/{}, best {:.4f} ms: {}", round + 1, kRounds, timed, compiled, best_ms,
                    p.candidates[static_cast<size_t>(report.best)].config));
    if (options.budget_seconds > 0 && seconds_since(t0) > options.budget_seconds) break;
  }
  report.seconds = seconds_since(t0);
  return report;
}

}  // namespace lj::rt
