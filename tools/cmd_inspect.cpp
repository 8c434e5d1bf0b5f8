// `layerjit inspect [FILE] --graph NAME --group N`: the generated CUDA C++ of one fusion group.
#include <charconv>
#include <cstdio>
#include <optional>

#include "codegen/kernel.h"
#include "compiler/fusion/fusion_group.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kInspectUsage =
    "usage: layerjit inspect [FILE] [--graph NAME] --group N [--no-fuse] [--arch sm_XY]\n"
    "\n"
    "Prints the CUDA C++ that layerjit generates for fusion group N (numbered as in `layerjit plan`)\n"
    "of the graph (default: the built-in Llama-3-8B layer; --graph picks one when the input has\n"
    "several). Kernels are specialised on constant dimensions; symbols are kernel arguments.\n";

int cmd_inspect(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  FusionOptions fo;
  EmitOptions eo;
  std::optional<int> group;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--no-fuse") {
      fo.fuse = false;
    } else if (a == "--group" || a == "--arch") {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      const std::string& v = args[++i];
      if (a == "--group") {
        int n = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec != std::errc() || p != v.data() + v.size() || n < 0)
          throw UsageError{"--group expects a group number from `layerjit plan`, got '" + v + "'"};
        group = n;
      } else {
        int sm = 0;
        auto [p, ec] = v.rfind("sm_", 0) == 0 ? std::from_chars(v.data() + 3, v.data() + v.size(), sm)
                                              : std::from_chars_result{v.data(), std::errc::invalid_argument};
        if (ec != std::errc() || sm < 70) throw UsageError{"--arch expects sm_XY (e.g. sm_90), got '" + v + "'"};
        eo.sm = sm;
        (void)p;
      }
    } else {
      rest.push_back(a);
    }
  }
  GraphOptions o = parse_graph_options(rest);
  if (o.help) {
    std::fputs(kInspectUsage, stdout);
    return kExitOk;
  }
  if (!group) throw UsageError{"--group N is required (see `layerjit plan` for the numbers)"};
  Module m = load_module(o);
  if (m.graphs.size() != 1) {
    std::string names;
    for (const auto& g : m.graphs) names += (names.empty() ? "@" : ", @") + g.name();
    throw UsageError{"the input has " + std::to_string(m.graphs.size()) + " graphs (" + names + "): choose one with --graph"};
  }
  const Graph& g = m.graphs[0];
  FusionPlan plan = plan_fusion(g, fo);
  if (*group >= static_cast<int>(plan.groups.size()))
    throw UserError(fmt::format("@{} has {} fusion groups (0..{}); there is no group {}", g.name(), plan.groups.size(),
                                plan.groups.size() - 1, *group));
  GeneratedKernel k = emit_group(g, plan.groups[static_cast<size_t>(*group)], eo);
  std::fputs(k.source.c_str(), stdout);
  return kExitOk;
}

}  // namespace lj::cli
