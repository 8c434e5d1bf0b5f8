// A temporary directory for one test's model, removed when the test ends.
#pragma once

#include "tests/scoped_temp_dir.h"

namespace lj::testing {

using TempModelDir = ScopedTempDir;

}  // namespace lj::testing
