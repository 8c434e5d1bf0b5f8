// `layerjit bench`: where a graph's time goes on this GPU. The device's ceilings measured in the same
// run, each kernel of the fused plan against the roofline at its arithmetic intensity, and the whole
// graph unfused, fused and as one CUDA graph with its launches and modelled HBM traffic (the
// fusion table, measured).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "exec/executable.h"
#include "layerjit/text.h"
#include "runtime/fill.h"
#include "runtime/timer.h"
#include "tools/run_tp.h"
#include "tools/tp_report.h"
#include "tools/args.h"
#include "tools/bench_report.h"
#include "tools/commands.h"
#include "tools/run_inputs.h"

namespace lj::cli {

const char* const kBenchUsage =
    "usage: layerjit bench [FILE] [--graph NAME] --bind T=4096 [--seed N] [--no-arch-specific]\n"
    "                      [--no-one-row-prologues] [--packed-weights] [--json FILE] [--csv FILE] [--roofline FILE.svg]\n"
    "                      [--tp N [--no-residual-fold]]\n"
    "\n"
    "Measures one graph on GPU 0, on the random inputs `layerjit run` makes from --seed (default 1):\n"
    "  1. the device's ceilings, in this run: HBM bandwidth from a 1 GiB device-to-device copy (bytes\n"
    "     read + written per second) and tensor-core throughput from layerjit's own GEMM on an 8192 x\n"
    "     8192 x 8192 bf16 product (the best its kernels reach here; a vendor library may reach more);\n"
    "  2. every kernel of the fused plan launched alone over the buffers a full run left (CUDA events):\n"
    "     time, TFLOP/s, GB/s of the bytes the planner says the group must move, the fraction of the\n"
    "     roofline min(compute, intensity x bandwidth) it reaches and which ceiling bounds it; and each\n"
    "     kernel's time where it runs after the one before it (all in order, an event between them).\n"
    "     Alone and in order alternate in 5 rounds of 7 (median of the round medians), so clock\n"
    "     changes under a power cap hit both alike;\n"
    "  3. the whole graph unfused, fused and fused as one CUDA graph (5 interleaved rounds of 7\n"
    "     calls), with kernel launches and modelled HBM bytes per call, and the fraction of the floor\n"
    "     those bytes set at the copy's bandwidth (1.0: the plan moves its bytes as fast as a copy).\n"
    "--json and --csv write every row of the tables (and the ceilings) to FILE; --roofline draws each\n"
    "kernel against the measured ceilings (log-log, an SVG). --no-arch-specific and\n"
    "--no-one-row-prologues and --packed-weights build the fused plan as `layerjit run` does. Needs a GPU.\n"
    "--tp N: tensor parallelism over GPUs 0..N-1 instead (docs/tp.md): the layer at tp = 1 and tp = N,\n"
    "each rank's run one CUDA graph with its NCCL calls, and the tp = N all_reduces alone, in 5\n"
    "interleaved rounds of 10 calls on rank 0's stream; `layerjit run --tp N` also checks the outputs.\n";

namespace {


struct Ceilings {
  double bytes_per_s = 0;  // HBM: read + write of a device copy
  double flops_per_s = 0;  // layerjit's 8192^3 bf16 GEMM
};

double median_ms(rt::Stream& stream, const std::function<rt::Status(int)>& body, int warmup = 3, int repeats = 20) {
  rt::TimerOptions to;
  to.warmup = warmup;
  to.repeats = repeats;
  return must(rt::time_on_stream(stream, body, to), "time").median_ms;
}

Ceilings measure_ceilings(rt::Context& ctx, rt::Stream& stream, bool arch_specific, BenchReport& report) {
  Ceilings c;
  const size_t bytes = size_t{1} << 30;
  rt::DeviceBuffer src = must(rt::DeviceBuffer::allocate(ctx, bytes), "allocate the copy source");
  rt::DeviceBuffer dst = must(rt::DeviceBuffer::allocate(ctx, bytes), "allocate the copy target");
  must(rt::fill_random_bf16(stream, src.ptr(), bytes / 2, 7, -1.f, 1.f), "fill the copy source");
  const double copy_ms = median_ms(stream, [&](int) { return rt::copy_on_device(stream, dst.ptr(), src.ptr(), bytes); }, 3, 10);
  c.bytes_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3);

