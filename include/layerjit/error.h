// Errors. Two kinds, as in Halide: a UserError is the user's input at fault (it carries a source
// location when there is one); an InternalError is a layerjit bug ("please report").
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lj {

/// A position in a text IR file (1-based line and column). Empty file means "built by the API".
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;
  bool known() const { return line > 0; }
  std::string str() const;  // "file:line:col" or "" when unknown
};

class UserError : public std::runtime_error {
 public:
  explicit UserError(std::string msg, SourceLoc loc = {})
      : std::runtime_error(std::move(msg)), loc_(std::move(loc)) {}
  const SourceLoc& loc() const { return loc_; }
  /// "file:line:col: error: msg" when the location is known, else "error: msg".
  std::string formatted() const;

 private:
  SourceLoc loc_;
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& msg)
      : std::logic_error("internal error: " + msg + " (please report this layerjit bug)") {}
};

[[noreturn]] void throw_internal(const char* file, int line, const std::string& msg);

}  // namespace lj

/// A user error: the input is at fault. The message says what was expected and what was found.
#define LJ_CHECK(cond, loc, ...)                                   \
  do {                                                             \
    if (!(cond)) throw ::lj::UserError(fmt::format(__VA_ARGS__), (loc)); \
  } while (0)

/// An internal invariant: failing it is a layerjit bug.
#define LJ_ASSERT(cond, ...)                                                                   \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::lj::throw_internal(__FILE__, __LINE__, fmt::format("assertion `{}` failed: {}", #cond, \
                                                           fmt::format(__VA_ARGS__)));         \
  } while (0)
