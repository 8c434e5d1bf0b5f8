// `layerjit plan [FILE] [--bind T=4096] [--no-fuse]`: the fusion groups of each graph, with nodes,
// traffic and FLOPs, and the totals against the unfused plan.
#include <cstdio>

#include "compiler/fusion/fusion_group.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kPlanUsage =
    "usage: layerjit plan [FILE] [--graph NAME] [--bind SYM=N,...] [--no-fuse | --no-matmul-epilogues]\n"
    "                     [--no-output-view-copies] [--no-norm-folding] [--no-one-row-prologues]\n"
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
    "At one row (--bind B=1 on the decode layer) the rms_scale and rope_table a projection alone\nreads are computed by its GEMV (the squares of x on the way through the dot product, each pair's\nangle in the epilogue) instead of kernels of their own; --no-one-row-prologues keeps the kernels.\n";

int cmd_plan(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  CommandLine cl("plan", kPlanUsage);
  cl.graph_options(o);
  fusion_flags(cl, fo);
  if (!cl.parse(args)) return kExitOk;
  Module m = load_module(o);
  for (size_t i = 0; i < m.graphs.size(); ++i) {
    if (i) std::fputs("\n", stdout);
    const Lowered l = jit::plan(m.graphs[i], fo, o.bindings);
    std::fputs(print_plan(*l.graph, l.plan, o.bindings, &m.graphs[i]).c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace lj::cli
