// UTF-8 validation and decoding for the text IR front end. The ranges follow the Unicode standard's
// table of well-formed byte sequences (Table 3-7), so overlong forms, surrogates and code points above
// U+10FFFF are rejected, not just bad continuation bytes.
#include "compiler/parser/utf8.h"

#include <fmt/format.h>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::parser {

namespace {

struct LeadInfo {
  size_t length = 0;           // 0: this byte never starts a sequence
  unsigned char second_lo = 0x80;  // allowed range of the second byte; narrower after E0, ED, F0, F4
  unsigned char second_hi = 0xBF;
};

LeadInfo lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xEE && b <= 0xEF) return {3};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

bool is_continuation(unsigned char b) { return b >= 0x80 && b <= 0xBF; }

unsigned char byte_at(std::string_view text, size_t i) { return static_cast<unsigned char>(text[i]); }

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t i) {
  if (i >= text.size()) return 0;
  const LeadInfo lead = lead_info(byte_at(text, i));
  if (lead.length <= 1) return lead.length;
  if (text.size() - i < lead.length) return 0;
  const unsigned char second = byte_at(text, i + 1);
  if (second < lead.second_lo || second > lead.second_hi) return 0;
  for (size_t k = 2; k < lead.length; ++k)
    if (!is_continuation(byte_at(text, i + k))) return 0;
  return lead.length;
}

char32_t decode_utf8(std::string_view text, size_t i) {
  const size_t n = utf8_sequence_length(text, i);
  const unsigned char b0 = byte_at(text, i);
  if (n <= 1) return b0;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (byte_at(text, i + k) & 0x3F);
  return cp;
}

std::optional<BadByte> find_bad_byte(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char b = byte_at(text, i);
    if (b == 0)
      return BadByte{i, fmt::format("binary input: NUL byte (0x00) at byte offset {}; IR files are UTF-8 text", i)};
    if (b < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(text, i);
    if (n > 0) {
      i += n;
      continue;
    }
    const LeadInfo lead = lead_info(b);
    if (is_continuation(b))
      return BadByte{i, fmt::format("invalid UTF-8: unexpected continuation byte 0x{:02x} at byte offset {}", b, i)};
    if (lead.length == 0)
      return BadByte{i, fmt::format("invalid UTF-8: byte 0x{:02x} at byte offset {} never occurs in UTF-8", b, i)};
    // A valid lead byte whose sequence is cut short or continues with a byte out of range.
    for (size_t k = 1; k < lead.length; ++k) {
      if (i + k >= text.size())
        return BadByte{i, fmt::format("invalid UTF-8: byte 0x{:02x} at byte offset {} starts a {}-byte sequence but the "
                                      "input ends after {} byte{}",
                                      b, i, lead.length, k, k == 1 ? "" : "s")};
      const unsigned char c = byte_at(text, i + k);
      const unsigned char lo = k == 1 ? lead.second_lo : 0x80;
      const unsigned char hi = k == 1 ? lead.second_hi : 0xBF;
      if (c < lo || c > hi) {
        if (is_continuation(c))  // a continuation byte, but one that makes an overlong form or surrogate
          return BadByte{i, fmt::format("invalid UTF-8: bytes 0x{:02x} 0x{:02x} at byte offset {} encode an overlong "
                                        "form, a surrogate or a code point above U+10FFFF",
                                        b, c, i)};
        return BadByte{i, fmt::format("invalid UTF-8: byte 0x{:02x} at byte offset {} starts a {}-byte sequence but byte "
                                      "0x{:02x} at byte offset {} does not continue it",
                                      b, i, lead.length, c, i + k)};
      }
    }
    LJ_ASSERT(false, "utf8_sequence_length rejected byte offset {} but no byte there is out of range", i);
  }
  return std::nullopt;
}

}  // namespace lj::parser
