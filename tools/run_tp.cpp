#include "tools/run_tp.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "exec/tp_executable.h"
#include "jit/compile_kernels.h"
#include "layerjit/reference.h"
#include "runtime/device_info.h"
#include "runtime/driver.h"
#include "runtime/nccl.h"
#include "runtime/timer.h"
#include "tools/cli.h"
#include "tools/run_inputs.h"
#include "tools/tp_report.h"

namespace lj::cli {

namespace {

double tolerance(DType t) {
  switch (t) {
    case DType::BF16: return 1.0 / 32;
    case DType::F16: return 1.0 / 256;
    case DType::F32: return 1e-4;
    default: return 0;
  }
}

// The largest |a - b| over the largest |b|; NaN where their NaNs differ.
double relative_diff(const HostTensor& a, const HostTensor& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < b.data.size(); ++i) {
    if (std::isnan(a.data[i]) != std::isnan(b.data[i])) return NAN;
    if (std::isnan(b.data[i])) continue;
    worst = std::max(worst, std::fabs(a.data[i] - b.data[i]));
    scale = std::max(scale, std::fabs(b.data[i]));
  }
  return scale > 0 ? worst / scale : worst;
}

std::unique_ptr<exec::TpExecutable> build_tp(const Graph& g, const Bindings& b, int tp, bool fold, bool quiet) {
  exec::TpOptions o;
  o.tp = tp;
  o.shard.fold_residuals = fold;
  o.build.hint = b;
  if (!quiet)
    o.build.progress = [tp](const jit::CompileProgress& p) {
      if (!p.cache_hit) std::fprintf(stderr, "  tp=%d [%zu/%zu] %s %s (%.2f s)\n", tp, p.done, p.total, p.name.c_str(), p.ok ? "compiled" : "FAILED", p.seconds);
    };
  return must(exec::TpExecutable::build(g, o), fmt::format("build the graph at tp = {}", tp).c_str());
}

void upload_all(exec::TpExecutable& e, const Graph& g, const std::map<std::string, HostTensor>& host, const Bindings& b) {
  for (ValueId v : g.inputs()) {
    const std::string& name = g.value(v).name;
    must(e.upload(name, encoded(host.at(name), name), b), "upload an input");
  }
}

}  // namespace

void tp_flags(CommandLine& cl, TpRunOptions& o) {
  cl.option("--tp", [&o](const std::string& v) { o.tp = parse_tp(v); }, "N", "tensor parallelism over N GPUs (1-64)");
  cl.flag("--no-residual-fold", [&o] { o.fold_residuals = false; }, "with --tp: residual adds after the all_reduces (`layerjit plan --help`)");
}

