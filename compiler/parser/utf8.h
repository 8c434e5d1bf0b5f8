// UTF-8 handling for the text IR front end. The parser rejects binary and malformed input up front
// (find_bad_byte), so the lexer and the diagnostic printer may assume well-formed text; the printer
// still decodes defensively because it also shows the line that holds the bad byte.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace lj::parser {

/// Length (1 to 4) of the well-formed UTF-8 sequence that starts at text[i], or 0 when the bytes
/// there are not one (stray continuation byte, overlong form, surrogate, above U+10FFFF, cut short).
size_t utf8_sequence_length(std::string_view text, size_t i);

/// Code point of the well-formed sequence at text[i]; only call after utf8_sequence_length(text, i) > 0.
char32_t decode_utf8(std::string_view text, size_t i);

/// The first byte that makes `text` unacceptable as IR text, and why.
struct BadByte {
  size_t offset = 0;
  std::string message;  // lowercase diagnostic text naming the byte and its offset
};

/// Finds the first NUL byte or invalid UTF-8 sequence; nullopt when the text is clean.
std::optional<BadByte> find_bad_byte(std::string_view text);

}  // namespace lj::parser
