// Formatting of user and internal errors.
#include "layerjit/error.h"

#include <fmt/format.h>

namespace lj {

std::string SourceLoc::str() const {
  if (!known()) return "";
  return fmt::format("{}:{}:{}", file.empty() ? "<input>" : file, line, col);
}

std::string UserError::formatted() const {
  if (loc_.known()) return fmt::format("{}: error: {}", loc_.str(), what());
  return fmt::format("error: {}", what());
}

void throw_internal(const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("{} ({}:{})", msg, file, line));
}

}  // namespace lj
