// Shared pieces of the layerjit CLI: exit codes, argument values, loading the input module
// (tools/args.h parses the command lines).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "layerjit/graph.h"

namespace lj::cli {

// Exit codes: 0 success, 1 the input is at fault (user error), 2 the command line is at fault.
constexpr int kExitOk = 0;
constexpr int kExitUserError = 1;
constexpr int kExitUsage = 2;

/// A malformed command line; main() prints it with the command's usage and exits 2.
struct UsageError {
  std::string message;
};

/// Options every graph command understands.
struct GraphOptions {
  std::optional<std::string> file;   // a .lj file, '-', or a Hugging Face model directory; none: the built-in Llama-3-8B layer
  std::optional<std::string> graph;  // --graph NAME: only this graph
  Bindings bindings;                 // --bind T=7,B=2 (repeatable)
};

/// Parses "T=7,B=2" into bindings; throws UsageError on malformed text.
void parse_bindings(const std::string& text, Bindings& out);

/// The module the options name: the file, the model directory's graphs (embed, prefill, decode,
/// head) or the built-in layer, filtered by --graph. Throws UserError;
/// a UsageError when a --bind symbol is none of its graphs' (check_bound_symbols, tools/args.h).
Module load_module(const GraphOptions& opts);

/// Text of the file load_module last read ("" for the built-in layer): main() shows the offending
/// line of a diagnostic from it.
const std::string& loaded_source();

/// The one graph of `m`; a UsageError asking for --graph when it has several.
const Graph& single_graph(const Module& m);

/// The value of `--group N` (a group number from `layerjit plan`); UsageError when malformed.
int parse_group_number(const std::string& text);

/// Human-readable byte count: "436.0 MiB".
std::string format_bytes(double bytes);

}  // namespace lj::cli
