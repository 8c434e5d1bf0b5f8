// `layerjit run`: a graph end to end on the GPU, fused and unfused on the same random inputs, checked
// against each other and (at sizes the CPU can evaluate) against the CPU reference.
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "exec/executable.h"
#include "jit/index_inputs.h"
#include "exec/safetensors.h"
#include "jit/bundle.h"
#include "layerjit/llama.h"
#include "layerjit/reference.h"
#include "runtime/fill.h"
#include "runtime/host_values.h"
#include "runtime/timer.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/run_inputs.h"
#include "tools/run_tp.h"
#include "tools/tp_report.h"

namespace lj::cli {

const char* const kRunUsage =
    "usage: layerjit run [FILE] [--graph NAME] --bind T=4096 [--seed N] [--small] [--reference auto|always|never]\n"
    "                    [--no-arch-specific] [--no-one-row-prologues] [--packed-weights] [--weights FILE] [--save DIR]\n"
    "                    [--bundle FILE.ljb] [--tp N [--no-residual-fold]] [--quiet]\n"
    "\n"
    "Runs one graph on GPU 0: random inputs from --seed (default 1) — [N, K] weights uniform in\n"
    "+-1/sqrt(K), vector weights in [0.5, 1.5), activations in [-1, 1), positions at the end of each\n"
    "cache (or 0..T-1) — through the fused plan and the unfused plan (one kernel per op) on the same\n"
    "inputs, and compares every output of the two; with --reference always, or auto for graphs of at\n"
    "most 5 GFLOP, both also against the CPU reference. Prints, per output, the largest absolute\n"
    "difference and that difference relative to the largest reference magnitude, then PASS or FAIL\n"
    "(relative 2^-5 for bf16 outputs, 2^-8 for f16, 1e-4 for f32: rounding intermediates at different\n"
    "points across a whole layer). Also prints build times (first run: NVRTC; later: the kernel cache)\n"
    "and each plan's time per call (CUDA events; 5 interleaved rounds of 7 calls, the median of the\n"
    "round medians; the fused plan also replayed as one CUDA graph, whose outputs must equal the eager\n"
    "run's bit for bit), intermediate memory and the plan's peak device memory.\n"
    "--small: the built-in layer at its small config (the CPU reference runs in seconds).\n"
    "--no-arch-specific: compile for sm_XY rather than sm_XYa (on Hopper: the mma.sync GEMM instead of\n"
    "wgmma), to compare the two paths.\n"
    "--no-one-row-prologues: at one row, the fused plan keeps the rms_scale and rope_table kernels\n"
    "(`layerjit plan --help`), to measure what computing them in the GEMVs gains.\n"
    "--weights FILE: the graph's weights (param inputs) from a safetensors file, matched by name, dtype\n"
    "and shape (a mismatch is an error naming both); the other inputs stay seeded.\n"
    "--bundle FILE.ljb: the fused plan's kernels from an AOT bundle (`layerjit bundle`): no NVRTC for it;\n"
    "the unfused plan, the check, compiles as usual. A bundle without this graph at these --bind sizes\n"
    "is an error saying what it holds.\n"
    "Each kernel NVRTC compiles prints a line to stderr as it finishes (the cache's and a bundle's count\n"
    "at once); --quiet leaves them out. The first line of the report gives each plan's build time.\n"
    "--save DIR: writes DIR/inputs.safetensors (every graph input as generated, weights and caches\n"
    "before the run), DIR/outputs.safetensors (the fused plan's outputs) and DIR/layerjit.json (graph,\n"
    "sizes, device, times per call): what bench/compare_torch.py feeds PyTorch. Needs a GPU.\n"
    "--tp N: tensor parallelism over GPUs 0..N-1 of this machine (docs/tp.md): the graph sharded (as\n"
    "`layerjit plan --tp N` shows), one process driving the N GPUs with NCCL between them, against the\n"
    "same runtime at tp = 1 on the same inputs (and the CPU reference, as above). Checks every output of\n"
    "tp = N against tp = 1, a replicated output equal on every rank, and the per-rank CUDA graphs against\n"
    "the eager run; prints the time per call of both and of the all_reduces alone. Weights from --weights\n"
    "are cut per rank as they are bound. Needs N GPUs and NCCL (LAYERJIT_NCCL names the library).\n";

namespace {

struct Diff {
  double max_abs = 0, max_ref = 0;
  bool nan = false;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Diff compare(const HostTensor& got, const HostTensor& want) {
  Diff d;
  for (size_t i = 0; i < want.data.size(); ++i) {
    if (std::isnan(got.data[i]) != std::isnan(want.data[i])) d.nan = true;
    if (std::isnan(got.data[i]) || std::isnan(want.data[i])) continue;
    d.max_abs = std::max(d.max_abs, std::fabs(got.data[i] - want.data[i]));
    d.max_ref = std::max(d.max_ref, std::fabs(want.data[i]));
  }
  return d;
}

// --save: the inputs and the fused outputs as safetensors, the run's facts as JSON.
void save_run(const std::string& dir, const Graph& g, const Bindings& b, const rt::Context& ctx,
              const std::map<std::string, HostTensor>& inputs, const std::vector<HostTensor>& outputs, size_t kernels_fused,
              size_t kernels_unfused, double ms_unfused, double ms_fused, double ms_graph) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(fmt::format("--save {}: cannot create the directory: {}", dir, ec.message()));
  std::vector<std::pair<std::string, HostTensor>> in, out;
  for (ValueId v : g.inputs()) in.emplace_back(g.value(v).name, inputs.at(g.value(v).name));
  for (size_t i = 0; i < g.outputs().size(); ++i) out.emplace_back(g.value(g.outputs()[i]).name, outputs[i]);
  exec::write_safetensors(dir + "/inputs.safetensors", in);
  exec::write_safetensors(dir + "/outputs.safetensors", out);
  nlohmann::json j;
  j["graph"] = g.name();
  for (const auto& [s, v] : b.values) j["bindings"][s] = v;
  j["device"] = ctx.info().name;
  j["kernels"] = {{"fused", kernels_fused}, {"unfused", kernels_unfused}};
  j["ms_per_call"] = {{"unfused", ms_unfused}, {"fused", ms_fused}, {"fused_cuda_graph", ms_graph}};
  std::ofstream f(dir + "/layerjit.json");
  f << j.dump(2) << "\n";
  if (!f.good()) throw UserError(fmt::format("--save {}: cannot write layerjit.json", dir));
  std::printf("saved: %s/{inputs,outputs}.safetensors, layerjit.json\n", dir.c_str());
}

double tolerance(DType t) {
  switch (t) {
    case DType::BF16: return 1.0 / 32;
    case DType::F16: return 1.0 / 256;
    case DType::F32: return 1e-4;
    default: return 0;  // integer and fp8 outputs must match exactly
  }
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  GraphOptions o;
  uint64_t seed = 1;
  bool small = false;
  bool arch_specific = true;
  FusionOptions fusion;
  std::string save_dir, weights_path, bundle_path;
  bool quiet = false;
  std::string reference = "auto";
  CommandLine cl("run", kRunUsage);
  cl.graph_options(o);
  cl.flag("--small", small, "the built-in layer's small config (hidden 64), checked against the CPU");
  cl.option("--seed", [&seed](const std::string& v) { seed = parse_seed(v); }, "N", "the random inputs' seed (default 1)");
  cl.option("--reference", [&reference](const std::string& v) {
    if (v != "auto" && v != "always" && v != "never")
      throw UsageError{"--reference expects auto, always or never, got '" + v + "'"};
    reference = v;
  }, "auto|always|never", "compare with the CPU reference (auto: at sizes it evaluates quickly)");
  cl.flag("--no-arch-specific", [&arch_specific] { arch_specific = false; }, "sm_90 instead of sm_90a on Hopper");
  fused_plan_flags(cl, fusion);
  cl.option("--weights", weights_path, "FILE", "the param inputs from a safetensors file");
  cl.option("--save", save_dir, "DIR", "write inputs and outputs as safetensors");
  cl.option("--bundle", bundle_path, "FILE.ljb", "the fused plan's kernels from an AOT bundle");
  TpRunOptions tpo;
  tp_flags(cl, tpo);
  cl.flag("--quiet", quiet, "no progress lines");
  if (!cl.parse(args)) return kExitOk;
  if (tpo.tp > 0 && (!save_dir.empty() || !bundle_path.empty() || !arch_specific || fusion.packed_weight_gemms || !fusion.one_row_prologues))
    throw UsageError{"--tp runs the default fused plan: --save, --bundle, --no-arch-specific, --packed-weights and "
                     "--no-one-row-prologues do not combine with it"};
  if (small && o.file) throw UsageError{"--small picks the built-in layer's small config: give no FILE with it"};
  Module m;
  if (small) {
    Module all;
    all.graphs.push_back(llama_prefill(LlamaConfig::small()));
    all.graphs.push_back(llama_decode(LlamaConfig::small()));
    for (const Graph& g : all.graphs)
      if (!o.graph || g.name() == *o.graph) m.graphs.push_back(g);
    if (m.graphs.empty()) throw UserError(fmt::format("no graph named @{} (the small layer has @llama_small_prefill, @llama_small_decode)", *o.graph));
    check_bound_symbols(m, o.bindings);
  } else {
    m = load_module(o);
  }
  const Graph& g = single_graph(m);
  const Bindings& b = o.bindings;
  require_symbols(g, b);
  // The file is read and matched before any GPU work, so a wrong file fails fast and anywhere.
  std::optional<exec::SafetensorsFile> weights;
  if (!weights_path.empty()) {
    weights = exec::SafetensorsFile::open(weights_path);
    std::vector<std::string> unused;
    exec::match_weights(g, *weights, &unused);
    std::printf("weights: %s (%zu tensors of the file unused)\n", weights_path.c_str(), unused.size());
  }
  if (tpo.tp > 0) {
    tpo.seed = seed;
    tpo.reference = reference;
    tpo.quiet = quiet;
    tpo.weights = weights ? &*weights : nullptr;
    return run_tp(g, b, tpo);
  }
  std::shared_ptr<const jit::Bundle> bundle;
  if (!bundle_path.empty()) {  // read and checked before any GPU work, like the weights
    auto read = jit::Bundle::read(bundle_path);
    if (!read.ok()) throw UserError(read.message());
    if (rt::Status s = read->check_compatible(); !s.ok()) throw UserError(s.message());
    bundle = std::make_shared<const jit::Bundle>(std::move(*read));
  }
  rt::Context& ctx = gpu_context();
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");

  // Both plans, built (and compiled or loaded from the cache, the fused one from a bundle) once.
  Plans plans = build_plans(ctx, g, b, arch_specific, fusion, bundle, quiet);
  exec::Executable& fused = plans.fused;
  exec::Executable& unfused = plans.unfused;
  std::printf("@%s on %s: fused %zu kernels (built in %.1f ms, %s), unfused %zu kernels (%.1f ms, %d from the cache); %lld NVRTC compiles\n",
              g.name().c_str(), ctx.info().name.c_str(), fused.launches_per_run(), plans.fused_seconds * 1e3,
              bundle ? "from the bundle" : fmt::format("{} from the cache", fused.cache_hits()).c_str(), unfused.launches_per_run(),
              plans.unfused_seconds * 1e3, unfused.cache_hits(), static_cast<long long>(plans.nvrtc_compiles));

  // Seeded inputs (host copies for the reference), each plan with its own copies of the caches.
  SeededInputs in = make_inputs(ctx, stream, g, b, seed, weights ? &*weights : nullptr);
  bind_inputs(ctx, stream, fused, in);
  bind_inputs(ctx, stream, unfused, in);
  const std::map<std::string, HostTensor>& host_inputs = in.host;

  auto outputs_of = [&](exec::Executable& e) {
    std::vector<HostTensor> out;
    for (ValueId v : g.outputs()) out.push_back(must(e.download(stream, v, b), "download an output"));
    return out;
  };
  must(fused.run(stream, b), "run the fused plan");
  must(unfused.run(stream, b), "run the unfused plan");
  must(stream.synchronize(), "run");
  const std::vector<HostTensor> got_fused = outputs_of(fused);
  const std::vector<HostTensor> got_unfused = outputs_of(unfused);
  // The fused plan is also captured as one CUDA graph: timed, and its outputs must equal the eager
  // run's bit for bit.
  rt::Graph graph = must(fused.capture(stream, b), "capture the fused plan");
  // The three are timed in interleaved rounds (the median of the rounds' medians): a long run of
  // tensor-core kernels can lower the clocks under the power limit, and timing one variant after the
  // other charged that drop to whichever came last (the CUDA graph).
  std::vector<double> rounds[3];
  const std::function<rt::Status(int)> bodies[3] = {[&](int) { return unfused.run(stream, b); },
                                                     [&](int) { return fused.run(stream, b); },
                                                     [&](int) { return graph.replay(stream); }};
  for (int round = 0; round < 5; ++round) {
    for (int v = 0; v < 3; ++v) {
      rt::TimerOptions to;
      to.warmup = 2;
      to.repeats = 7;
      rounds[v].push_back(must(rt::time_on_stream(stream, bodies[v], to), "time").median_ms);
    }
  }
  const double ms_unfused = rt::summarize(rounds[0]).median_ms, ms_fused = rt::summarize(rounds[1]).median_ms,
               ms_graph = rt::summarize(rounds[2]).median_ms;
  // Poison what the replay must rewrite (outputs not updated in place), replay once, read back.
  for (ValueId v : g.outputs()) {
    const ValueId buf = fused.layout(v).buffer;
    if (std::find(g.inputs().begin(), g.inputs().end(), buf) != g.inputs().end()) continue;  // a cache: the replay reads it too
    const TensorType& t = g.value(buf).type;
    const auto bytes = static_cast<size_t>(tensor_bytes(t.dtype, resolve(t.shape, b)));
    must(rt::fill_poison(stream, must(fused.buffer_address(v, b), "find an output"), bytes, static_cast<size_t>(dtype_bytes(t.dtype))),
         "poison an output");
  }
  must(graph.replay(stream), "replay");
  must(stream.synchronize(), "replay");
  const std::vector<HostTensor> got_graph = outputs_of(fused);
  const exec::MemoryPlan mf = fused.memory_plan(b), mu = unfused.memory_plan(b);
  std::printf("time per call: unfused %.4f ms, fused %.4f ms (%.2fx), fused as a CUDA graph %.4f ms (%.2fx)\n", ms_unfused, ms_fused,
              ms_unfused / ms_fused, ms_graph, ms_unfused / ms_graph);
  std::printf("intermediate memory: fused %s, unfused %s (%s without reuse)\n", format_bytes(static_cast<double>(mf.arena_bytes)).c_str(),
              format_bytes(static_cast<double>(mu.arena_bytes)).c_str(), format_bytes(static_cast<double>(mu.unshared_bytes)).c_str());
  for (const auto& [what, e] : {std::pair<const char*, const exec::Executable*>{"fused", &fused}, {"unfused", &unfused}}) {
    const exec::Footprint f = e->footprint(b);
    std::printf("peak device memory, %s plan: %s = weights %s + prepared weights %s + inputs %s + intermediates %s + scratch %s\n",
                what, format_bytes(static_cast<double>(f.total())).c_str(), format_bytes(static_cast<double>(f.weights)).c_str(),
                format_bytes(static_cast<double>(f.prepared)).c_str(), format_bytes(static_cast<double>(f.inputs)).c_str(),
                format_bytes(static_cast<double>(f.arena)).c_str(), format_bytes(static_cast<double>(f.scratch)).c_str());
  }

  double flops = 0;
  for (const FusionGroup& grp : fused.plan().groups) flops += group_cost(fused.graph(), grp, b).flops;
  const bool with_ref = reference == "always" || (reference == "auto" && flops <= 5e9);
  std::vector<HostTensor> ref;
  if (with_ref) {
    ref = run_reference(g, host_inputs, b);
  } else {
    std::printf("CPU reference: skipped (%.1f GFLOP; --reference always to force, or --small)\n", flops / 1e9);
  }
  bool ok = true;
  auto report = [&](const char* what, const std::string& name, DType t, const Diff& d) {
    const bool pass = !d.nan && d.rel() <= tolerance(t);
    ok = ok && pass;
    std::printf("  %%%-14s %-18s max |diff| %.3g, relative %.3g (limit %.3g)%s %s\n", name.c_str(), what, d.max_abs, d.rel(),
                tolerance(t), d.nan ? ", NaN mismatch" : "", pass ? "ok" : "FAIL");
  };
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ValueInfo& info = g.value(g.outputs()[i]);
    if (got_graph[i].data != got_fused[i].data) {
      ok = false;
      std::printf("  %%%-14s CUDA graph replay differs from the eager run FAIL\n", info.name.c_str());
    }
    report("fused vs unfused", info.name, info.type.dtype, compare(got_fused[i], got_unfused[i]));
    if (with_ref) {
      report("fused vs CPU", info.name, info.type.dtype, compare(got_fused[i], ref[i]));
      report("unfused vs CPU", info.name, info.type.dtype, compare(got_unfused[i], ref[i]));
    }
  }
  if (!save_dir.empty()) save_run(save_dir, g, b, ctx, host_inputs, got_fused, fused.launches_per_run(), unfused.launches_per_run(),
                                   ms_unfused, ms_fused, ms_graph);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? kExitOk : kExitUserError;
}

}  // namespace lj::cli
