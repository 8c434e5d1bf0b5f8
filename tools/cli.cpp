// Input loading and argument values shared by the CLI subcommands.
#include "tools/cli.h"

#include "tools/args.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "compiler/dump.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "layerjit/check.h"
#include "models/model.h"

namespace lj::cli {

void parse_bindings(const std::string& text, Bindings& out) {
  std::stringstream ss(text);
  std::string item;
  bool any = false;
  while (std::getline(ss, item, ',')) {
    any = true;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError{fmt::format("--bind expects SYMBOL=VALUE (e.g. T=7), got '{}'", item)};
    std::string sym = item.substr(0, eq);
    std::string val = item.substr(eq + 1);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || ptr != val.data() + val.size() || v <= 0)
      throw UsageError{fmt::format("--bind {}: value must be a positive integer, got '{}'", sym, val)};
    // Two values for one symbol (in one --bind or across several) is a typo, not "the last wins".
    if (std::optional<int64_t> had = out.get(sym); had && *had != v)
      throw UsageError{fmt::format("--bind binds {} twice ({}={} and {}={})", sym, sym, *had, sym, v)};
    out.set(sym, v);
  }
  if (!any) throw UsageError{"--bind expects SYMBOL=VALUE (e.g. T=7)"};
}

namespace {
std::string g_loaded_source;  // one CLI invocation loads one file
}  // namespace

const std::string& loaded_source() { return g_loaded_source; }

Module load_module(const GraphOptions& opts) {
  Module m;
  if (opts.file && *opts.file == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    g_loaded_source = ss.str();
    m = parse_module(g_loaded_source, "<stdin>");
  } else if (opts.file && std::filesystem::is_directory(*opts.file)) {
    // A Hugging Face model directory: its four graphs (models/model_graphs.h).
    g_loaded_source.clear();
    m = models::model_module(models::read_model_config_with_dtype(*opts.file));
  } else if (opts.file) {
    std::ifstream in(*opts.file, std::ios::binary);
    LJ_CHECK(in.good(), SourceLoc{}, "cannot read '{}': no such file or not readable", *opts.file);
    std::ostringstream ss;
    ss << in.rdbuf();
    g_loaded_source = ss.str();
    m = parse_module(g_loaded_source, *opts.file);
  } else {
    m.graphs.push_back(llama_prefill(LlamaConfig::llama3_8b()));
    m.graphs.push_back(llama_decode(LlamaConfig::llama3_8b()));
  }
  if (dump_enabled(DumpStage::Ir)) dump(DumpStage::Ir, opts.file ? *opts.file : "built-in layer", print_module(m));
  if (opts.graph) {
    const Graph* g = m.find(*opts.graph);
    if (!g) {
      std::string names;
      for (const auto& x : m.graphs) names += (names.empty() ? "@" : ", @") + x.name();
      throw UserError(fmt::format("no graph named @{} (the input has {})", *opts.graph, names));
    }
    Module one;
    one.graphs.push_back(*g);
    check_bound_symbols(one, opts.bindings);
    return one;
  }
  check_bound_symbols(m, opts.bindings);
  return m;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

const Graph& single_graph(const Module& m) {
  if (m.graphs.size() != 1) {
    std::string names;
    for (const auto& g : m.graphs) names += (names.empty() ? "@" : ", @") + g.name();
    throw UsageError{"the input has " + std::to_string(m.graphs.size()) + " graphs (" + names + "): choose one with --graph"};
  }
  return m.graphs[0];
}

int parse_group_number(const std::string& text) {
  int n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n < 0)
    throw UsageError{"--group expects a group number from `layerjit plan`, got '" + text + "'"};
  return n;
}

}  // namespace lj::cli
