// `layerjit check [FILE]`: parse and verify, then a one-line summary.
#include <cstdio>

#include <fmt/format.h>

#include "tools/args.h"
#include "tools/commands.h"

namespace lj::cli {

const char* const kCheckUsage =
    "usage: layerjit check [FILE] [--graph NAME] [--bind SYM=N,...]\n"
    "\n"
    "Parses and verifies FILE ('-' reads standard input; default: the built-in Llama-3-8B decoder layer) and prints a one-line\n"
    "summary: graphs, ops, params and parameter bytes. Exits 1 with FILE:LINE:COL on malformed input.\n";

int cmd_check(const std::vector<std::string>& args) {
  GraphOptions o;
  CommandLine cl("check", kCheckUsage);
  cl.graph_options(o);
  if (!cl.parse(args)) return kExitOk;
  Module m = load_module(o);
  size_t ops = 0, params = 0;
  double bytes = 0;
  std::vector<std::string> unresolved;
  for (const Graph& g : m.graphs) {
    ops += g.nodes().size();
    for (ValueId id : g.inputs()) {
      const ValueInfo& v = g.value(id);
      if (!v.is_param) continue;
      ++params;
      bool known = true;
      for (const Dim& d : v.type.shape) known = known && (d.is_const() || o.bindings.get(d.symbol()));
      if (known) bytes += static_cast<double>(tensor_bytes(v.type.dtype, resolve(v.type.shape, o.bindings)));
      else unresolved.push_back("%" + v.name);
    }
  }
  std::string what = o.file ? *o.file : std::string("built-in llama3_8b layer");
  std::string names;
  for (const Graph& g : m.graphs) names += (names.empty() ? "@" : ", @") + g.name();
  std::string line = fmt::format("ok: {}: {} graph{} ({}), {} ops, {} params, {} of parameters", what, m.graphs.size(),
                                 m.graphs.size() == 1 ? "" : "s", names, ops, params, format_bytes(bytes));
  if (!unresolved.empty()) line += fmt::format(" (plus {} param(s) sized by unbound symbols)", unresolved.size());
  std::puts(line.c_str());
  return kExitOk;
}

}  // namespace lj::cli
