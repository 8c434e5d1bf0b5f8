// Value-or-error for the runtime stages (driver, NVRTC, memory, launch, graphs, timing). Every stage
// that can fail for reasons outside layerjit's control (no driver, an out-of-memory device, a kernel
// that does not compile) returns a Result<T> or a Status instead of throwing, so callers such as the
// CLI can print one clear message and the C API boundary never sees an exception.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::rt {

/// What went wrong, as one human-readable message (may span several lines, e.g. a mapped NVRTC log).
struct Error {
  std::string message;
};

/// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT: implicit so `return Error{...}` reads plainly
  static Status ok_status() { return Status(); }

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    LJ_ASSERT(error_.has_value(), "Status::error() called on a success");
    return *error_;
  }
  const std::string& message() const { return error().message; }

 private:
  std::optional<Error> error_;
};

/// A T, or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit, like std::expected
  Result(Error e) : v_(std::move(e)) {}      // NOLINT
  Result(Status s) : v_(s.error()) {}        // NOLINT: only from a failed Status

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    LJ_ASSERT(ok(), "Result::value() on an error: {}", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const T& value() const& {
    LJ_ASSERT(ok(), "Result::value() on an error: {}", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  T&& value() && {
    LJ_ASSERT(ok(), "Result::value() on an error: {}", std::get<1>(v_).message);
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    LJ_ASSERT(!ok(), "Result::error() called on a value");
    return std::get<1>(v_);
  }
  const std::string& message() const { return error().message; }
  /// The failure as a Status (only valid when !ok()).
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace lj::rt

#define LJ_RT_CONCAT_INNER(a, b) a##b
#define LJ_RT_CONCAT(a, b) LJ_RT_CONCAT_INNER(a, b)

/// Evaluates a Status expression and returns its error from the enclosing function on failure.
#define LJ_RT_TRY(expr)                                     \
  do {                                                      \
    ::lj::rt::Status lj_rt_try_status_ = (expr);            \
    if (!lj_rt_try_status_.ok()) return lj_rt_try_status_.error(); \
  } while (0)

/// `LJ_RT_ASSIGN(auto x, make_x());` declares x from a Result's value or returns its error.
#define LJ_RT_ASSIGN(decl, expr) LJ_RT_ASSIGN_IMPL(LJ_RT_CONCAT(lj_rt_result_, __LINE__), decl, expr)
#define LJ_RT_ASSIGN_IMPL(tmp, decl, expr)     \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.error();           \
  decl = std::move(tmp).value()
