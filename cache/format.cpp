// The layerjit version string, injected by cache/CMakeLists.txt from the CMake project version so
// there is one place to bump it.
#include "cache/format.h"

namespace lj::cache {

std::string_view layerjit_version() { return LAYERJIT_VERSION_STRING; }

}  // namespace lj::cache
