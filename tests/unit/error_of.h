// error_of(f): the message of the lj::UserError that f throws, or "(no error)". Lets a test compare a
// diagnostic exactly.
#pragma once

#include <functional>
#include <string>

#include "layerjit/error.h"

namespace lj_test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lj::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace lj_test
