// The macros layerjit's own code raises its errors with (layerjit/error.h). Internal: not installed,
// so the public headers need nothing of fmt.
#pragma once

#include <fmt/format.h>

#include "layerjit/error.h"

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
