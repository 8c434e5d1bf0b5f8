// Memory-bound kernels against the device's copy bandwidth, measured in the same run: residual add +
// RMSNorm on [16384, 4096] bf16, SwiGLU on [8192, 14336], RoPE of the Llama-3-8B QKV projection at
// T=4096 (prefill) and RoPE + KV-cache write for B=4096 decode rows. For each: the fused plan's
// kernels and the unfused plan's kernels, time (median of CUDA-event repeats, inputs rotated past
// L2), bytes the plan must move, and GB/s as a fraction of a 16-byte-vector device copy.
// Decode GEMV: the four matmul groups of the Llama-3-8B decode layer at B=1 (qkv 6144x4096, o
// 4096x4096, gate_up 28672x4096, down 4096x14336), each against copies of its weight rotated so
// that no repeat finds W in L2; GB/s counts weight bytes only (the activations are a few KiB).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/plan_runner.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

using namespace lj;
using namespace lj::bench;

namespace {

struct BenchCase {
  std::string name;
  Graph graph;
  Bindings bind;
};

}  // namespace

int main() {
  g_program = "bench_membound";
  rt::Context* ctx_p = context_or_skip();
  if (!ctx_p) return 77;
  rt::Context& ctx = *ctx_p;
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");

  std::vector<BenchCase> cases;
  auto text = R"(
graph @residual_rmsnorm(%x: bf16[T, 4096], %o: bf16[T, 4096], %w: param bf16[4096]) {
  %h = add(%x, %o)
  %n = rms_norm(%h, %w) {eps = 1e-5}
  return %h, %n
}
graph @swiglu(%gu: bf16[T, 28672]) {
  %g, %u = split(%gu) {axis = 1, sizes = [14336, 14336]}
  %a = silu(%g)
  %m = mul(%a, %u)
  return %m
}
)";
  Module m = parse_module(text, "bench_membound");
  Bindings t16k, t8k;
  t16k.set("T", 16384);
  t8k.set("T", 8192);
  cases.push_back({"residual add + RMSNorm [16384, 4096]", m.graphs[0], t16k});
  cases.push_back({"SwiGLU [8192, 14336]", m.graphs[1], t8k});

  // RoPE groups of the Llama-3-8B layer: only the rope_kv_write group of each plan is timed, planned
  // without matmul epilogues (with them, RoPE and the cache writes join the QKV projection and the
  // group left is the cos/sin table alone).
  Bindings t4k, b4k;
  t4k.set("T", 4096);
  b4k.set("B", 4096);
  b4k.set("C", 16);
  const double copy = copy_gbps(ctx, stream, size_t{1} << 30);
  std::printf("device: %s, copy bandwidth %.0f GB/s (1 GiB, read + write)\n\n", ctx.info().name.c_str(), copy);
  std::printf("| case | plan | kernels | time (ms) | bytes (MiB) | GB/s | fraction of copy |\n");
  std::printf("|------|------|---------|-----------|-------------|------|------------------|\n");
  // One row of the table: `bytes` is what the rate counts (default: the plan's minimum traffic).
  auto report_runs = [&](const std::string& name, const char* which, std::vector<PlanRun>& runs, double bytes) {
    const double ms = time_plan(stream, runs);
    const double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("| %s | %s | %zu | %.4f | %.1f | %.0f | %.2f |\n", name.c_str(), which, runs[0].kernels.size(), ms,
                bytes / (1024.0 * 1024.0), gbps, gbps / copy);
  };
  auto report = [&](const std::string& name, const char* which, PlanRun& run) {
    std::vector<PlanRun> one;
    one.push_back(std::move(run));
    report_runs(name, which, one, one[0].bytes);
  };
  for (auto& c : cases) {
    for (bool fuse : {true, false}) {
      std::map<ValueId, rt::DeviceBuffer> pool;
      PlanRun run = prepare(ctx, stream, c.graph, plan_fusion(c.graph, FusionOptions{fuse}), c.bind, pool);
      report(c.name, fuse ? "fused" : "unfused", run);
    }
  }
  for (auto [name, graph, bind] : {std::tuple{"RoPE q,k (Llama-3-8B prefill, T=4096)", llama_prefill(LlamaConfig::llama3_8b()), t4k},
                                   std::tuple{"RoPE + KV write (Llama-3-8B decode, B=4096)", llama_decode(LlamaConfig::llama3_8b()), b4k}}) {
    FusionOptions standalone;
    standalone.matmul_epilogues = false;
    FusionPlan plan = plan_fusion(graph, standalone);
    FusionPlan only;
    for (const auto& grp : plan.groups)
      if (grp.kind == GroupKind::RopeKvWrite) only.groups.push_back(grp);
    if (only.groups.size() != 1 || only.groups[0].nodes.size() < 3) {
      std::fprintf(stderr, "bench_membound: %s: expected one RoPE group with the table and the ropes, found %zu groups\n", name,
                   only.groups.size());
      return 1;
    }
    std::map<ValueId, rt::DeviceBuffer> pool;
    PlanRun run = prepare(ctx, stream, graph, only, bind, pool);
    const double bytes = run.bytes;
    report(name, "fused", run);
    // A short kernel ramps up and drains relative to the 1 GiB anchor: a copy of the same bytes shows
    // how much of the gap that explains (the ratio above stays against the 1 GiB copy).
    const double same = copy_gbps(ctx, stream, static_cast<size_t>(bytes / 2) / 16 * 16);
    std::printf("| (copy of the same %.1f MiB) | copy | 1 | | | %.0f | %.2f |\n", bytes / (1024.0 * 1024.0), same, same / copy);
  }

  // Decode GEMV: each matmul group of the Llama-3-8B decode layer alone, B=1.
  Bindings b1;
  b1.set("B", 1);
  b1.set("C", 16);
  const Graph decode = llama_decode(LlamaConfig::llama3_8b());
  for (const FusionGroup& grp : plan_fusion(decode).groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    const Node& mm = decode.node(anchor_node(decode, grp));
    const TensorType& wt = decode.value(mm.operands[1]).type;
    const int64_t n = wt.shape[0].value(), k = wt.shape[1].value();
    const double weight_bytes = static_cast<double>(n * k * dtype_bytes(wt.dtype));
    const int rotations = rt::rotations_for(static_cast<size_t>(weight_bytes), static_cast<size_t>(ctx.info().l2_bytes));
    FusionPlan only;
    only.groups.push_back(grp);
    // One buffer pool per rotation: each holds its own copy of W (and of the small x and y).
    std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
    std::vector<PlanRun> runs;
    for (auto& pool : pools) runs.push_back(prepare(ctx, stream, decode, only, b1, pool));
    report_runs(fmt::format("GEMV %{} {}x{} (Llama-3-8B decode, B=1, {} weight copies)", decode.value(mm.results[0]).name,
                            n, k, rotations),
                "fused", runs, weight_bytes);
  }
  return 0;
}
