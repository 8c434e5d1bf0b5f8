// The text IR format (.lj): printer and parser. print(parse(print(g))) == print(g), byte for byte.
// Grammar and op reference: docs/ir.md.
#pragma once

#include <string>
#include <string_view>

#include "layerjit/graph.h"

namespace lj {

/// Prints one graph. Each result's inferred type follows as a trailing comment.
std::string print_graph(const Graph& g);
/// One statement without its type comment: `%h = rms_norm(%x, %w) {eps = 1e-05}`.
std::string print_node(const Graph& g, NodeId id);
/// Prints all graphs of a module, separated by a blank line.
std::string print_module(const Module& m);

/// Parses a whole file. Throws UserError with `file:line:col` for any malformed input.
Module parse_module(std::string_view text, std::string_view filename = "<input>");
/// Reads and parses a file; a missing or unreadable file is a UserError.
Module parse_file(const std::string& path);

/// "FILE:LINE:COL: error: message", then the source line and a caret under the column.
std::string format_diagnostic(const UserError& e, std::string_view source_text);

}  // namespace lj
