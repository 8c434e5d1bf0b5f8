// format_diagnostic: a user error as a compiler diagnostic, in the style of clang and gcc:
//   model.lj:3:22: error: unknown op 'matmull' (did you mean 'matmul'?)
//     %qkv = matmull(%h, %w_qkv)
//            ^
// The column is a 1-based byte column. The caret line copies tabs from the source line so the caret
// lines up in a terminal; control bytes and bytes that are not UTF-8 are shown as \xNN (the input may
// be the very binary file the error is about), and very long lines are cut to a window around the column.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "compiler/parser/utf8.h"
#include "layerjit/text.h"

namespace lj {

namespace {

// Widest source excerpt shown, in bytes; a minified multi-megabyte line stays readable.
constexpr size_t kMaxExcerpt = 160;

// Line `line` (1-based) of `text` without its line break, or nullopt if the text has fewer lines.
std::optional<std::string_view> source_line(std::string_view text, int line) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return std::nullopt;
    start = nl + 1;
  }
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  if (end > start && text[end - 1] == '\r') --end;
  return text.substr(start, end - start);
}

bool is_continuation(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
}

}  // namespace

std::string format_diagnostic(const UserError& e, std::string_view source_text) {
  std::string out = e.formatted() + "\n";
  const SourceLoc& l = e.loc();
  if (!l.known()) return out;
  const auto line = source_line(source_text, l.line);
  if (!line) return out;

  const size_t caret = std::min(static_cast<size_t>(l.col > 0 ? l.col - 1 : 0), line->size());
  size_t begin = 0;
  size_t end = line->size();
  if (line->size() > kMaxExcerpt) {
    begin = caret > kMaxExcerpt / 2 ? caret - kMaxExcerpt / 2 : 0;
    while (begin < caret && is_continuation(*line, begin)) ++begin;
    end = std::min(line->size(), begin + kMaxExcerpt);
    while (end < line->size() && is_continuation(*line, end)) ++end;
  }

  std::string shown = begin > 0 ? "..." : "";
  std::string marker = begin > 0 ? "   " : "";
  for (size_t i = begin; i < end;) {
    const auto b = static_cast<unsigned char>((*line)[i]);
    std::string piece;
    std::string pad;
    size_t n = 1;
    if (b == '\t') {
      piece = pad = "\t";
    } else if (b < 0x20 || b == 0x7F) {
      piece = fmt::format("\\x{:02x}", b);
      pad = "    ";
    } else if (b < 0x80) {
      piece = static_cast<char>(b);
      pad = " ";
    } else if ((n = parser::utf8_sequence_length(*line, i)) > 0) {
      piece = std::string(line->substr(i, n));
      pad = " ";
    } else {
      n = 1;
      piece = fmt::format("\\x{:02x}", b);
      pad = "    ";
    }
    shown += piece;
    if (i < caret) marker += pad;
    i += n;
  }
  if (end < line->size()) shown += "...";
  out += shown + "\n" + marker + "^\n";
  return out;
}

}  // namespace lj
