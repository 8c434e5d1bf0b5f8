// Errors. Two kinds, as in Halide: a UserError is the user's input at fault (it carries a source
// location when there is one); an InternalError is a layerjit bug ("please report"). Public and
// self-contained; the LJ_CHECK / LJ_ASSERT macros layerjit's own code raises them with are in
// layerjit/check.h, which is not installed.
#pragma once

#include <stdexcept>
#include <string>

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
  /// A line of `msg` longer than 1000 bytes keeps its first 600 and last 200 and says how many it
  /// elides: a message quoting a 1 MB attribute or a 200000-element shape stays readable.
  explicit UserError(std::string msg, SourceLoc loc = {});
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
