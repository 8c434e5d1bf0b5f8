// Lexer of the text IR. Whitespace is space, tab, CR and LF (so CRLF files lex like LF files); `//`
// starts a comment to the end of the line. Numbers are range-checked here, where the token's
// location is at hand: an integer must fit int64 and a float must be finite.
#include "compiler/parser/lexer.h"

#include <charconv>
#include <climits>

#include <fmt/format.h>

#include "compiler/parser/utf8.h"
#include "layerjit/check.h"

namespace lj::parser {

namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

// Longest spelling quoted in a diagnostic; a 1 MB identifier should not make a 1 MB message.
constexpr size_t kMaxQuoted = 40;

std::string code_point_str(char32_t cp) { return fmt::format("U+{:04X}", static_cast<uint32_t>(cp)); }

}  // namespace

std::string shorten(std::string_view s) {
  if (s.size() <= kMaxQuoted) return std::string(s);
  size_t cut = kMaxQuoted;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
  return std::string(s.substr(0, cut)) + "...";
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokKind::Eof: return "end of file";
    case TokKind::Ident:
    case TokKind::ValueName:
    case TokKind::GraphName:
    case TokKind::Int:
    case TokKind::Float:
    case TokKind::String:
    case TokKind::LParen:
    case TokKind::RParen:
    case TokKind::LBrace:
    case TokKind::RBrace:
    case TokKind::LBracket:
    case TokKind::RBracket:
    case TokKind::Comma:
    case TokKind::Colon:
    case TokKind::Equal:
    case TokKind::Arrow: return "'" + shorten(t.text) + "'";
  }
  LJ_ASSERT(false, "unhandled token kind {}", static_cast<int>(t.kind));
  __builtin_unreachable();
}

Lexer::Lexer(std::string_view text, std::string_view filename) : text_(text), file_(filename) {
  // A UTF-8 byte order mark (written by some Windows editors) is not part of the IR.
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

int Lexer::col_at(size_t pos) const {
  const size_t col = pos - line_start_ + 1;
  return col > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(col);
}

SourceLoc Lexer::loc_of_offset(size_t offset) const {
  int line = 1;
  size_t start = 0;
  for (size_t i = 0; i < offset && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      if (line < INT_MAX) ++line;
      start = i + 1;
    }
  }
  const size_t col = offset - start + 1;
  return {file_, line, col > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(col)};
}

void Lexer::fail(size_t pos, std::string msg) const {
  throw UserError(std::move(msg), SourceLoc{file_, line_, col_at(pos)});
}

void Lexer::skip_space_and_comments() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == '\n') {
      ++pos_;
      if (line_ < INT_MAX) ++line_;
      line_start_ = pos_;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      const size_t eol = text_.find('\n', pos_);
      pos_ = eol == std::string_view::npos ? text_.size() : eol;
    } else {
      return;
    }
  }
}

Token Lexer::make(TokKind kind, size_t begin, size_t end) const {
  Token t;
  t.kind = kind;
  t.text = text_.substr(begin, end - begin);
  t.line = line_;
  t.col = col_at(begin);
  return t;
}

Token Lexer::next() {
  skip_space_and_comments();
  if (pos_ >= text_.size()) return make(TokKind::Eof, text_.size(), text_.size());
  const size_t begin = pos_;
  const char c = text_[pos_];
  auto single = [&](TokKind k) {
    ++pos_;
    return make(k, begin, pos_);
  };
  switch (c) {
    case '(': return single(TokKind::LParen);
    case ')': return single(TokKind::RParen);
    case '{': return single(TokKind::LBrace);
    case '}': return single(TokKind::RBrace);
    case '[': return single(TokKind::LBracket);
    case ']': return single(TokKind::RBracket);
    case ',': return single(TokKind::Comma);
    case ':': return single(TokKind::Colon);
    case '=': return single(TokKind::Equal);
    case '%': return lex_sigil_name(TokKind::ValueName);
    case '@': return lex_sigil_name(TokKind::GraphName);
    case '"': return lex_string();
    case '-':
      if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        pos_ += 2;
        return make(TokKind::Arrow, begin, pos_);
      }
      if (pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1])) return lex_number();
      fail(pos_, "unexpected character '-': expected '->' or a negative number");
    default: break;
  }
  if (is_digit(c)) return lex_number();
  if (is_ident_start(c)) {
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    return make(TokKind::Ident, begin, pos_);
  }
  fail_unexpected_char(pos_);
}

