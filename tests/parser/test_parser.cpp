// Unit tests of the text IR parser: printer round trips on the built-in Llama layers, the example
// file, source locations on nodes and inputs, syntax details (comments, CRLF, tabs, BOM, scalars,
// several graphs), every attribute kind, declared result types, and diagnostics. The exact text of
// each diagnostic is pinned by tests/errors; here the tests check behaviour and locations.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "layerjit/builder.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string example_path() { return std::string(LAYERJIT_SOURCE_DIR) + "/examples/llama3_8b_decoder.lj"; }

lj::Module module_of(std::vector<lj::Graph> graphs) {
  lj::Module m;
  m.graphs = std::move(graphs);
  return m;
}

/// The error `text` must fail with (the test fails if it parses).
lj::UserError error_of(std::string_view text, std::string_view file = "t.lj") {
  try {
    lj::parse_module(text, file);
  } catch (const lj::UserError& e) {
    return e;
  }
  FAIL("expected a parse error for:\n" << text);
  return lj::UserError("unreachable");
}

/// "LINE:COL: message" of the error, for compact checks.
std::string where_what(std::string_view text) {
  lj::UserError e = error_of(text);
  return std::to_string(e.loc().line) + ":" + std::to_string(e.loc().col) + ": " + e.what();
}

void check_round_trip(const lj::Graph& g) {
  const std::string printed = lj::print_graph(g);
  const lj::Module parsed = lj::parse_module(printed, "round_trip.lj");
  REQUIRE(parsed.graphs.size() == 1);
  CHECK(lj::print_graph(parsed.graphs[0]) == printed);
}

// A one-graph file around `body` with inputs %x: bf16[T, 64], %w: param bf16[128, 64].
std::string in_graph(const std::string& body) {
  return "graph @g(%x: bf16[T, 64], %w: param bf16[128, 64]) {\n" + body + "}\n";
}

// A copy, so callers may pass a temporary module.
lj::Node only_node(const lj::Module& m) {
  REQUIRE(m.graphs.size() == 1);
  REQUIRE(m.graphs[0].nodes().size() == 1);
  return m.graphs[0].nodes()[0];
}

}  // namespace

// --- round trips ----------------------------------------------------------------------------------

TEST_CASE("round trip: llama3_8b prefill", "[parser][round_trip]") {
  check_round_trip(lj::llama_prefill(lj::LlamaConfig::llama3_8b()));
}

TEST_CASE("round trip: llama3_8b decode", "[parser][round_trip]") {
  check_round_trip(lj::llama_decode(lj::LlamaConfig::llama3_8b()));
}

TEST_CASE("round trip: small prefill", "[parser][round_trip]") {
  check_round_trip(lj::llama_prefill(lj::LlamaConfig::small()));
}

TEST_CASE("round trip: small decode", "[parser][round_trip]") {
  check_round_trip(lj::llama_decode(lj::LlamaConfig::small()));
}

TEST_CASE("round trip: a module of several graphs", "[parser][round_trip]") {
  const lj::Module m = module_of({lj::llama_prefill(lj::LlamaConfig::small()), lj::llama_decode(lj::LlamaConfig::small())});
  const std::string printed = lj::print_module(m);
  CHECK(lj::print_module(lj::parse_module(printed)) == printed);
}

TEST_CASE("round trip: builder temporaries (%0) and every op kind with attributes", "[parser][round_trip]") {
  lj::GraphBuilder b("ops");
  auto x = b.input("x", lj::DType::F32, {lj::Dim::sym("T"), 64});
  auto s = b.input("scale", lj::DType::F32, {});
  auto cs = b.input("ch_scale", lj::DType::F32, {64});
  auto g = b.gelu(x, "none");
  auto r = b.reshape(g, {lj::Dim::sym("T"), 4, 16});
  auto t = b.transpose(r, {1, 0, 2});
  auto parts = b.split(x, 1, {16, 48});
  auto c = b.concat({parts[1], parts[0]}, -1);
  auto m = b.reduce_mean(c, 1);
  auto mx = b.reduce_max(c, 0);
  auto q = b.quantize(x, s, lj::DType::F8E4M3);
  auto dq = b.dequantize(q, s, lj::DType::BF16);
  auto qc = b.quantize(x, cs, lj::DType::I8, 1);
  auto cast = b.cast(x, lj::DType::F16);
  auto sm = b.softmax(x, 0);
  auto [dyn, dyn_scale] = b.dynamic_quantize(x, lj::DType::F8E4M3, 0);
  auto [whole, whole_scale] = b.dynamic_quantize(g, lj::DType::I8);
  check_round_trip(b.finish({t, m, mx, dq, qc, cast, sm, dyn, dyn_scale, whole, whole_scale}));
}

