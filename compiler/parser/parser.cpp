// The text IR parser: a hand-written recursive-descent parser over the lexer's tokens, one token of
// lookahead. It builds graphs only through GraphBuilder, so every op is verified and typed exactly as
// for the C++ API; its own job is syntax, name resolution and putting each error on the right token.
// Grammar (docs/ir.md):
//   file    := graph+
//   graph   := 'graph' '@' NAME '(' [param {',' param}] ')' ['->' type {',' type}] '{' stmt* '}'
//   param   := '%' NAME ':' ['param'] type
//   type    := DTYPE '[' [dim {',' dim}] ']'            dim := INT | NAME
//   stmt    := '%' NAME {',' '%' NAME} '=' OP '(' [operand {',' operand}] ')' [attrs]
//            | 'return' operand {',' operand}           (only '}' may follow)
//   attrs   := '{' NAME '=' attr {',' NAME '=' attr} '}'
//   attr    := INT | FLOAT | STRING | 'true' | 'false' | DTYPE | NAME | '[' [attr {',' attr}] ']'
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ir/identifier.h"

#include "compiler/parser/edit_distance.h"
#include "compiler/parser/lexer.h"
#include "compiler/parser/op_error_location.h"
#include "compiler/parser/utf8.h"
#include "layerjit/builder.h"
#include "layerjit/text.h"
#include "ops/op_schema.h"
#include "layerjit/check.h"

namespace lj {

namespace {

using parser::Lexer;
using parser::StmtLocs;
using parser::Token;
using parser::TokKind;

// Attribute lists are the only recursive construct; bounding them bounds the parser's stack.
constexpr int kMaxAttrNesting = 64;

std::string unknown_op_message(std::string_view name) {
  std::string msg = fmt::format("unknown op '{}'", name);
  std::string_view best;
  size_t best_distance = 3;  // suggest only near misses
  for (OpKind k : all_op_kinds()) {
    const size_t d = edit_distance(name, op_name(k));
    if (d < best_distance) {
      best_distance = d;
      best = op_name(k);
    }
  }
  if (!best.empty()) msg += fmt::format(" (did you mean '{}'?)", best);
  return msg;
}

std::string dtype_list() {
  std::string out;
  for (DType t : all_dtypes()) out += (out.empty() ? "" : ", ") + std::string(dtype_name(t));
  return out;
}

/// A parsed `dtype[dims]`, with where each dimension was written.
struct ParsedType {
  TensorType type;
  std::vector<SourceLoc> dim_locs;
};

/// One `name = value` of an attribute list.
struct ParsedAttr {
  std::string_view name;  // points into the source text, which outlives the parse
  AttrValue value;
  SourceLoc loc;
};

/// The graph being parsed: its builder and the values defined so far by name. The index mirrors the
/// builder's names (the parser names every value itself), so resolving an operand is O(1).
struct GraphScope {
  GraphBuilder& builder;
  std::string name;
  std::unordered_map<std::string, Value> values;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view filename) : lex_(text, filename) {}

  Module parse_file();

 private:
  SourceLoc loc(const Token& t) const { return lex_.loc(t); }
  void advance() { tok_ = lex_.next(); }
  bool at_keyword(std::string_view kw) const { return tok_.kind == TokKind::Ident && tok_.text == kw; }
  [[noreturn]] void fail_at(const Token& t, std::string msg) const { throw UserError(std::move(msg), loc(t)); }
  /// "expected WHAT, found TOKEN" at the current token.
  [[noreturn]] void unexpected(std::string_view what) const {
    fail_at(tok_, fmt::format("expected {}, found {}", what, parser::describe(tok_)));
  }
  Token expect(TokKind k, std::string_view what) {
    if (tok_.kind != k) unexpected(what);
    Token t = std::move(tok_);
    advance();
    return t;
  }

  /// A graph body that reaches the end of the file, or the next graph, without its '}': reported at
  /// the '{' that opened it, since that is where the reader must look.
  [[noreturn]] void fail_unterminated(const Token& lbrace, std::string_view graph_name) const {
    fail_at(lbrace, fmt::format("unterminated graph @{}: no '}}' closes this body before {}", parser::shorten(graph_name),
                                tok_.kind == TokKind::Eof ? "the end of the file"
                                                          : fmt::format("the next graph (line {})", tok_.line)));
  }

