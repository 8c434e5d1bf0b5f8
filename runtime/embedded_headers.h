// The runtime's own device headers (runtime/device/*.cuh, e.g. the seeded random fill), embedded
// into the library at build time by cmake/embed_files.cmake, so NVRTC gets them from memory and
// never reads the source tree at run time. compile() passes them to every program.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lj::rt {

/// (include name, text) pairs, e.g. ("layerjit/random.cuh", ...), in a stable order.
const std::vector<std::pair<std::string, std::string>>& embedded_headers();

}  // namespace lj::rt
