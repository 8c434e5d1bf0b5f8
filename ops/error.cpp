// Formatting of user and internal errors.
#include "layerjit/error.h"

#include <fmt/format.h>

namespace lj {

std::string SourceLoc::str() const {
  if (!known()) return "";
  return fmt::format("{}:{}:{}", file.empty() ? "<input>" : file, line, col);
}

namespace {

constexpr size_t kMaxLine = 1000, kHead = 600, kTail = 200;

bool continuation(std::string_view s, size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; }

std::string bounded(std::string msg) {
  if (msg.size() <= kMaxLine) return msg;
  std::string out;
  size_t at = 0;
  while (at <= msg.size()) {
    size_t nl = msg.find('\n', at);
    if (nl == std::string::npos) nl = msg.size();
    const std::string_view line(msg.data() + at, nl - at);
    if (line.size() <= kMaxLine) {
      out += line;
    } else {
      size_t head = kHead, tail = line.size() - kTail;
      while (head > 0 && continuation(line, head)) --head;  // keep UTF-8 sequences whole
      while (tail < line.size() && continuation(line, tail)) ++tail;
      out += fmt::format("{} ... [{} characters] ... {}", line.substr(0, head), tail - head, line.substr(tail));
    }
    if (nl == msg.size()) break;
    out += '\n';
    at = nl + 1;
  }
  return out;
}

}  // namespace

UserError::UserError(std::string msg, SourceLoc loc) : std::runtime_error(bounded(std::move(msg))), loc_(std::move(loc)) {}

std::string UserError::formatted() const {
  if (loc_.known()) return fmt::format("{}: error: {}", loc_.str(), what());
  return fmt::format("error: {}", what());
}

void throw_internal(const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("{} ({}:{})", msg, file, line));
}

}  // namespace lj
