// Lexer of the text IR (.lj): turns UTF-8 text into tokens, one at a time, each with its 1-based line
// and byte column. Lexing on demand keeps memory flat for huge files, and a Lexer is a small value,
// so the parser can copy it to look ahead (e.g. to find where an undefined value is defined later).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "layerjit/error.h"

namespace lj::parser {

enum class TokKind : uint8_t {
  Ident,      // graph, param, return, true, false, op names, dtypes, attribute names, symbols
  ValueName,  // %x, %0, %q.flat
  GraphName,  // @decoder
  Int,        // 4096, -1
  Float,      // 1e-05, 500000.0
  String,     // "half"
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Equal,
  Arrow,  // ->
  Eof,
};

struct Token {
  TokKind kind = TokKind::Eof;
  std::string_view text;  // spelling in the source, e.g. "%x", "1e-05", "\"half\""; empty at Eof
  int line = 1;
  int col = 1;
  int64_t int_value = 0;   // Int
  double float_value = 0;  // Float
  std::string str_value;   // String, with escapes decoded

  /// The name without its sigil, for ValueName and GraphName.
  std::string_view name() const { return text.substr(1); }
};

/// `s` cut to a length fit for a diagnostic ("..." marks the cut; UTF-8 sequences stay whole).
std::string shorten(std::string_view s);

/// How a token reads in a diagnostic: "'%x'", "'('", "end of file"; long spellings are shortened.
std::string describe(const Token& t);

class Lexer {
 public:
  /// `text` must outlive the lexer and must have passed find_bad_byte (utf8.h).
  Lexer(std::string_view text, std::string_view filename);

  /// The next token; Eof forever at the end. Throws UserError (with location) on a malformed token.
  Token next();

  SourceLoc loc(const Token& t) const { return {file_, t.line, t.col}; }
  /// Location of a byte offset in the text (counts lines from the start: for errors only).
  SourceLoc loc_of_offset(size_t offset) const;

 private:
  void skip_space_and_comments();
  int col_at(size_t pos) const;
  Token make(TokKind kind, size_t begin, size_t end) const;
  Token lex_number();
  Token lex_string();
  Token lex_sigil_name(TokKind kind);
  [[noreturn]] void fail(size_t pos, std::string msg) const;
  [[noreturn]] void fail_unexpected_char(size_t pos) const;

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  size_t line_start_ = 0;  // offset of the first byte of the current line
  int line_ = 1;
};

}  // namespace lj::parser
