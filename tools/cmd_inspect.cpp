// `layerjit inspect [FILE] --graph NAME --group N [--ptx | --sass | --resources]`: one fusion group's
// generated CUDA C++, its PTX (NVRTC, no GPU needed), its SASS (the toolkit's cuobjdump, when present)
// or what it uses per thread and block (ptxas's report).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <unistd.h>

#include "tools/args.h"
#include "tools/commands.h"
#include "layerjit/check.h"

namespace lj::cli {

const char* const kInspectUsage =
    "usage: layerjit inspect [FILE] [--graph NAME] --group N [--ptx | --sass | --resources] [--arch sm_XY[a]]\n"
    "                        [--no-fuse | --no-matmul-epilogues] [--no-norm-folding] [--no-one-row-prologues]\n"
    "                        [--bind T=4096] [--config TEXT]\n"
    "\n"
    "Prints what layerjit generates for fusion group N (numbered as in `layerjit plan`) of the graph\n"
    "(default: the built-in Llama-3-8B layer; --graph picks one when the input has several): the CUDA\n"
    "C++ source, or with --ptx the PTX NVRTC makes of it, or with --sass the machine code (needs the\n"
    "CUDA toolkit's cuobjdump), or with --resources what the compiled kernel uses (registers per thread,\n"
    "spills, stack, static and dynamic shared memory, barriers, threads per block, as ptxas reports them).\n"
    "--arch picks the target (default sm_90). No GPU is needed.\n"
    "--bind gives the sizes the kernel is chosen for (a matmul over B=1 rows gets the GEMV kernel, over\n"
    "T=4096 the tensor-core GEMM; unbound: the GEMM); --config sets a matmul group's kernel config as\n"
    "`layerjit tune` prints it, e.g. 'mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8',\n"
    "'gemv mt=4 u=4 warps=8' or (fp8, sm_89+) 'gemv mma u=4 warps=8', or an attention prefill kernel's\n"
    "tiles as BMxMTxBNxSTAGES, e.g. 64x1x64x3,\n"
    "or on sm_90a as 'wgmma bn=128 stages=2'. --no-fuse, --no-matmul-epilogues, --no-norm-folding and\n"
    "--no-one-row-prologues plan as `layerjit plan` does.\n";

namespace {
// cuobjdump from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin.
std::optional<std::string> find_cuobjdump() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      dirs.push_back(p.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const auto& d : dirs) {
    std::string f = d + "/cuobjdump";
    if (!d.empty() && access(f.c_str(), X_OK) == 0) return f;
  }
  return std::nullopt;
}

std::string sass_of(const std::string& cubin, const std::string& kernel_name) {
  auto tool = find_cuobjdump();
  if (!tool)
    throw UserError("cannot show SASS: cuobjdump was not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin "
                    "(install the CUDA toolkit's cuobjdump); --ptx shows the PTX without it");
  char path[] = "/tmp/layerjit-inspect-XXXXXX";
  int fd = mkstemp(path);
  LJ_CHECK(fd >= 0, SourceLoc{}, "cannot create a temporary file for cuobjdump");
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  }
  std::string cmd = "'" + *tool + "' -sass '" + path + "' 2>&1";
  std::string text;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    int rc = pclose(p);
    unlink(path);
    LJ_CHECK(rc == 0, SourceLoc{}, "cuobjdump failed on the cubin of {}:\n{}", kernel_name, text);
    return text;
  }
  unlink(path);
  throw UserError("cannot run cuobjdump");
}
}  // namespace

int cmd_inspect(const std::vector<std::string>& args) {
  GraphOptions o;
  FusionOptions fo;
  std::string arch = "sm_90";
  std::optional<std::string> group_text;
  std::optional<std::string> config;  // --config: a matmul or attention config, by the group's kind
  bool ptx = false, sass = false, resources = false;
  CommandLine cl("inspect", kInspectUsage);
  cl.graph_options(o);
  cl.option("--group", group_text, "N", "the fusion group, numbered as in `layerjit plan` (required)");
  cl.flag("--ptx", ptx, "the PTX NVRTC makes of the source");
  cl.flag("--sass", sass, "the machine code (cuobjdump or nvdisasm)");
  cl.flag("--resources", resources, "registers, spills, stack, shared memory, threads per block");
  cl.option("--arch", arch, "sm_XY[a]", "the target (default sm_90)");
  cl.option("--config", config, "TEXT", "a matmul or attention kernel config, as `layerjit tune` prints it");
  fusion_flags(cl, fo);
  if (!cl.parse(args)) return kExitOk;
  const std::optional<int> group = group_text ? std::optional<int>(parse_group_number(*group_text)) : std::nullopt;
  if (ptx + sass + resources > 1) throw UsageError{"--ptx, --sass and --resources are exclusive"};
  if (!group) throw UsageError{"--group N is required (see `layerjit plan` for the numbers)"};
  const jit::JitTarget target = target_for_arch(arch);
  Module m = load_module(o);
  const Lowered lowered = jit::plan(single_graph(m), fo, o.bindings);
  const Graph& g = *lowered.graph;
  const FusionPlan& plan = lowered.plan;
  if (*group >= static_cast<int>(plan.groups.size()))
    throw UserError(fmt::format("@{} has {} fusion groups (0..{}); there is no group {}", g.name(), plan.groups.size(),
                                plan.groups.size() - 1, *group));
  const FusionGroup& grp = plan.groups[static_cast<size_t>(*group)];
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