TEST_CASE("round trip: quantize without a scale names both of its results", "[parser][round_trip]") {
  const std::string text =
      "graph @g(%x: bf16[T, 7]) {\n"
      "  %q, %qs = quantize(%x) {dtype = f8e5m2, axis = 0}\n"
      "  return %q, %qs\n"
      "}\n";
  const lj::Module m = lj::parse_module(text, "dynamic.lj");
  const std::string printed = lj::print_module(m);
  CHECK_THAT(printed, Catch::Contains("%q, %qs = quantize(%x) {dtype = f8e5m2, axis = 0}  // f8e5m2[T, 7], f32[T]"));
  CHECK(lj::print_module(lj::parse_module(printed)) == printed);
}

TEST_CASE("example file: llama3_8b_decoder.lj prints exactly as the C++-built module", "[parser][example]") {
  const std::string text = read_text(example_path());
  const lj::Module parsed = lj::parse_module(text, "llama3_8b_decoder.lj");
  const lj::Module built =
      module_of({lj::llama_prefill(lj::LlamaConfig::llama3_8b()), lj::llama_decode(lj::LlamaConfig::llama3_8b())});
  CHECK(lj::print_module(parsed) == lj::print_module(built));
}

TEST_CASE("parse_file: reads a file and records its path in locations", "[parser][file]") {
  const lj::Module m = lj::parse_file(example_path());
  REQUIRE(m.graphs.size() == 2);
  CHECK(m.graphs[0].name() == "llama3_8b_prefill");
  CHECK(m.graphs[1].name() == "llama3_8b_decode");
  CHECK(m.graphs[0].nodes()[0].loc.file == example_path());
  CHECK(m.find("llama3_8b_decode") == &m.graphs[1]);
}

TEST_CASE("parse_file: a missing file is a user error without a location", "[parser][file]") {
  try {
    lj::parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/no/such/file.lj");
    FAIL("parse_file accepted a missing file");
  } catch (const lj::UserError& e) {
    CHECK_FALSE(e.loc().known());
    CHECK_THAT(e.what(), Catch::Contains("cannot open"));
  }
}

TEST_CASE("parse_file: a directory is a user error", "[parser][file]") {
  CHECK_THROWS_WITH(lj::parse_file(LAYERJIT_SOURCE_DIR), Catch::Contains("is a directory"));
}

// --- locations ------------------------------------------------------------------------------------

TEST_CASE("locations: every node keeps file:line:col of its op name", "[parser][loc]") {
  const lj::Module m = lj::parse_module(in_graph("  %h = silu(%x)\n    %y = matmul(%h, %w)\n  return %y\n"), "m.lj");
  const auto& nodes = m.graphs[0].nodes();
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].loc.file == "m.lj");
  CHECK(nodes[0].loc.line == 2);
  CHECK(nodes[0].loc.col == 8);
  CHECK(nodes[1].loc.line == 3);
  CHECK(nodes[1].loc.col == 10);
  CHECK(nodes[1].loc.str() == "m.lj:3:10");
}

TEST_CASE("locations: inputs point at their %name, the graph at 'graph'", "[parser][loc]") {
  const lj::Module m = lj::parse_module("\n  graph @g(\n    %x: f32[8],\n  %w: param f32[8]) {\n  return %x\n}\n", "in.lj");
  const lj::Graph& g = m.graphs[0];
  CHECK(g.loc().line == 2);
  CHECK(g.loc().col == 3);
  const lj::ValueInfo& x = g.value(g.inputs()[0]);
  const lj::ValueInfo& w = g.value(g.inputs()[1]);
  CHECK((x.loc.line == 3 && x.loc.col == 5));
  CHECK((w.loc.line == 4 && w.loc.col == 3));
  CHECK_FALSE(x.is_param);
  CHECK(w.is_param);
}

TEST_CASE("locations: every result of a multi-result op shares the node's location", "[parser][loc]") {
  const lj::Module m = lj::parse_module(in_graph("  %a, %b = split(%x) {axis = 1, sizes = [32, 32]}\n  return %a, %b\n"));
  const lj::Graph& g = m.graphs[0];
  const lj::Node& n = g.nodes()[0];
  REQUIRE(n.results.size() == 2);
  for (lj::ValueId r : n.results) CHECK(g.value(r).loc.str() == n.loc.str());
  CHECK(g.value(n.results[1]).name == "b");
}

