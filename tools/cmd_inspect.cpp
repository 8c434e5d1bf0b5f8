// `layerjit inspect [FILE] --graph NAME --group N [--ptx | --sass | --resources]`: one fusion group's
// generated CUDA C++, its PTX (NVRTC, no GPU needed), its SASS (the toolkit's cuobjdump or nvdisasm, when present)
// or what it uses per thread and block (ptxas's report).
#include <cstdio>
#include <optional>

#include "tools/tp_report.h"
#include "tools/args.h"
#include "tools/external_tool.h"
#include "tools/commands.h"
#include "layerjit/check.h"

namespace lj::cli {

const char* const kInspectUsage =
    "usage: layerjit inspect [FILE] [--graph NAME] --group N [--ptx | --sass | --resources] [--arch sm_XY[a]]\n"
    "                        [--no-fuse | --no-matmul-epilogues] [--no-norm-folding] [--no-one-row-prologues] [--packed-weights]\n"
    "                        [--bind T=4096] [--config TEXT] [--tp N]\n"
    "\n"
    "Prints what layerjit generates for fusion group N (numbered as in `layerjit plan`) of the graph\n"
    "(default: the built-in Llama-3-8B layer; --graph picks one when the input has several): the CUDA\n"
    "C++ source, or with --ptx the PTX NVRTC makes of it, or with --sass the machine code (needs the\n"
    "CUDA toolkit's cuobjdump or nvdisasm), or with --resources what the compiled kernel uses (registers per thread,\n"
    "spills, stack, static and dynamic shared memory, barriers, threads per block, as ptxas reports them).\n"
    "--arch picks the target (default: GPU 0's arch, else sm_90a; stderr says which). No GPU is needed.\n"
    "--bind gives the sizes the kernel is chosen for (a matmul over B=1 rows gets the GEMV kernel, over\n"
    "T=4096 the tensor-core GEMM; unbound: the GEMM); --config sets a matmul group's kernel config as\n"
    "`layerjit tune` prints it, e.g. 'mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8',\n"
    "'gemv mt=4 u=4 warps=8' or (fp8, sm_89+) 'gemv mma u=4 warps=8', or an attention prefill kernel's\n"
    "tiles as BMxMTxBNxSTAGES, e.g. 64x1x64x3,\n"
    "or on sm_90a as 'wgmma bn=128 stages=2'. --no-fuse, --no-matmul-epilogues, --no-norm-folding,\n"
    "--no-one-row-prologues and --packed-weights plan as `layerjit plan` does.\n";

namespace {
// The SASS of a cubin: the toolkit's cuobjdump, else its nvdisasm (either prints the same
// instructions; a toolkit may ship ptxas without them, as the CI machine's does).
std::string sass_of(const std::string& cubin, const std::string& kernel_name) {
  const std::vector<std::string> dirs = cuda_bin_dirs();
  std::optional<std::string> tool = find_tool("cuobjdump", dirs);
  std::vector<std::string> args = {"-sass"};
  if (!tool) {
    tool = find_tool("nvdisasm", dirs);
    args = {};
  }
  if (!tool)
    throw UserError("cannot show SASS: neither cuobjdump nor nvdisasm was found on PATH, in $CUDA_HOME/bin or "
                    "/usr/local/cuda/bin; they come with the CUDA toolkit (NVIDIA's packages cuda-cuobjdump-13-0 and "
                    "cuda-nvdisasm-13-0, for CUDA 13.0); --ptx shows the PTX and --resources what ptxas reports without them");
  const ToolRun r = run_tool_on(*tool, args, cubin);
  LJ_CHECK(r.exit_code == 0, SourceLoc{}, "{} failed on the cubin of {} (exit {}):\n{}", *tool, kernel_name, r.exit_code, r.errors + r.output);
  return r.output;
}
}  // namespace

int cmd_inspect(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  std::optional<std::string> arch;
  std::optional<std::string> group_text;
  std::optional<std::string> config;  // --config: a matmul or attention config, by the group's kind
  bool ptx = false, sass = false, resources = false;
  CommandLine cl("inspect", kInspectUsage);
  cl.graph_options(o);
  cl.option("--group", group_text, "N", "the fusion group, numbered as in `layerjit plan` (required)");
  cl.flag("--ptx", ptx, "the PTX NVRTC makes of the source");
  cl.flag("--sass", sass, "the machine code (cuobjdump or nvdisasm)");
  cl.flag("--resources", resources, "registers, spills, stack, shared memory, threads per block");
  cl.option("--arch", arch, "sm_XY[a]", "the target (default: GPU 0's, else sm_90a)");
  cl.option("--config", config, "TEXT", "a matmul or attention kernel config, as `layerjit tune` prints it");
  int tp = 1;
  cl.option("--tp", [&tp](const std::string& v) { tp = parse_tp(v); }, "N", "rank 0's graph of an N-way tensor-parallel group (as `plan --tp`)");
  fusion_flags(cl, fo);
  if (!cl.parse(args)) return kExitOk;
  const std::optional<int> group = group_text ? std::optional<int>(parse_group_number(*group_text)) : std::nullopt;
  if (ptx + sass + resources > 1) throw UsageError{"--ptx, --sass and --resources are exclusive"};
  if (!group) throw UsageError{"--group N is required (see `layerjit plan` for the numbers)"};
  const jit::JitTarget target = target_for_arch(arch);
  Module m = load_module(o);
  shard_module(m, tp);
  const Lowered lowered = jit::plan(single_graph(m), fo, o.bindings);
  const Graph& g = *lowered.graph;
  const FusionPlan& plan = lowered.plan;
  if (*group >= static_cast<int>(plan.groups.size()))
    throw UserError(fmt::format("@{} has {} fusion groups (0..{}); there is no group {}", g.name(), plan.groups.size(),
                                plan.groups.size() - 1, *group));
  const FusionGroup& grp = plan.groups[static_cast<size_t>(*group)];
  if (grp.kind == GroupKind::AllReduce)
    throw UserError(fmt::format("group {} of @{} is an all_reduce: NCCL runs it between the ranks' kernels, no kernel is generated for "
                                "it (docs/tp.md)", grp.id, g.name()));
  jit::PlanCompileOptions po;
  po.hint = o.bindings;
  po.only_group = grp.id;
  po.compile = ptx || sass;
  po.want_ptx = ptx;
  if (config) {
    std::string error;
    if (grp.kind == GroupKind::Matmul) {
      po.matmul = parse_matmul_config(*config, &error);
      if (!po.matmul) throw UsageError{error};
    } else if (grp.kind == GroupKind::Attention) {
      po.attention = parse_attention_config(*config, &error);
      if (!po.attention) throw UsageError{error};
    } else {
      throw UsageError{fmt::format("--config sets a matmul or attention kernel's config; group {} is a {} group", grp.id,
                                   group_kind_name(grp.kind))};
    }
  }
  auto compiled = jit::compile_plan(target, g, plan, po);
  if (!compiled.ok()) throw InternalError(compiled.message());  // generated code must compile: a layerjit bug
  const jit::CompiledGroup& cg = compiled->groups.at(0);
  const GeneratedKernel& k = cg.kernel;
  if (resources) {
    auto r = jit::kernel_resources(k, target.target);
    if (!r.ok()) throw InternalError(r.message());  // generated code must compile: a layerjit bug
    std::printf("%s for %s: %s; %lld bytes of dynamic shared memory, %lld threads per block\n", k.name.c_str(),
                target.target.name().c_str(), r->str().c_str(), static_cast<long long>(k.launch.shared_bytes),
                static_cast<long long>(k.launch.threads));
    return kExitOk;
  }
  if (!ptx && !sass) {
    std::fputs(k.source.c_str(), stdout);
    return kExitOk;
  }
  const rt::CompiledProgram& prog = cg.compiled.program;
  std::fputs(ptx ? prog.ptx.c_str() : sass_of(prog.cubin, k.name).c_str(), stdout);
  return kExitOk;
}

}  // namespace lj::cli