int run_tp(const Graph& g, const Bindings& b, const TpRunOptions& o) {
  ShardOptions so;
  so.fold_residuals = o.fold_residuals;
  const ShardedGraph preview = shard(g, o.tp, so);  // refusals (what does not divide) before any GPU work
  // What the run needs, said before anything is built: N GPUs and NCCL.
  const rt::Driver* driver = must(rt::Driver::get(), fmt::format("--tp {} needs {} GPUs", o.tp, o.tp).c_str());
  const int gpus = must(rt::device_count(*driver), "count the GPUs");
  if (gpus < o.tp) throw UserError(fmt::format("--tp {} needs {} GPUs, one per rank; this machine has {}", o.tp, o.tp, gpus));
  const rt::Nccl* nccl = must(rt::nccl(), "load NCCL");
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<exec::TpExecutable> one = build_tp(g, b, 1, o.fold_residuals, o.quiet);
  std::unique_ptr<exec::TpExecutable> many = build_tp(g, b, o.tp, o.fold_residuals, o.quiet);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t kernels = 0, reduces = 0;
  for (const FusionGroup& grp : many->rank(0).plan().groups) (grp.kind == GroupKind::AllReduce ? reduces : kernels) += grp.prepare ? 0 : 1;
  std::printf("@%s at tp = %d on %d x %s (NCCL %s, %s): rank 0 runs %zu kernels and %zu all_reduces per call%s; tp = 1: %zu kernels; "
              "built in %.1f s\n",
              g.name().c_str(), o.tp, o.tp, many->context(0).info().name.c_str(), nccl->version_str().c_str(), nccl->path.c_str(), kernels,
              reduces, o.fold_residuals ? " (residual adds folded before them)" : "", one->rank(0).launches_per_run(), build_s);
  std::fputs(tp_summary(preview, b).c_str(), stdout);

  const std::map<std::string, HostTensor> host = seeded_host_inputs(g, b, o.seed, o.weights);
  upload_all(*one, g, host, b);
  upload_all(*many, g, host, b);
  must(one->run(b), "run at tp = 1");
  must(many->run(b), fmt::format("run at tp = {}", o.tp).c_str());

  bool ok = true;
  std::vector<HostTensor> got_one, got_many;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    got_one.push_back(must(one->download(i, b), "download an output"));
    got_many.push_back(must(many->download(i, b), "download an output"));
  }
  // One CUDA graph per rank (the NCCL calls in it) and one of the all_reduces alone.
  must(one->capture(b), "capture at tp = 1");
  must(many->capture(b), fmt::format("capture at tp = {}", o.tp).c_str());
  must(many->capture_collectives(b), "capture the all_reduces");
  std::vector<double> rounds[3];
  const std::function<rt::Status(int)> bodies[3] = {[&](int) { return one->replay(); }, [&](int) { return many->replay(); },
                                                     [&](int) { return many->replay_collectives(); }};
  for (int round = 0; round < 5; ++round)
    for (int v = 0; v < 3; ++v) {
      rt::TimerOptions to;
      to.warmup = 3;
      to.repeats = 10;
      exec::TpExecutable& e = v == 0 ? *one : *many;
      rounds[v].push_back(must(rt::time_on_stream(e.stream(0), bodies[v], to), "time").median_ms);
      must(e.synchronize(), "time");
    }
  const double ms_one = rt::summarize(rounds[0]).median_ms, ms_many = rt::summarize(rounds[1]).median_ms,
               ms_reduce = rt::summarize(rounds[2]).median_ms;
  std::printf("time per call (each rank's run as one CUDA graph, median of 5 interleaved rounds of 10, rank 0's stream):\n");
  std::printf("  tp = 1: %.4f ms\n  tp = %d: %.4f ms (%.2fx tp = 1's time, %.2fx its speed)\n  tp = %d all_reduces alone: %.4f ms "
              "(%zu per call)\n",
              ms_one, o.tp, ms_many, ms_many / ms_one, ms_one / ms_many, o.tp, ms_reduce, reduces);

  if (o.check) {
    must(many->poison_outputs(b), "poison the outputs");
    must(many->replay(), "replay");
    must(many->synchronize(), "replay");
    for (size_t i = 0; i < g.outputs().size(); ++i) {  // the replays must have written what the eager runs did
      const ValueInfo& info = g.value(g.outputs()[i]);
      const HostTensor again = must(many->download(i, b), "download an output");
      if (again.data != got_many[i].data) {
        ok = false;
        std::printf("  %%%-14s tp = %d CUDA graph replays differ from the eager run FAIL\n", info.name.c_str(), o.tp);
      }
      if (!many->sharded().outputs[i].split())
        for (int r = 1; r < o.tp; ++r)
          if (must(many->download(i, b, r), "download an output").data != got_many[i].data) {
            ok = false;
            std::printf("  %%%-14s differs between rank 0 and rank %d FAIL\n", info.name.c_str(), r);
          }
    }
    double flops = 0;
    for (const FusionGroup& grp : one->rank(0).plan().groups) flops += group_cost(one->rank(0).graph(), grp, b).flops;
    const bool with_ref = o.reference == "always" || (o.reference == "auto" && flops <= 5e9);
    std::vector<HostTensor> ref;
    if (with_ref) ref = run_reference(g, host, b);
    else std::printf("CPU reference: skipped (%.1f GFLOP; --reference always to force)\n", flops / 1e9);
    auto report = [&](const std::string& name, const char* what, DType t, double rel) {
      const bool pass = !std::isnan(rel) && rel <= tolerance(t);
      ok = ok && pass;
      std::printf("  %%%-14s %-22s relative max |diff| %.3g (limit %.3g) %s\n", name.c_str(), what, rel, tolerance(t), pass ? "ok" : "FAIL");
    };
    const std::string many_vs_one = fmt::format("tp = {} vs tp = 1", o.tp), many_vs_cpu = fmt::format("tp = {} vs CPU", o.tp);
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const ValueInfo& info = g.value(g.outputs()[i]);
      report(info.name, many_vs_one.c_str(), info.type.dtype, relative_diff(got_many[i], got_one[i]));
      if (with_ref) {
        report(info.name, many_vs_cpu.c_str(), info.type.dtype, relative_diff(got_many[i], ref[i]));
        report(info.name, "tp = 1 vs CPU", info.type.dtype, relative_diff(got_one[i], ref[i]));
      }
    }
    std::printf("%s\n", ok ? "PASS" : "FAIL");
  }
  return ok ? kExitOk : kExitUserError;
}

}  // namespace lj::cli
