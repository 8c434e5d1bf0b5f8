// `layerjit tune`: autotunes the plan's matmul and attention groups on this machine's GPU and records the winners
// in the tuning DB.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "cache/kernel_cache.h"
#include "cache/tuning_db.h"
#include "runtime/context.h"
#include "tools/tp_report.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tune/tune_group.h"

namespace lj::cli {

const char* const kTuneUsage =
    "usage: layerjit tune [FILE] [--graph NAME] --bind T=4096 [--group N] [--budget SECONDS] [--no-cublaslt] [--no-fuse] [--all] [--tp N] [--quiet]\n"
    "\n"
    "Autotunes every matmul and prefill attention group of the plan (or only group N) on GPU 0: every\n"
    "kernel config the pruner accepts for a matmul's shape, every attention tile set the emitter\n"
    "accepts (mma.sync and, on sm_90a, wgmma), is compiled (in parallel, through the kernel cache), run on\n"
    "random inputs, checked against the default config's output, and timed (CUDA events, median of 30\n"
    "repeats, inputs rotated past L2). The winner, its time, spread and the runner-up are stored in the\n"
    "tuning DB (see `layerjit cache ls`), keyed by the group, the symbol bucket (values rounded up to a\n"
    "power of two: T=3000 is tuned at T=4096 and serves every T in (2048, 4096]), the arch and the\n"
    "driver. A new run replaces a stored winner only when it is clearly faster (outside the spread and\n"
    "2%). --budget bounds each group's tuning time; candidates past it are reported as not timed.\n"
    "Each matmul's bare GEMM (no epilogue) is also timed in cuBLASLt, for reference only: it never runs\n"
    "in a plan, and libcublasLt is loaded at run time where present (LAYERJIT_CUBLASLT names the library;\n"
    "without one the reference is reported missing). --no-cublaslt skips it. --all lists every candidate,\n"
    "fastest first: its median, spread and compile time, or why it was not timed.\n"
    "--tp N: tunes the rank graph of an N-way tensor-parallel group on GPU 0 (`layerjit plan --tp N`):\n"
    "its winners serve every rank of `layerjit run --tp N`, whose kernels are the same on each GPU.\n"
    "Needs a CUDA driver and GPU.\n";

namespace {

std::string describe(const Graph& g, const FusionGroup& grp) {
  const Node& n = g.node(anchor_node(g, grp));
  std::string ops;
  for (ValueId v : n.operands) ops += fmt::format("{}%{}: {}", ops.empty() ? "" : ", ", g.value(v).name, g.value(v).type.str());
  return fmt::format("group {} %{} = {}({})", grp.id, g.value(n.results[0]).name, op_name(n.kind), ops);
}

// Every candidate, the timed ones fastest first, then the others in candidate order with why.
void print_candidates(const rt::TuneReport& rep) {
  std::vector<const rt::CandidateResult*> timed, other;
  for (const rt::CandidateResult& c : rep.results) (c.status == rt::CandidateStatus::kTimed ? timed : other).push_back(&c);
  std::stable_sort(timed.begin(), timed.end(), [](auto* a, auto* b) { return a->timing.median_ms < b->timing.median_ms; });
  const double best = timed.empty() ? 0 : timed.front()->timing.median_ms;
  for (const rt::CandidateResult* c : timed)
    std::printf("    %.4f ms  %5.2fx  spread %4.1f%%  compiled in %.2f s  %s\n", c->timing.median_ms, c->timing.median_ms / best,
                100 * c->timing.spread(), c->compile_seconds, c->config.c_str());
  for (const rt::CandidateResult* c : other)
    std::printf("    not timed (%s): %s%s%s\n", std::string(rt::to_string(c->status)).c_str(), c->config.c_str(),
                c->detail.empty() ? "" : ": ", c->detail.substr(0, c->detail.find('\n')).c_str());
}

}  // namespace

int cmd_tune(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  std::optional<int> group;
  double budget = 0;
  bool quiet = false, cublaslt = true, all = false;
  CommandLine cl("tune", kTuneUsage);
  cl.graph_options(o);
  cl.option("--group", [&group](const std::string& v) { group = parse_group_number(v); }, "N", "only this fusion group");
  cl.option("--budget", [&budget](const std::string& v) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), budget);
    if (ec != std::errc() || p != v.data() + v.size() || !(budget > 0))
      throw UsageError{"--budget expects a positive number of seconds, got '" + v + "'"};
  }, "SECONDS", "each group's tuning time at most");
  cl.flag("--no-cublaslt", [&cublaslt] { cublaslt = false; }, "do not time each matmul's bare GEMM in cuBLASLt");
  cl.flag("--cublaslt", [&cublaslt] { cublaslt = true; }, "time it (the default)");
  cl.flag("--all", all, "list every candidate's time (or why it has none), fastest first");
  cl.flag("--quiet", quiet, "no progress lines");
  int tp = 1;
  cl.option("--tp", [&tp](const std::string& v) { tp = parse_tp(v); }, "N", "the rank graph of an N-way tensor-parallel group (1-64)");
  fusion_flags(cl, fo);
  if (!cl.parse(args)) return kExitOk;
  Module m = load_module(o);
  shard_module(m, tp);
  const Graph& source = single_graph(m);
  for (const std::string& s : source.symbols())
    if (!o.bindings.get(s))
      throw UsageError{fmt::format("@{} has the symbol {}: tuning runs kernels, so give its value with --bind {}=...", source.name(), s, s)};
  const Lowered lowered = jit::plan(source, fo, o.bindings);
  const Graph& g = *lowered.graph;
  const FusionPlan& plan = lowered.plan;
  std::vector<const FusionGroup*> todo;
  for (const FusionGroup& grp : plan.groups) {
    if (group && grp.id != *group) continue;
    const std::string why = tune::untunable_reason(g, grp);
    if (why.empty()) todo.push_back(&grp);
    else if (group) throw UserError(why);
  }
  if (group && todo.empty())
    throw UserError(fmt::format("@{} has {} fusion groups (0..{}); there is no group {}", g.name(), plan.groups.size(),
                                plan.groups.size() - 1, *group));
  if (todo.empty()) {
    std::printf("@%s has no matmul or prefill attention groups: nothing to tune\n", g.name().c_str());
    return kExitOk;
  }

  auto ctx = rt::Context::get(0);
  if (!ctx.ok()) throw UserError(ctx.message());
  auto stream = rt::Stream::create(**ctx);
  if (!stream.ok()) throw UserError(stream.message());
  cache::KernelCache kcache = cache::KernelCache::open_default();
  auto db = cache::TuningDb::open(cache::cache_options_from_env());
  if (!db->enabled()) std::fprintf(stderr, "warning: the tuning DB is disabled (%s): results are not stored\n", db->disabled_reason().c_str());

  tune::TuneSettings settings;
  settings.kernel_cache = &kcache;
  settings.db = db.get();
  settings.autotune.budget_seconds = budget;
  settings.reference_cublaslt = cublaslt;
  if (!quiet) settings.autotune.progress = [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
  std::printf("device: %s; tuning %zu group(s) of @%s\n", (*ctx)->info().name.c_str(), todo.size(), g.name().c_str());
  for (const FusionGroup* grp : todo) {
    std::printf("\n%s\n", describe(g, *grp).c_str());
    std::fflush(stdout);
    auto r = tune::tune_group(*stream, g, *grp, o.bindings, settings);
    if (!r.ok()) throw UserError(fmt::format("tuning group {} failed: {}", grp->id, r.message()));
    const rt::TuneReport& rep = r->report;
    int timed = 0, rejected = 0, failed = 0, skipped = 0;
    for (const auto& c : rep.results) {
      switch (c.status) {
        case rt::CandidateStatus::kTimed: ++timed; break;
        case rt::CandidateStatus::kMismatch: ++rejected; break;
        case rt::CandidateStatus::kOverBudget: ++skipped; break;
        default: ++failed; break;
      }
    }
    const double def_ms = rep.results[0].timing.median_ms;
    const auto& best = rep.results[static_cast<size_t>(rep.best)];
    std::printf("  bucket %s: %zu candidates, %d timed, %d wrong result, %d failed, %d over budget (%.1f s)\n",
                r->key.symbol_bucket.c_str(), rep.results.size(), timed, rejected, failed, skipped, rep.seconds);
    if (!r->pruned.empty()) {
      std::printf("  %zu config(s) left out before compiling (the family's rules):\n", r->pruned.size());
      for (const std::string& p : r->pruned) std::printf("    %s\n", p.c_str());
    }
    if (all) print_candidates(rep);
    std::printf("  default  %.4f ms  %s\n", def_ms, rep.results[0].config.c_str());
    std::printf("  best     %.4f ms  %s  (%.2fx the default)\n", best.timing.median_ms, best.config.c_str(), def_ms / best.timing.median_ms);
    if (r->reference_ms)
      std::printf("  cuBLASLt %.4f ms  (reference only: the bare GEMM, no epilogue; cuBLASLt / best time %.2f)\n", *r->reference_ms,
                  *r->reference_ms / best.timing.median_ms);
    else if (!r->reference_note.empty())
      std::printf("  cuBLASLt not measured: %s\n", r->reference_note.c_str());
    if (r->record) {
      if (r->record->ok)
        std::printf("  stored   %s (%s)\n", r->record->record.winner.config.c_str(), std::string(cache::to_string(r->record->decision)).c_str());
      else
        std::printf("  not stored: %s\n", r->record->error.c_str());
    }
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace lj::cli