  constexpr int64_t kN = 8192;
  Module m = parse_module(fmt::format("graph @ceiling(%x: bf16[M, {0}], %w: param bf16[{0}, {0}]) {{\n  %y = matmul(%x, %w)\n  return %y\n}}\n", kN),
                          "<bench ceiling>");
  const Graph& g = m.graphs.at(0);
  Bindings b;
  b.set("M", kN);
  exec::BuildOptions bo;
  bo.hint = b;
  bo.arch_specific = arch_specific;
  exec::Executable e = must(exec::Executable::build(ctx, g, bo), "build the ceiling GEMM");
  std::vector<rt::DeviceBuffer> keep;
  for (ValueId v : {g.inputs()[0], g.inputs()[1], g.outputs()[0]}) {
    keep.push_back(must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(kN * kN * 2)), "allocate a GEMM operand"));
    must(rt::fill_random_bf16(stream, keep.back().ptr(), static_cast<size_t>(kN * kN), 11 + static_cast<uint64_t>(v), -1.f, 1.f),
         "fill a GEMM operand");
    must(e.bind(v, keep.back().ptr()), "bind a GEMM operand");
  }
  const double gemm_ms = median_ms(stream, [&](int) { return e.run(stream, b); });
  c.flops_per_s = 2.0 * static_cast<double>(kN) * static_cast<double>(kN) * static_cast<double>(kN) / (gemm_ms * 1e-3);
  std::printf("ceilings (measured now): HBM %.2f TB/s (1 GiB device copy: %.3f ms), tensor cores %.0f TFLOP/s "
              "(layerjit's 8192^3 bf16 GEMM, %s: %.3f ms)\n\n",
              c.bytes_per_s / 1e12, copy_ms, c.flops_per_s / 1e12, e.kernels()[0].config.c_str(), gemm_ms);
  report.hbm_bytes_per_s = c.bytes_per_s;
  report.copy_ms = copy_ms;
  report.tensor_flops_per_s = c.flops_per_s;
  report.gemm_ms = gemm_ms;
  report.gemm_config = e.kernels()[0].config;
  return c;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  GraphOptions o;
  uint64_t seed = 1;
  bool arch_specific = true;
  FusionOptions fusion;
  CommandLine cl("bench", kBenchUsage);
  cl.graph_options(o);
  cl.option("--seed", [&seed](const std::string& v) { seed = parse_seed(v); }, "N", "the random inputs' seed (default 1)");
  cl.flag("--no-arch-specific", [&arch_specific] { arch_specific = false; }, "sm_90 instead of sm_90a on Hopper");
  fused_plan_flags(cl, fusion);
  std::optional<std::string> json_path, csv_path, svg_path;
  cl.option("--json", json_path, "FILE", "every row printed, as JSON (layerjit.bench/1)");
  cl.option("--csv", csv_path, "FILE", "the same rows as CSV");
  cl.option("--roofline", svg_path, "FILE.svg", "each kernel against the measured roofline, as an SVG picture");
  TpRunOptions tpo;
  tp_flags(cl, tpo);
  if (!cl.parse(args)) return kExitOk;
  if (tpo.tp > 0 && (json_path || csv_path || svg_path || !arch_specific || fusion.packed_weight_gemms || !fusion.one_row_prologues))
    throw UsageError{"--tp times the default fused plan: --json, --csv, --roofline, --no-arch-specific, --packed-weights and "
                     "--no-one-row-prologues do not combine with it"};
  // Checked before minutes of measuring: the files are written at the end.
  for (const auto& [flag, path] : {std::pair{"--json", &json_path}, {"--csv", &csv_path}, {"--roofline", &svg_path}}) {
    if (!*path) continue;
    const std::filesystem::path dir = std::filesystem::path(**path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw UsageError{fmt::format("{} {}: no directory {} to write it in", flag, **path, dir.string())};
  }
  Module m = load_module(o);
  const Graph& g = single_graph(m);
  const Bindings& b = o.bindings;
  require_symbols(g, b);
  if (tpo.tp > 0) {
    tpo.seed = seed;
    tpo.check = false;
    return run_tp(g, b, tpo);
  }
  rt::Context& ctx = gpu_context();
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");
  std::string sizes;
  for (const auto& [s, v] : b.values) sizes += fmt::format("{}{}={}", sizes.empty() ? "" : ",", s, v);
  std::printf("@%s (%s) on %s\n", g.name().c_str(), sizes.c_str(), ctx.info().name.c_str());
  BenchReport report;
  report.device = ctx.info().name;
  report.graph = g.name();
  report.sizes = sizes;
  const Ceilings ceil = measure_ceilings(ctx, stream, arch_specific, report);

  Plans plans = build_plans(ctx, g, b, arch_specific, fusion);
  exec::Executable& fused = plans.fused;
  exec::Executable& unfused = plans.unfused;
  SeededInputs in = make_inputs(ctx, stream, g, b, seed);
  bind_inputs(ctx, stream, fused, in);
  bind_inputs(ctx, stream, unfused, in);
  must(fused.run(stream, b), "run the fused plan");
  must(unfused.run(stream, b), "run the unfused plan");
  must(stream.synchronize(), "run");

  // Each kernel of the fused plan alone, and all of them in order with an event between neighbours (a
  // kernel slower after its predecessor shows as the difference). The two alternate over 5 rounds
  // (median of the round medians): under a power cap the SM clock falls over the first ~100 ms of
  // load, and timing one set before the other would credit the clock to whichever ran first.
  std::vector<size_t> steps;
  for (size_t i = 0; i < fused.kernels().size(); ++i)
    if (!fused.plan().groups[i].prepare) steps.push_back(i);  // weight preparation: once, not per call
  std::vector<std::function<rt::Status()>> bodies_in_order;
  for (size_t i : steps) bodies_in_order.push_back([&, i] { return fused.run_step(stream, i, b); });
  rt::TimerOptions seq_options;
  seq_options.warmup = 2;
  seq_options.repeats = 7;
  std::vector<std::vector<double>> alone_rounds(steps.size()), in_order_rounds(steps.size());
  for (int round = 0; round < 5; ++round) {
    for (size_t n = 0; n < steps.size(); ++n)
      alone_rounds[n].push_back(median_ms(stream, [&](int) { return fused.run_step(stream, steps[n], b); }, 2, 7));
    const std::vector<rt::Timing> t = must(rt::time_steps_on_stream(stream, bodies_in_order, seq_options), "time the kernels in order");
    for (size_t n = 0; n < steps.size(); ++n) in_order_rounds[n].push_back(t[n].median_ms);
  }
  std::vector<double> alone, in_order;
  for (size_t n = 0; n < steps.size(); ++n) {
    alone.push_back(rt::summarize(alone_rounds[n]).median_ms);
    in_order.push_back(rt::summarize(in_order_rounds[n]).median_ms);
  }

  std::printf("| # | kernel | config | ms alone | ms in order | TFLOP/s | GB/s | of roofline | bound by |\n");
  std::printf("|---|--------|--------|----------|-------------|---------|------|-------------|----------|\n");
  double kernel_sum = 0, in_order_sum = 0;
  for (size_t n = 0; n < steps.size(); ++n) {
    const size_t i = steps[n];
    const GeneratedKernel& k = fused.kernels()[i];
    const GroupCost cost = group_cost(fused.graph(), fused.plan().groups[i], b);
    const double ms = alone[n];
    kernel_sum += ms;
    in_order_sum += in_order[n];
    const double s = ms * 1e-3;
    const rt::RooflinePoint r = rt::roofline(cost.flops, cost.bytes, s, ceil.flops_per_s, ceil.bytes_per_s);
    std::printf("| %zu | %s | %s | %.4f | %.4f | %.1f | %.0f | %.0f %% | %s |\n", i, k.name.c_str(), k.config.empty() ? "-" : k.config.c_str(), ms,
                in_order[n], cost.flops / s / 1e12, cost.bytes / s / 1e9, 100 * r.fraction, r.compute_bound ? "compute" : "memory");
    report.kernels.push_back({i, k.name, k.config, ms, in_order[n], cost.flops, cost.bytes, r.fraction, r.compute_bound});
  }
  std::printf("sum of the kernels alone: %.4f ms; in order (an event between neighbours): %.4f ms\n\n", kernel_sum, in_order_sum);

  // The whole graph: unfused, fused, fused as one CUDA graph, interleaved (see `layerjit run`).
  rt::Graph graph = must(fused.capture(stream, b), "capture the fused plan");
  const std::function<rt::Status(int)> bodies[3] = {[&](int) { return unfused.run(stream, b); },
                                                     [&](int) { return fused.run(stream, b); },
                                                     [&](int) { return graph.replay(stream); }};
  std::vector<double> rounds[3];
  for (int round = 0; round < 5; ++round)
    for (int v = 0; v < 3; ++v) rounds[v].push_back(median_ms(stream, bodies[v], 2, 7));
  auto modelled_bytes = [&](const exec::Executable& e) {
    double total = 0;
    for (const FusionGroup& grp : e.plan().groups)
      if (!grp.prepare) total += group_cost(e.graph(), grp, b).bytes;
    return total;
  };
  const double unfused_bytes = modelled_bytes(unfused), fused_bytes = modelled_bytes(fused);
  // "of HBM floor": the modelled bytes at the copy's bandwidth above, over the measured time.
  std::printf("| plan | kernels | launches per call | HBM bytes per call (modelled) | ms per call | vs unfused | of HBM floor |\n");
  std::printf("|------|---------|-------------------|-------------------------------|-------------|------------|--------------|\n");
  const double ms_unfused = rt::summarize(rounds[0]).median_ms;
  const struct {
    const char* name;
    size_t kernels;
    std::string launches;
    double bytes, ms;
  } rows[3] = {{"unfused", unfused.launches_per_run(), std::to_string(unfused.launches_per_run()), unfused_bytes, ms_unfused},
               {"fused", fused.launches_per_run(), std::to_string(fused.launches_per_run()), fused_bytes, rt::summarize(rounds[1]).median_ms},
               {"fused, one CUDA graph", fused.launches_per_run(), "1 graph", fused_bytes, rt::summarize(rounds[2]).median_ms}};
  for (const auto& r : rows) {
    report.plans.push_back({r.name, r.kernels, r.launches, r.bytes, r.ms, ms_unfused / r.ms});
    std::printf("| %s | %zu | %s | %s | %.4f | %.2fx | %.1f %% |\n", r.name, r.kernels, r.launches.c_str(), format_bytes(r.bytes).c_str(), r.ms,
                ms_unfused / r.ms, 100 * hbm_floor_fraction(report, report.plans.back()));
  }
  if (json_path) write_file_atomically(*json_path, bench_json(report));
  if (csv_path) write_file_atomically(*csv_path, bench_csv(report));
  if (svg_path) write_file_atomically(*svg_path, roofline_svg(report));
  for (const auto* p : {&json_path, &csv_path, &svg_path})
    if (*p) std::printf("wrote %s\n", (*p)->c_str());
  return kExitOk;
}

}  // namespace lj::cli