void Lexer::fail_unexpected_char(size_t pos) const {
  const char c = text_[pos];
  if (c == '/') fail(pos, "unexpected character '/': comments start with '//'");
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u == 0x7F) fail(pos, fmt::format("unexpected control character {}", code_point_str(u)));
  if (u < 0x80) fail(pos, fmt::format("unexpected character '{}'", c));
  const size_t n = utf8_sequence_length(text_, pos);
  LJ_ASSERT(n > 0, "invalid UTF-8 at byte offset {} reached the lexer", pos);
  fail(pos, fmt::format("unexpected character '{}' ({}): non-ASCII text may only appear in comments and strings",
                        text_.substr(pos, n), code_point_str(decode_utf8(text_, pos))));
}

Token Lexer::lex_sigil_name(TokKind kind) {
  const size_t begin = pos_++;
  // Unlike NAME, a value or graph name may start with a digit (%0): the builder's fresh names do.
  while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
  if (pos_ == begin + 1) {
    // `%é`: say what the character is rather than that the name is missing.
    if (pos_ < text_.size() && static_cast<unsigned char>(text_[pos_]) >= 0x80) fail_unexpected_char(pos_);
    const char* what = kind == TokKind::ValueName ? "value" : "graph";
    fail(begin, fmt::format("expected a {} name after '{}' (letters, digits, '_' and '.')", what, text_[begin]));
  }
  return make(kind, begin, pos_);
}

Token Lexer::lex_number() {
  const size_t begin = pos_;
  if (text_[pos_] == '-') ++pos_;
  auto digits = [&] {
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  };
  digits();
  bool is_float = false;
  if (pos_ + 1 < text_.size() && text_[pos_] == '.' && is_digit(text_[pos_ + 1])) {
    is_float = true;
    ++pos_;
    digits();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    size_t p = pos_ + 1;
    if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
    if (p < text_.size() && is_digit(text_[p])) {
      is_float = true;
      pos_ = p;
      digits();
    }
  }
  if (pos_ < text_.size() && is_ident_char(text_[pos_])) {
    while (pos_ < text_.size() && (is_ident_char(text_[pos_]) || text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
    fail(begin, fmt::format("invalid number '{}'", shorten(text_.substr(begin, pos_ - begin))));
  }
  Token t = make(is_float ? TokKind::Float : TokKind::Int, begin, pos_);
  const char* first = text_.data() + begin;
  const char* last = text_.data() + pos_;
  if (is_float) {
    auto [ptr, ec] = std::from_chars(first, last, t.float_value);
    if (ec == std::errc::result_out_of_range)
      fail(begin, fmt::format("float {} is out of range: floats must be finite doubles", shorten(t.text)));
    LJ_ASSERT(ec == std::errc() && ptr == last, "float '{}' lexed but does not convert", t.text);
  } else {
    auto [ptr, ec] = std::from_chars(first, last, t.int_value);
    if (ec == std::errc::result_out_of_range)
      fail(begin, fmt::format("integer {} is out of range: integers must fit in a signed 64-bit integer",
                              shorten(t.text)));
    LJ_ASSERT(ec == std::errc() && ptr == last, "integer '{}' lexed but does not convert", t.text);
  }
  return t;
}

Token Lexer::lex_string() {
  const size_t begin = pos_++;
  std::string value;
  for (;;) {
    if (pos_ >= text_.size() || text_[pos_] == '\n' || text_[pos_] == '\r')
      fail(begin, "unterminated string: a string must close with '\"' on the same line");
    const char c = text_[pos_];
    if (c == '"') break;
    if (c == '\\') {
      const char e = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
      if (e != '"' && e != '\\') {
        // Only the two escapes the printer writes exist; anything else is most likely a typo.
        const bool printable = static_cast<unsigned char>(e) > 0x20 && static_cast<unsigned char>(e) < 0x7F;
        fail(pos_, printable ? fmt::format("unknown escape sequence '\\{}' in string: only \\\" and \\\\ are allowed", e)
                             : std::string("unknown escape sequence in string: only \\\" and \\\\ are allowed"));
      }
      value += e;
      pos_ += 2;
      continue;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) fail(pos_, fmt::format("control character {} in string", code_point_str(u)));
    value += c;
    ++pos_;
  }
  ++pos_;
  Token t = make(TokKind::String, begin, pos_);
  t.str_value = std::move(value);
  return t;
}

}  // namespace lj::parser