  Graph parse_graph();
  void parse_param(GraphScope& scope);
  ParsedType parse_type();
  void parse_stmt(GraphScope& scope);
  Value parse_operand(const GraphScope& scope);
  std::vector<ParsedAttr> parse_attrs();
  AttrValue parse_attr_value(int depth);
  std::optional<SourceLoc> find_later_definition(std::string_view name) const;

  Lexer lex_;
  Token tok_;
  std::unordered_map<std::string, SourceLoc> graph_names_;  // for redefinition errors
  std::unordered_map<std::string, std::string> graph_idents_;  // C++ identifier -> the graph name that has it
};

Module Parser::parse_file() {
  advance();
  if (tok_.kind == TokKind::Eof)
    fail_at(tok_, "empty file: expected at least one graph ('graph @name(...) { ... }')");
  Module m;
  while (tok_.kind != TokKind::Eof) {
    if (!at_keyword("graph")) unexpected(m.graphs.empty() ? "'graph'" : "'graph' or end of file");
    m.graphs.push_back(parse_graph());
  }
  return m;
}

Graph Parser::parse_graph() {
  const Token kw = expect(TokKind::Ident, "'graph'");
  const Token name_tok = expect(TokKind::GraphName, "a graph name ('@name') after 'graph'");
  const std::string name(name_tok.name());
  if (auto [it, fresh] = graph_names_.emplace(name, loc(name_tok)); !fresh)
    fail_at(name_tok, fmt::format("redefinition of graph @{} (first defined at line {})", parser::shorten(name), it->second.line));
  // Kernels are named after their graph's C++ identifier: two graphs of one would give kernels one name.
  if (auto [it, fresh] = graph_idents_.emplace(cpp_identifier(name), name); !fresh)
    fail_at(name_tok, identifier_collision("graphs", "@" + parser::shorten(it->second), "@" + parser::shorten(name),
                                           parser::shorten(it->first), "in the names of their kernels"));
  GraphBuilder b(name, loc(kw));
  GraphScope scope{b, name, {}};

  expect(TokKind::LParen, fmt::format("'(' after '@{}'", parser::shorten(name)));
  if (tok_.kind != TokKind::RParen) {
    for (;;) {
      parse_param(scope);
      if (tok_.kind != TokKind::Comma) break;
      advance();
    }
  }
  expect(TokKind::RParen, "',' or ')' after a parameter");

  bool declared = false;
  if (tok_.kind == TokKind::Arrow) {
    const Token arrow = tok_;
    advance();
    std::vector<TensorType> types;
    for (;;) {
      types.push_back(parse_type().type);
      if (tok_.kind != TokKind::Comma) break;
      advance();
    }
    b.declare_outputs(std::move(types), loc(arrow));
    declared = true;
  }
  const Token lbrace = expect(TokKind::LBrace, declared ? "',' or '{' after a result type" : "'->' or '{' after the parameters");

  for (;;) {
    if (tok_.kind == TokKind::ValueName) {
      parse_stmt(scope);
    } else if (at_keyword("return")) {
      const Token ret = tok_;
      advance();
      std::vector<Value> outputs;
      for (;;) {
        outputs.push_back(parse_operand(scope));
        if (tok_.kind != TokKind::Comma) break;
        advance();
      }
      if (tok_.kind == TokKind::Eof || at_keyword("graph")) fail_unterminated(lbrace, name);
      if (tok_.kind != TokKind::RBrace) unexpected("'}' after the return (nothing may follow 'return' in a graph)");
      advance();
      return b.finish(outputs, loc(ret));
    } else if (tok_.kind == TokKind::RBrace) {
      b.finish({}, loc(tok_));  // no return: finish reports it
      LJ_ASSERT(false, "GraphBuilder::finish accepted a graph without outputs");
    } else if (tok_.kind == TokKind::Eof || at_keyword("graph")) {
      fail_unterminated(lbrace, name);
    } else {
      unexpected("a statement ('%name = op(...)' or 'return %name') or '}'");
    }
  }
}

void Parser::parse_param(GraphScope& scope) {
  GraphBuilder& b = scope.builder;
  const Token name_tok = expect(TokKind::ValueName, "a parameter ('%name: type')");
  expect(TokKind::Colon, fmt::format("':' after '{}'", parser::shorten(name_tok.text)));
  bool is_param = false;
  if (at_keyword("param")) {
    is_param = true;
    advance();
  }
  ParsedType t = parse_type();
  const std::string name(name_tok.name());
  try {
    Value v = is_param ? b.param(name, t.type.dtype, t.type.shape, loc(name_tok))
                       : b.input(name, t.type.dtype, t.type.shape, loc(name_tok));
    scope.values.emplace(name, v);
  } catch (const UserError& e) {
    // The builder names a bad dimension; put the caret on it rather than on the parameter's name.
    if (!b.lookup(name)) {
      for (size_t i = 0; i < t.type.shape.size(); ++i) {
        const Dim& d = t.type.shape[i];
        if (d.is_const() && d.value() <= 0) throw UserError(e.what(), t.dim_locs[i]);
      }
    }
    throw;
  }
}

ParsedType Parser::parse_type() {
  if (tok_.kind != TokKind::Ident) unexpected("a type such as 'bf16[T, 4096]'");
  const Token dt = tok_;
  const auto dtype = parse_dtype(dt.text);
  if (!dtype) fail_at(dt, fmt::format("unknown dtype '{}' (expected one of: {})", parser::shorten(dt.text), dtype_list()));
  advance();
  expect(TokKind::LBracket, fmt::format("'[' after '{}'", dt.text));
  ParsedType out;
  out.type.dtype = *dtype;
  if (tok_.kind != TokKind::RBracket) {
    for (;;) {
      if (tok_.kind == TokKind::Int) out.type.shape.emplace_back(tok_.int_value);
      else if (tok_.kind == TokKind::Ident) out.type.shape.push_back(Dim::sym(std::string(tok_.text)));
      else unexpected("a dimension (an integer or a symbol name)");
      out.dim_locs.push_back(loc(tok_));
      advance();
      if (tok_.kind != TokKind::Comma) break;
      advance();
    }
  }
  expect(TokKind::RBracket, "',' or ']' after a dimension");
  return out;
}

void Parser::parse_stmt(GraphScope& scope) {
  GraphBuilder& b = scope.builder;
  std::vector<std::string> names;
  StmtLocs locs;
  for (;;) {
    const Token t = expect(TokKind::ValueName, "a result name ('%name')");
    names.emplace_back(t.name());
    locs.results.push_back(loc(t));
    if (tok_.kind != TokKind::Comma) break;
    advance();
  }
  expect(TokKind::Equal, "'=' or ',' after a result name");
  if (tok_.kind != TokKind::Ident) unexpected("an op name");
  const Token op_tok = tok_;
  const auto kind = parse_op_kind(op_tok.text);
  if (!kind) fail_at(op_tok, unknown_op_message(parser::shorten(op_tok.text)));
  locs.op = loc(op_tok);
  advance();

  expect(TokKind::LParen, fmt::format("'(' after '{}'", op_tok.text));
  std::vector<Value> operands;
  if (tok_.kind != TokKind::RParen) {
    for (;;) {
      operands.push_back(parse_operand(scope));
      if (tok_.kind != TokKind::Comma) break;
      advance();
    }
  }
  expect(TokKind::RParen, "',' or ')' after an operand");

  std::vector<ParsedAttr> given;
  if (tok_.kind == TokKind::LBrace) given = parse_attrs();
  // check_attrs stops at the first bad attribute in the order given, and among more distinct names
  // than the op has attributes one must be unknown; so only the first (count + 1) can decide the
  // outcome. Passing just those keeps a statement with a million attributes linear.
  const size_t keep = std::min(given.size(), op_schema(*kind).attrs.size() + 1);
  Attrs attrs;
  for (size_t i = 0; i < keep; ++i) {
    attrs.set(std::string(given[i].name), std::move(given[i].value));
    locs.attrs.push_back(std::move(given[i].loc));
  }
  try {
    const std::vector<Value> results = b.op(*kind, operands, attrs, locs.op, names);
    for (size_t i = 0; i < results.size(); ++i) scope.values.emplace(names[i], results[i]);
  } catch (const UserError& e) {
    SourceLoc at = parser::locate_op_error(e, b, *kind, operands, attrs, names, locs);
    if (at.line == e.loc().line && at.col == e.loc().col) throw;
    throw UserError(e.what(), std::move(at));
  }
}

Value Parser::parse_operand(const GraphScope& scope) {
  if (tok_.kind != TokKind::ValueName) unexpected("a value ('%name')");
  const Token t = tok_;
  if (auto it = scope.values.find(std::string(t.name())); it != scope.values.end()) {
    advance();
    return it->second;
  }
  const std::string shown = parser::describe(t);  // quoted, shortened
  if (auto later = find_later_definition(t.name()))
    fail_at(t, fmt::format("value {} is used before its definition at line {}", shown, later->line));
  fail_at(t, fmt::format("undefined value {} in @{}", shown, parser::shorten(scope.name)));
}

std::vector<ParsedAttr> Parser::parse_attrs() {
  advance();  // '{'
  std::vector<ParsedAttr> out;
  std::unordered_map<std::string_view, int> first_col;  // duplicate detection, O(1) per attribute
  for (;;) {
    if (tok_.kind != TokKind::Ident) unexpected("an attribute name");
    const Token name = tok_;
    if (auto [it, fresh] = first_col.emplace(name.text, name.col); !fresh)
      fail_at(name, fmt::format("duplicate attribute '{}' (first given at column {})", parser::shorten(name.text), it->second));
    advance();
    expect(TokKind::Equal, fmt::format("'=' after attribute '{}'", parser::shorten(name.text)));
    AttrValue value = parse_attr_value(0);
    out.push_back({name.text, std::move(value), loc(name)});
    if (tok_.kind != TokKind::Comma) break;
    advance();
  }
  expect(TokKind::RBrace, "',' or '}' after an attribute");
  return out;
}

AttrValue Parser::parse_attr_value(int depth) {
  const Token t = tok_;
  switch (t.kind) {
    case TokKind::Int: advance(); return t.int_value;
    case TokKind::Float: advance(); return t.float_value;
    case TokKind::String: advance(); return t.str_value;
    case TokKind::Ident: {
      advance();
      if (t.text == "true") return true;
      if (t.text == "false") return false;
      if (auto d = parse_dtype(t.text)) return *d;
      return Name{std::string(t.text)};
    }
    case TokKind::LBracket: {
      if (depth >= kMaxAttrNesting)
        fail_at(t, fmt::format("attribute lists are nested too deeply (at most {} levels)", kMaxAttrNesting));
      advance();
      AttrList list;
      if (tok_.kind != TokKind::RBracket) {
        for (;;) {
          list.push_back(parse_attr_value(depth + 1));
          if (tok_.kind != TokKind::Comma) break;
          advance();
        }
      }
      expect(TokKind::RBracket, "',' or ']' after a list element");
      return list;
    }
    case TokKind::ValueName:
    case TokKind::GraphName:
    case TokKind::LParen:
    case TokKind::RParen:
    case TokKind::LBrace:
    case TokKind::RBrace:
    case TokKind::RBracket:
    case TokKind::Comma:
    case TokKind::Colon:
    case TokKind::Equal:
    case TokKind::Arrow:
    case TokKind::Eof: unexpected("an attribute value");
  }
  LJ_ASSERT(false, "unhandled token kind {}", static_cast<int>(t.kind));
  __builtin_unreachable();
}

// Scans the rest of the current graph for a statement defining %name, to tell "used before its
// definition" from "undefined". Runs only on that error path, on a copy of the lexer.
std::optional<SourceLoc> Parser::find_later_definition(std::string_view name) const {
  Lexer scan = lex_;
  bool at_stmt_start = false;  // just after ')' or '}', where a statement's result names begin
  bool matched = false;        // one of the names read since the statement start is %name
  SourceLoc match;
  try {
    for (Token t = scan.next(); t.kind != TokKind::Eof; t = scan.next()) {
      if (t.kind == TokKind::Ident && t.text == "graph") return std::nullopt;
      if (at_stmt_start && t.kind == TokKind::ValueName) {
        if (!matched && t.name() == name) {
          matched = true;
          match = scan.loc(t);
        }
        continue;
      }
      if (at_stmt_start && t.kind == TokKind::Comma) continue;
      if (at_stmt_start && t.kind == TokKind::Equal && matched) return match;
      matched = false;
      at_stmt_start = t.kind == TokKind::RParen || t.kind == TokKind::RBrace;
    }
  } catch (const UserError&) {
    // A malformed token later on ends the search; the error at hand is reported first.
  }
  return std::nullopt;
}

}  // namespace

Module parse_module(std::string_view text, std::string_view filename) {
  Lexer locator(text, filename);
  if (auto bad = parser::find_bad_byte(text)) throw UserError(bad->message, locator.loc_of_offset(bad->offset));
  return Parser(text, filename).parse_file();
}

Module parse_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(fmt::format("cannot read '{}': it is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot open '{}': no such file or it is not readable", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw UserError(fmt::format("cannot read '{}'", path));
  return parse_module(text, path);
}

}  // namespace lj