TEST_CASE("locations: a graph-level error in the second graph is located there", "[parser][loc][errors]") {
  const std::string text =
      "graph @a(%x: f32[8]) {\n  return %x\n}\n\ngraph @b(%x: f32[8]) {\n  %y = silu(%x)\n}\n";
  const lj::UserError e = error_of(text);
  CHECK(e.loc().line == 7);
  CHECK(e.loc().col == 1);
  CHECK_THAT(e.what(), Catch::Contains("graph @b has no return"));
}

TEST_CASE("locations: a declared result type mismatch in the second graph points at its return", "[parser][loc][errors]") {
  const std::string text =
      "graph @a(%x: f32[8]) -> f32[8] {\n  return %x\n}\ngraph @b(%x: f32[8]) -> f16[8] {\n  %y = silu(%x)\n  return %y\n}\n";
  CHECK(where_what(text) == "6:3: @b declares result 1 of 1 as f16[8] but returns %y of type f32[8]");
}

// --- syntax ---------------------------------------------------------------------------------------

TEST_CASE("syntax: comments anywhere, including a file that ends in one", "[parser][syntax]") {
  const std::string text =
      "// header\ngraph @g( // inputs follow\n  %x: f32[8] // the only one\n) -> f32[8] { // body\n"
      "  // a full-line comment\n  %y = softmax(%x) {axis = 0} // trailing\n  return %y // done\n} // end";
  const lj::Module m = lj::parse_module(text);
  CHECK(m.graphs[0].nodes().size() == 1);
}

