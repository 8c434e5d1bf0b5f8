// `layerjit print [FILE] [--bind T=7]`: the verified graph in canonical text form.
#include <cstdio>

#include "layerjit/passes.h"
#include "layerjit/text.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kPrintUsage =
    "usage: layerjit print [FILE] [--graph NAME] [--bind SYM=N,...]\n"
    "\n"
    "Prints the graphs of FILE (default: the built-in Llama-3-8B decoder layer) in canonical text IR,\n"
    "each result's inferred type as a trailing comment. --bind specialises symbols to values; every\n"
    "op is verified again at the bound shapes.\n";

int cmd_print(const std::vector<std::string>& args) {
  GraphOptions o;
  CommandLine cl("print", kPrintUsage);
  cl.graph_options(o);
  if (!cl.parse(args)) return kExitOk;
  Module m = load_module(o);
  if (!o.bindings.values.empty()) {
    for (Graph& g : m.graphs) g = bind_symbols(g, o.bindings);
  }
  std::fputs(print_module(m).c_str(), stdout);
  return kExitOk;
}

}  // namespace lj::cli
