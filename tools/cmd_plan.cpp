// `layerjit plan [FILE] [--bind T=4096] [--no-fuse]`: the fusion groups of each graph, with nodes,
// traffic and FLOPs, and the totals against the unfused plan.
#include <cstdio>

#include "compiler/fusion/fusion_group.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/plan_formats.h"
#include "tools/tp_report.h"

namespace lj::cli {

const char* const kPlanUsage =
    "usage: layerjit plan [FILE] [--graph NAME] [--bind SYM=N,...] [--format text|json|dot|svg]\n"
    "                     [--no-fuse | --no-matmul-epilogues]\n"
    "                     [--no-output-view-copies] [--no-norm-folding] [--no-one-row-prologues]\n"
    "                     [--row-tails] [--packed-weights] [--tp N] [--no-residual-fold]\n"
    "\n"
    "Shows how each graph of FILE (default: the built-in Llama-3-8B layer) is covered by fusion\n"
    "groups, one kernel each: the nodes a group absorbs, what it reads and writes in device memory,\n"
    "what it keeps on chip and why. With every symbol bound, also bytes moved and FLOPs per group,\n"
    "and the totals against the unfused plan. --no-fuse shows the one-kernel-per-op baseline;\n"
    "--no-matmul-epilogues keeps every matmul alone (its epilogue ops become kernels of their own).\n"
    "Returned views of larger buffers (the prefill layer's %v, a slice of the QKV projection) are\n"
    "copied into buffers of their own by a kernel that reads the buffer anyway, so the buffer need not\n"
    "outlive its readers; `returned views:` says which and why. --no-output-view-copies leaves them views.\n"
    "An RMSNorm read only by matmuls with param weights is folded into them (`graph:` lines): the norm\n"
    "weight is multiplied into W once, when the weights are bound (the plan's weight preparation), and\n"
    "each row's rsqrt factor is computed by a small kernel and applied to the matmul's sums, so the\n"
    "normalised rows never reach memory. --no-norm-folding keeps the norms.\n"
    "--format json writes the same plan as data (schema docs/plan.schema.json); --format dot a Graphviz\n"
    "graph (a cluster per kernel, values kept on chip dashed), --format svg that graph drawn by dot.\n"
    "At one row (--bind B=1 on the decode layer) the rms_scale and rope_table a projection alone\nreads are computed by its GEMV (the squares of x on the way through the dot product, each pair's\nangle in the epilogue) instead of kernels of their own; --no-one-row-prologues keeps the kernels.\n"
    "--row-tails (opt-in, slower on the H100): at one row, the quantize (and rms_norm) after a GEMV\n"
    "runs in the GEMV's last CTA instead of a row kernel (the fp8 and W8A8 decode layers: 7 kernels).\n"
    "4-bit weights (dequantize {group = G} of packed params) are read as codes by the 4-bit GEMV at up\n"
    "to 16 rows; at more rows they are dequantized once, when bound, for the bf16 kernels.\n"
    "--packed-weights keeps them packed at every size: the GEMMs dequantize W's tiles into shared\n"
    "memory (no bf16 copy of the weights; on the H200 slower than the bf16 GEMMs for now).\n"
    "--tp N plans the graph one rank of an N-way tensor-parallel group runs (docs/tp.md): how each\n"
    "input is split, the all_reduces and their bytes per call, then the rank graph's plan. A layer\n"
    "whose heads or FFN width N does not divide is refused with the reason (exit 1). A residual add\n"
    "after an all_reduce is folded before it (rank 0 adds the residual to its partial sums, so no add\n"
    "kernel follows the all_reduce); the plan shown is rank 0's. --no-residual-fold keeps the adds after\n"
    "the all_reduces, the same on every rank (to measure what the fold gains).\n";

int cmd_plan(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  std::string format = "text";
  int tp = 1;
  CommandLine cl("plan", kPlanUsage);
  cl.graph_options(o);
  cl.option("--format", [&format](const std::string& v) {
    if (v != "text" && v != "json" && v != "dot" && v != "svg")
      throw UsageError{"--format expects text, json, dot or svg, got '" + v + "'"};
    format = v;
  }, "text|json|dot|svg", "the plan as text (default), JSON (docs/plan.schema.json), Graphviz DOT or SVG (needs dot)");
  fusion_flags(cl, fo);
  cl.option("--tp", [&tp](const std::string& v) { tp = parse_tp(v); }, "N", "the rank graph of an N-way tensor-parallel group (1-64)");
  ShardOptions so;
  cl.flag("--no-residual-fold", [&so] { so.fold_residuals = false; }, "with --tp: residual adds after the all_reduces");
  if (!cl.parse(args)) return kExitOk;
  Module m = load_module(o);
  // With --tp, each graph's rank graph (kept alive here: the plans point at them).
  std::vector<ShardedGraph> sharded;
  sharded.reserve(m.graphs.size());
  std::vector<PlannedGraph> graphs;
  for (const Graph& g : m.graphs) {
    if (tp > 1) sharded.push_back(shard(g, tp, so));
    const Graph& planned = tp > 1 ? sharded.back().graph : g;
    graphs.push_back({&planned, jit::plan(planned, fo, o.bindings)});
  }
  if (format == "json") {
    std::fputs((plan_json(graphs, o.bindings).dump(2) + "\n").c_str(), stdout);
  } else if (format == "dot" || format == "svg") {
    const std::string dot = plan_dot(graphs, o.bindings);
    std::fputs((format == "dot" ? dot : dot_to_svg(dot)).c_str(), stdout);
  } else {
    for (size_t i = 0; i < graphs.size(); ++i) {
      if (i) std::fputs("\n", stdout);
      const Lowered& l = graphs[i].lowered;
      if (tp > 1) std::fputs(tp_summary(sharded[i], o.bindings).c_str(), stdout);
      std::fputs(print_plan(*l.graph, l.plan, o.bindings, graphs[i].source).c_str(), stdout);
    }
  }
  return kExitOk;
}

}  // namespace lj::cli