TEST_CASE("syntax: CRLF line endings parse like LF, with the same locations", "[parser][syntax]") {
  const std::string lf = in_graph("  %h = silu(%x)\n  %y = matmul(%h, %w)\n  return %y\n");
  std::string crlf;
  for (char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const lj::Module a = lj::parse_module(lf);
  const lj::Module b = lj::parse_module(crlf);
  CHECK(lj::print_module(a) == lj::print_module(b));
  CHECK(a.graphs[0].nodes()[1].loc.str() == b.graphs[0].nodes()[1].loc.str());
}

TEST_CASE("syntax: a diagnostic on a CRLF line shows no carriage return", "[parser][syntax][diagnostics]") {
  const std::string text = "graph @g(%x: f32[8]) {\r\n  %y = silu(%q)\r\n  return %y\r\n}\r\n";
  const lj::UserError e = error_of(text, "crlf.lj");
  CHECK(lj::format_diagnostic(e, text) == "crlf.lj:2:13: error: undefined value '%q' in @g\n  %y = silu(%q)\n            ^\n");
}

TEST_CASE("syntax: tabs count as one byte column each", "[parser][syntax]") {
  const lj::Module m = lj::parse_module("graph @g(%x: f32[8]) {\n\t\t%y =\tsilu(%x)\n\treturn %y\n}\n");
  CHECK(m.graphs[0].nodes()[0].loc.col == 8);
}

TEST_CASE("syntax: a file without a trailing newline parses", "[parser][syntax]") {
  CHECK(lj::parse_module("graph @g(%x: f32[8]) {\n  return %x\n}").graphs.size() == 1);
}

TEST_CASE("syntax: a UTF-8 byte order mark is skipped", "[parser][syntax]") {
  const lj::Module m = lj::parse_module("\xEF\xBB\xBFgraph @g(%x: f32[8]) {\n  return %x\n}\n");
  CHECK(m.graphs[0].loc().col == 4);  // byte column: the mark's three bytes come first
}

TEST_CASE("syntax: several graphs, kept in file order", "[parser][syntax]") {
  const lj::Module m = lj::parse_module(
      "graph @one(%x: f32[8]) { return %x }\ngraph @two(%x: f32[4]) { %y = exp(%x) return %y }\n"
      "graph @three(%x: f32[2]) { return %x }\n");
  REQUIRE(m.graphs.size() == 3);
  CHECK(m.graphs[0].name() == "one");
  CHECK(m.graphs[1].name() == "two");
  CHECK(m.graphs[2].name() == "three");
  CHECK(m.graphs[1].nodes().size() == 1);
}

TEST_CASE("syntax: free formatting, everything on one line", "[parser][syntax]") {
  const lj::Module m = lj::parse_module(
      "graph @g(%x:bf16[T,64],%w:param bf16[128,64])->bf16[T,128]{%h=silu(%x)%y=matmul(%h,%w)return %y}");
  CHECK(m.graphs[0].nodes().size() == 2);
}

TEST_CASE("syntax: scalars f32[] as inputs and results", "[parser][syntax]") {
  const lj::Module m = lj::parse_module(
      "graph @g(%x: f32[16], %s: f32[]) -> i8[16], f32[] {\n"
      "  %q = quantize(%x, %s) {dtype = i8, axis = none}\n  %e = exp(%s)\n  return %q, %e\n}\n");
  const lj::Graph& g = m.graphs[0];
  CHECK(g.value(g.inputs()[1]).type.rank() == 0);
  CHECK(g.value(g.outputs()[1]).type.str() == "f32[]");
}

TEST_CASE("syntax: value names may start with a digit and contain dots", "[parser][syntax]") {
  const lj::Module m = lj::parse_module("graph @g.v1(%0: f32[8], %a.b: f32[8]) {\n  %1 = add(%0, %a.b)\n  return %1\n}\n");
  const lj::Graph& g = m.graphs[0];
  CHECK(g.name() == "g.v1");
  CHECK(g.value(g.outputs()[0]).name == "1");
}

TEST_CASE("syntax: keywords are usable as value and symbol names", "[parser][syntax]") {
  const lj::Module m =
      lj::parse_module("graph @graph(%return: f32[param, 8], %graph: f32[8]) {\n  %param = add(%return, %graph)\n  return %param\n}\n");
  CHECK(m.graphs[0].value(m.graphs[0].outputs()[0]).type.str() == "f32[param, 8]");
}

TEST_CASE("syntax: non-ASCII text is fine in comments and strings", "[parser][syntax]") {
  CHECK_NOTHROW(lj::parse_module("// café, 日本語\ngraph @g(%x: f32[8]) { return %x }\n"));
  // The string lexes; the op then rejects the value (a choice error, not a lexing error).
  CHECK_THAT(where_what(in_graph("  %y = gelu(%x) {approx = \"tånh\"}\n  return %y\n")),
             Catch::Contains("must be one of \"tanh\", \"none\", got \"tånh\""));
}

TEST_CASE("syntax: string escapes of a quote and a backslash are decoded", "[parser][syntax]") {
  CHECK_THAT(where_what(in_graph("  %y = gelu(%x) {approx = \"a\\\"b\\\\c\"}\n  return %y\n")),
             Catch::Contains("got \"a\\\"b\\\\c\""));
  CHECK_THAT(where_what(in_graph("  %y = gelu(%x) {approx = \"a\\nb\"}\n  return %y\n")),
             Catch::Contains("unknown escape sequence '\\n'"));
}

// --- attributes -----------------------------------------------------------------------------------

TEST_CASE("attributes: integer, including negative, stays an integer", "[parser][attrs]") {
  const lj::Node n = only_node(lj::parse_module(in_graph("  %y = softmax(%x) {axis = -1}\n  return %y\n")));
  CHECK(n.attrs.get_int("axis") == -1);
}

TEST_CASE("attributes: floats in every spelling the printer uses", "[parser][attrs]") {
  for (const char* spelling : {"1e-05", "1E-5", "0.5", "2.5e+3", "3", "1e+20"}) {
    INFO(spelling);
    const std::string fixed = "graph @g(%x: f32[T, 8], %n: f32[8]) {\n  %y = rms_norm(%x, %n) {eps = " + std::string(spelling) +
                              "}\n  return %y\n}\n";
    const lj::Node n = only_node(lj::parse_module(fixed));
    CHECK(n.attrs.get_float("eps") == std::stod(spelling));
    CHECK(std::holds_alternative<double>(n.attrs.find("eps")->v));  // an integer is stored as a float
  }
}

TEST_CASE("attributes: string, bool and dtype values", "[parser][attrs]") {
  const lj::Module m = lj::parse_module(
      "graph @g(%q: f16[T, 4, 16], %k: f16[T, 2, 16], %v: f16[T, 2, 16]) {\n"
      "  %a = attention(%q, %k, %v) {causal = false, scale = 0.25}\n  %b = gelu(%a) {approx = \"none\"}\n"
      "  %c = cast(%b) {dtype = bf16}\n  return %c\n}\n");
  const auto& nodes = m.graphs[0].nodes();
  CHECK_FALSE(nodes[0].attrs.get_bool("causal"));
  CHECK(nodes[0].attrs.get_float("scale") == 0.25);
  CHECK(nodes[1].attrs.get_string("approx") == "none");
  CHECK(nodes[2].attrs.get_dtype("dtype") == lj::DType::BF16);
}

TEST_CASE("attributes: a bare name (axis = none)", "[parser][attrs]") {
  const lj::Node n = only_node(lj::parse_module(
      "graph @g(%x: f32[8], %s: f32[1]) {\n  %q = quantize(%x, %s) {dtype = f8e4m3, axis = none}\n  return %q\n}\n"));
  const auto* axis = std::get_if<lj::Name>(&n.attrs.find("axis")->v);
  REQUIRE(axis != nullptr);
  CHECK(axis->text == "none");
}

TEST_CASE("attributes: integer lists and shape lists with symbols", "[parser][attrs]") {
  const lj::Module m = lj::parse_module(in_graph(
      "  %r = reshape(%x) {shape = [T, 4, 16]}\n  %t = transpose(%r) {perm = [2, 0, 1]}\n  return %t\n"));
  const auto& nodes = m.graphs[0].nodes();
  CHECK(lj::shape_str(nodes[0].attrs.get_shape("shape")) == "[T, 4, 16]");
  CHECK(nodes[1].attrs.get_int_list("perm") == std::vector<int64_t>{2, 0, 1});
  CHECK(m.graphs[0].value(m.graphs[0].outputs()[0]).type.str() == "bf16[16, T, 4]");
}

TEST_CASE("attributes: an empty list parses and the op judges it", "[parser][attrs]") {
  CHECK_THAT(where_what(in_graph("  %a = split(%x) {axis = 1, sizes = []}\n  return %a\n")),
             Catch::Contains("sizes must not be empty"));
}

TEST_CASE("attributes: nesting is accepted up to 64 levels and refused beyond", "[parser][attrs]") {
  auto nested = [](int depth) {
    return in_graph("  %y = reshape(%x) {shape = " + std::string(static_cast<size_t>(depth), '[') +
                    std::string(static_cast<size_t>(depth), ']') + "}\n  return %y\n");
  };
  // 64 levels parse; the op then rejects a nested list as a shape.
  CHECK_THAT(error_of(nested(64)).what(), Catch::Contains("attribute 'shape' must be a shape"));
  CHECK_THAT(error_of(nested(65)).what(), Catch::Contains("nested too deeply"));
  CHECK_THAT(error_of(nested(100000)).what(), Catch::Contains("nested too deeply"));
}

TEST_CASE("attributes: errors point at the attribute at fault", "[parser][attrs][errors]") {
  CHECK(where_what(in_graph("  %y = softmax(%x) {axis = 1, bogus = 2}\n  return %y\n")) ==
        "2:31: softmax: unknown attribute 'bogus' (expected one of: axis)");
  CHECK(where_what(in_graph("  %a, %b = split(%x) {sizes = [32, 32], axis = \"1\"}\n  return %a\n")) ==
        "2:41: split: attribute 'axis' must be an integer, got string \"1\"");
  // A missing required attribute belongs to the op.
  CHECK(where_what(in_graph("  %a, %b = split(%x) {sizes = [32, 32]}\n  return %a\n")) ==
        "2:12: split: missing required attribute 'axis' (an integer)");
}

TEST_CASE("attributes: integers must fit int64", "[parser][attrs][errors]") {
  CHECK_THAT(where_what(in_graph("  %y = softmax(%x) {axis = -9223372036854775808}\n  return %y\n")),
             Catch::Contains("axis -9223372036854775808 is out of range"));
  CHECK(where_what(in_graph("  %y = softmax(%x) {axis = 9223372036854775808}\n  return %y\n")) ==
        "2:28: integer 9223372036854775808 is out of range: integers must fit in a signed 64-bit integer");
}

// --- declared result types ------------------------------------------------------------------------

TEST_CASE("declared results: matching types are accepted", "[parser][results]") {
  const lj::Module m = lj::parse_module(
      "graph @g(%x: bf16[T, 64]) -> bf16[T, 32], bf16[T, 32] {\n"
      "  %a, %b = split(%x) {axis = 1, sizes = [32, 32]}\n  return %a, %b\n}\n");
  CHECK(m.graphs[0].outputs().size() == 2);
}

TEST_CASE("declared results: a wrong type or count is reported at the return", "[parser][results][errors]") {
  CHECK(where_what("graph @g(%x: f32[8]) -> f32[4] {\n  return %x\n}\n") ==
        "2:3: @g declares result 1 of 1 as f32[4] but returns %x of type f32[8]");
  CHECK(where_what("graph @g(%x: f32[8]) -> f32[8] {\n  return %x, %x\n}\n") ==
        "2:3: @g declares 1 result type but returns 2 values");
}

// --- errors ---------------------------------------------------------------------------------------

TEST_CASE("errors: undefined, used before definition and redefined values", "[parser][errors]") {
  CHECK(where_what(in_graph("  %y = silu(%nope)\n  return %y\n")) == "2:13: undefined value '%nope' in @g");
  CHECK(where_what(in_graph("  %y = silu(%h)\n  %h = relu(%x)\n  return %y\n")) ==
        "2:13: value '%h' is used before its definition at line 3");
  CHECK(where_what(in_graph("  %x = silu(%x)\n  return %x\n")) == "2:3: redefinition of value '%x' in @g");
  CHECK(where_what(in_graph("  %a, %b = split(%x) {axis = 1, sizes = [32, 32]}\n  %c, %b = split(%x) {axis = 1, sizes = [32, 32]}\n  return %a\n")) ==
        "3:7: redefinition of value '%b' in @g");
}

TEST_CASE("errors: op-level failures point at the op name", "[parser][errors]") {
  CHECK(where_what("graph @g(%x: f32[4, 8], %w: f32[16, 4]) {\n  %y = matmul(%x, %w)\n  return %y\n}\n") ==
        "2:8: matmul: shape mismatch: x is f32[4, 8] but w is f32[16, 4] (inner dimensions 8 and 4 differ)");
  CHECK(where_what(in_graph("  %y = add(%x, %x, %x)\n  return %y\n")) == "2:8: add: expected 2 operands (a, b), got 3");
  CHECK(where_what(in_graph("  %a = split(%x) {axis = 1, sizes = [32, 32]}\n  return %a\n")) ==
        "2:8: split: produces 2 results but 1 name is given");
  const std::string qkv = "graph @g(%q: bf16[T, 8, 64], %k: bf16[T, 2, 64]) {\n";
  CHECK(where_what(qkv + "  %o = attention(%q, %k, %k) {lse = true}\n  return %o\n}\n") ==
        "2:8: attention: produces 2 results but 1 name is given (with lse = true attention returns the output and each row's "
        "log-sum-exp: %o, %lse = attention(...) {lse = true})");
  CHECK(where_what(qkv + "  %o, %l = attention(%q, %k, %k)\n  return %o\n}\n") ==
        "2:12: attention: produces 1 result but 2 names are given (attention returns each row's log-sum-exp as a second result "
        "only with lse = true)");
}

TEST_CASE("errors: unknown op, with a suggestion only for a near miss", "[parser][errors]") {
  CHECK(where_what(in_graph("  %y = sillu(%x)\n  return %y\n")) == "2:8: unknown op 'sillu' (did you mean 'silu'?)");
  CHECK(where_what(in_graph("  %y = frobnicate(%x)\n  return %y\n")) == "2:8: unknown op 'frobnicate'");
}

TEST_CASE("errors: structure (empty file, missing return, unterminated graph, after return)", "[parser][errors]") {
  CHECK_THAT(where_what(""), Catch::StartsWith("1:1: empty file"));
  CHECK_THAT(where_what("  // only a comment\n"), Catch::StartsWith("2:1: empty file"));
  CHECK(where_what("graph @g(%x: f32[8]) {\n}\n") == "2:1: graph @g has no return: a graph must return at least one value");
  CHECK(where_what("graph @g(%x: f32[8]) {\n  return %x\n") ==
        "1:22: unterminated graph @g: no '}' closes this body before the end of the file");
  CHECK(where_what("graph @g(%x: f32[8]) {\n  return %x\ngraph @h(%x: f32[8]) {\n  return %x\n}\n") ==
        "1:22: unterminated graph @g: no '}' closes this body before the next graph (line 3)");
  CHECK(where_what("graph @g(%x: f32[8]) {\n  return %x\n  return %x\n}\n") ==
        "3:3: expected '}' after the return (nothing may follow 'return' in a graph), found 'return'");
}

TEST_CASE("errors: unexpected tokens say what was expected and what was found", "[parser][errors]") {
  CHECK(where_what("graph @g(%x f32[8]) {\n  return %x\n}\n") == "1:13: expected ':' after '%x', found 'f32'");
  CHECK(where_what("graph @g(%x: f32[8] {\n  return %x\n}\n") == "1:21: expected ',' or ')' after a parameter, found '{'");
  CHECK(where_what("graph @g(%x: f32[8]) {\n  %y silu(%x)\n  return %y\n}\n") ==
        "2:6: expected '=' or ',' after a result name, found 'silu'");
  CHECK(where_what("module @g(%x: f32[8]) {}\n") == "1:1: expected 'graph', found 'module'");
  CHECK(where_what("graph @g(%x: f32[8 8]) {\n  return %x\n}\n") == "1:20: expected ',' or ']' after a dimension, found '8'");
}

TEST_CASE("errors: dimensions must be positive, in inputs and reshapes", "[parser][errors]") {
  CHECK(where_what("graph @g(%x: f32[4, 0, 2]) {\n  return %x\n}\n") ==
        "1:21: bad dimension 0 in [4, 0, 2]: dimensions must be positive");
  CHECK_THAT(where_what(in_graph("  %y = reshape(%x) {shape = [T, -64]}\n  return %y\n")),
             Catch::Contains("bad dimension -64"));
}

TEST_CASE("errors: malformed numbers and characters", "[parser][errors]") {
  CHECK(where_what("graph @g(%x: f32[12abc]) {\n  return %x\n}\n") == "1:18: invalid number '12abc'");
  CHECK(where_what("graph @g(%x: f32[8]) {\n  return %x;\n}\n") == "2:12: unexpected character ';'");
  CHECK(where_what("graph @g(%x: f32[8]) { / }") == "1:24: unexpected character '/': comments start with '//'");
  CHECK(where_what("graph @g(%x: f32[8]) {\x01}") == "1:23: unexpected control character U+0001");
  CHECK(where_what("graph @g(%: f32[8]) {}") == "1:10: expected a value name after '%' (letters, digits, '_' and '.')");
}

TEST_CASE("errors: binary input and invalid UTF-8 name the byte and its offset", "[parser][errors]") {
  CHECK(where_what(std::string("graph\0@g", 8)) ==
        "1:6: binary input: NUL byte (0x00) at byte offset 5; IR files are UTF-8 text");
  CHECK(where_what("// \xC0\x80\n") == "1:4: invalid UTF-8: byte 0xc0 at byte offset 3 never occurs in UTF-8");
  CHECK(where_what("//\n// \xED\xA0\x80\n") ==
        "2:4: invalid UTF-8: bytes 0xed 0xa0 at byte offset 6 encode an overlong form, a surrogate or a code point above U+10FFFF");
  CHECK(where_what("// \xF0\x9F\x98") ==
        "1:4: invalid UTF-8: byte 0xf0 at byte offset 3 starts a 4-byte sequence but the input ends after 3 bytes");
  CHECK(where_what("// \x80") == "1:4: invalid UTF-8: unexpected continuation byte 0x80 at byte offset 3");
}

TEST_CASE("errors: every prefix of the example file parses or fails cleanly with a location", "[parser][errors][robust]") {
  const std::string text = read_text(example_path());
  for (size_t n = 0; n <= text.size(); n += 7) {
    try {
      lj::parse_module(std::string_view(text).substr(0, n), "prefix.lj");
    } catch (const lj::UserError& e) {
      INFO("prefix of " << n << " bytes: " << e.formatted());
      REQUIRE(e.loc().known());
      REQUIRE(e.loc().line >= 1);
    }
  }
}

// --- diagnostics ----------------------------------------------------------------------------------

TEST_CASE("diagnostics: header, source line and caret", "[parser][diagnostics]") {
  const std::string text = in_graph("  %y = silu(%x, %x)\n  return %y\n");
  const lj::UserError e = error_of(text, "d.lj");
  CHECK(lj::format_diagnostic(e, text) ==
        "d.lj:2:8: error: silu: expected 1 operand (x), got 2\n  %y = silu(%x, %x)\n       ^\n");
}

TEST_CASE("diagnostics: an error without a location prints only the header", "[parser][diagnostics]") {
  CHECK(lj::format_diagnostic(lj::UserError("cannot open 'x.lj'"), "anything") == "error: cannot open 'x.lj'\n");
}

TEST_CASE("diagnostics: a location past the text prints only the header", "[parser][diagnostics]") {
  const lj::UserError e("boom", lj::SourceLoc{"f.lj", 9, 1});
  CHECK(lj::format_diagnostic(e, "one line\n") == "f.lj:9:1: error: boom\n");
}

TEST_CASE("diagnostics: tabs are kept in the caret line so the caret lines up", "[parser][diagnostics]") {
  const std::string text = "graph @g(%x: f32[8]) {\n\t%y =\tsilu(%q)\n\treturn %y\n}\n";
  const lj::UserError e = error_of(text, "tab.lj");
  CHECK(lj::format_diagnostic(e, text) == "tab.lj:2:12: error: undefined value '%q' in @g\n\t%y =\tsilu(%q)\n\t    \t     ^\n");
}

TEST_CASE("diagnostics: a very long line is cut to a window around the column", "[parser][diagnostics]") {
  std::string text = "graph @g(%x: f32[8]) { %y = silu(%x)" + std::string(5000, ' ') + "%z }";
  const lj::UserError e = error_of(text, "long.lj");
  const std::string d = lj::format_diagnostic(e, text);
  CHECK(d.size() < 600);
  CHECK_THAT(d, Catch::Contains("\n...") && Catch::Contains("%z }\n"));
  // `%z }` reads as a statement missing its '=': the caret sits under the '}'.
  CHECK_THAT(e.what(), Catch::Contains("found '}'"));
  const size_t line_start = d.find('\n') + 1;
  const size_t caret_start = d.find('\n', line_start) + 1;
  const size_t caret_col = d.find('^', caret_start) - caret_start;
  CHECK(d.substr(line_start + caret_col, 2) == "}\n");
}

TEST_CASE("diagnostics: control bytes in the shown line are escaped", "[parser][diagnostics]") {
  const std::string text("graph @g(%x: f32[8]) {\n  return %x\0\n}\n", 37);
  const lj::UserError e = error_of(text, "nul.lj");
  CHECK(lj::format_diagnostic(e, text) ==
        "nul.lj:2:12: error: binary input: NUL byte (0x00) at byte offset 34; IR files are UTF-8 text\n"
        "  return %x\\x00\n           ^\n");
}

// --- scale ----------------------------------------------------------------------------------------

TEST_CASE("scale: a long chain of statements parses in reasonable time", "[parser][scale]") {
  std::string text = "graph @chain(%v0: f32[T, 8]) {\n";
  const int n = 3000;
  for (int i = 1; i <= n; ++i) text += "  %v" + std::to_string(i) + " = silu(%v" + std::to_string(i - 1) + ")\n";
  text += "  return %v" + std::to_string(n) + "\n}\n";
  const auto start = std::chrono::steady_clock::now();
  const lj::Module m = lj::parse_module(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(m.graphs[0].nodes().size() == static_cast<size_t>(n));
  CHECK(seconds < 20.0);
}

TEST_CASE("scale: a huge identifier and a huge comment are handled", "[parser][scale]") {
  const std::string huge(1 << 20, 'a');
  const lj::UserError e = error_of("graph @g(%x: " + huge + "[8]) { return %x }");
  CHECK(std::string(e.what()).size() < 200);  // spellings are shortened in messages
  CHECK_NOTHROW(lj::parse_module("//" + huge + "\ngraph @g(%x: f32[8]) { return %x }"));
}

TEST_CASE("scale: a statement with 200000 attributes is rejected quickly", "[parser][scale]") {
  std::string attrs;
  for (int i = 0; i < 200000; ++i) attrs += (i ? ", a" : "a") + std::to_string(i) + " = 1";
  const auto start = std::chrono::steady_clock::now();
  CHECK(where_what(in_graph("  %y = softmax(%x) {" + attrs + "}\n  return %y\n")) ==
        "2:21: softmax: unknown attribute 'a0' (expected one of: axis)");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 20.0);
}

TEST_CASE("scale: concat of 100000 operands", "[parser][scale]") {
  std::string operands;
  for (int i = 0; i < 100000; ++i) operands += i ? ", %x" : "%x";
  const lj::Module m = lj::parse_module("graph @g(%x: f32[2, 3]) {\n  %y = concat(" + operands + ") {axis = 0}\n  return %y\n}\n");
  CHECK(m.graphs[0].value(m.graphs[0].outputs()[0]).type.str() == "f32[200000, 3]");
}
