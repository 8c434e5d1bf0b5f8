// The `layerjit` command-line tool: dispatches to one function per subcommand and turns errors into
// exit codes (1: the input is at fault, 2: the command line is at fault).
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cache/format.h"
#include "cache/location.h"
#include "compiler/dump.h"
#include "layerjit/text.h"
#include "runtime/device_info.h"
#include "runtime/driver.h"
#include "runtime/nvrtc.h"
#include "tools/args.h"
#include "tools/cmd_cache.h"
#include "tools/commands.h"

namespace {

using lj::cli::kExitOk;
using lj::cli::kExitUsage;
using lj::cli::kExitUserError;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
  const char* usage;
};

const Command kCommands[] = {
    {"check", "parse and verify a graph file (or the built-in layer); one-line summary", lj::cli::cmd_check,
     lj::cli::kCheckUsage},
    {"print", "print graphs in canonical text IR, optionally with symbols bound", lj::cli::cmd_print,
     lj::cli::kPrintUsage},
    {"plan", "show the fusion groups (kernels), their traffic and FLOPs", lj::cli::cmd_plan, lj::cli::kPlanUsage},
    {"inspect", "print the generated CUDA C++, PTX or SASS of one fusion group", lj::cli::cmd_inspect,
     lj::cli::kInspectUsage},
    {"compile", "generate and compile every kernel of the plan (NVRTC, no GPU needed)", lj::cli::cmd_compile,
     lj::cli::kCompileUsage},
    {"bundle", "write (or --verify) an AOT bundle: every kernel precompiled for a list of archs in one file", lj::cli::cmd_bundle,
     lj::cli::kBundleUsage},
    {"tune", "autotune the plan's matmul kernels on the GPU and store the winners (needs a GPU)", lj::cli::cmd_tune,
     lj::cli::kTuneUsage},
    {"run", "run a graph on the GPU, fused and unfused, and check both (against the CPU at small sizes)",
     lj::cli::cmd_run, lj::cli::kRunUsage},
    {"bench", "where a graph's time goes: ceilings, each kernel against the roofline, unfused vs fused vs CUDA graph",
     lj::cli::cmd_bench, lj::cli::kBenchUsage},
    {"generate", "greedy generation over a Hugging Face model directory (token ids in, token ids out)", lj::cli::cmd_generate,
     lj::cli::kGenerateUsage},
    {"devices", "list the CUDA devices the driver sees (needs a driver)", lj::cli::cmd_devices_args,
     lj::cli::kDevicesUsage},
    {"cache", "inspect and maintain the kernel cache and tuning database (stats, ls, show, clear, prune)",
     lj::cli::cmd_cache, lj::cli::kCacheUsage},
};

void print_help(std::FILE* out) {
  std::fputs(
      "layerjit: a JIT kernel compiler for transformer layers on NVIDIA GPUs\n"
      "\n"
      "usage: layerjit <command> [options]   (layerjit <command> --help for details)\n"
      "\n"
      "commands:\n",
      out);
  for (const auto& c : kCommands) std::fprintf(out, "  %-8s %s\n", c.name, c.summary);
  std::fputs(
      "\n"
      "With no FILE, commands use the built-in Llama-3-8B decoder layer (prefill and decode graphs).\n"
      "Every option takes --opt VALUE or --opt=VALUE. layerjit --version: layerjit's, NVRTC's and the\n"
      "CUDA driver's versions. Exit codes: 0 success, 1 invalid input, 2 invalid command line.\n",
      out);
}

// What a bare `layerjit` prints: the commands, then where to start (none of these needs a GPU but
// the last two).
void print_first_steps(std::FILE* out) {
  print_help(out);
  std::fputs(
      "\n"
      "what to try first:\n"
      "  layerjit plan --graph llama3_8b_decode --bind B=1,C=4096   the fusion plan of one decode step\n"
      "  layerjit inspect --graph llama3_8b_decode --bind B=1,C=4096 --group 0\n"
      "                                                              the CUDA C++ of its first kernel\n"
      "  layerjit compile --arch sm_90a --emit /tmp/lj              every kernel of the layer: .cu, .ptx, .cubin\n"
      "  layerjit devices                                           the GPUs here (needs a driver)\n"
      "  layerjit run --small --graph llama_small_decode --bind B=2,C=9\n"
      "                                                              a small layer on the GPU against the CPU\n",
      out);
}

// `layerjit --version`: the project's version, the NVRTC it compiles with and, where one loads, the
// CUDA driver (what a bug report needs).
void print_version() {
  std::printf("layerjit %.*s\n", static_cast<int>(lj::cache::layerjit_version().size()), lj::cache::layerjit_version().data());
  std::printf("NVRTC %s\n", lj::rt::nvrtc_version().c_str());
  auto drv = lj::rt::Driver::get();
  if (drv.ok()) std::printf("CUDA driver %s (%s)\n", lj::rt::format_cuda_version((*drv)->version()).c_str(), (*drv)->library().c_str());
  else std::printf("CUDA driver: none (%s)\n", drv.message().c_str());
}

const Command* find_command(const std::string& name) {
  for (const auto& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  // The debug and cache variables are checked before any work: a misspelt one is a usage error
  // here, not a silent no-op (or an exception halfway through a compile).
  bool env_help = false;
  if (std::optional<std::string> bad = lj::debug_env_problem(&env_help)) {
    std::fprintf(stderr, "layerjit: %s\n", bad->c_str());
    return kExitUsage;
  }
  if (env_help) {
    std::fputs(lj::debug_env_help().c_str(), stdout);
    return kExitOk;
  }
  try {
    (void)lj::cache::cache_options_from_env();
  } catch (const lj::UserError& e) {
    std::fprintf(stderr, "layerjit: %s\n", e.what());
    return kExitUsage;
  }
  if (argc < 2) {
    print_first_steps(stdout);
    return kExitOk;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_help(stdout);
    return kExitOk;
  }
  if (name == "--version" || name == "version") {
    print_version();
    return kExitOk;
  }
  const Command* cmd = find_command(name);
  if (!cmd) {
    std::fprintf(stderr, "layerjit: unknown command '%s' (see layerjit --help)\n", name.c_str());
    return kExitUsage;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return cmd->run(args);
  } catch (const lj::cli::UsageError& e) {
    std::fprintf(stderr, "layerjit %s: %s\n\n%s(layerjit %s --help for the options)\n", cmd->name, e.message.c_str(),
                 lj::cli::synopsis(cmd->usage).c_str(), cmd->name);
    return kExitUsage;
  } catch (const lj::UserError& e) {
    const std::string& src = lj::cli::loaded_source();
    std::string text = e.loc().known() && !src.empty() ? lj::format_diagnostic(e, src) : e.formatted();
    if (text.empty() || text.back() != '\n') text += '\n';
    std::fputs(text.c_str(), stderr);
    return kExitUserError;
  } catch (const lj::InternalError& e) {
    std::fprintf(stderr, "layerjit: %s\n", e.what());
    return 3;
  }
}
