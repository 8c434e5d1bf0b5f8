// The device headers generated kernels include (codegen/templates/layerjit/*.cuh), embedded into the
// library at build time: NVRTC gets them from memory and never reads the source tree at run time.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lj {

/// (include name, text) pairs, e.g. ("layerjit/vec.cuh", ...), in a stable order; pass them to the
/// NVRTC compile of every generated kernel.
const std::vector<std::pair<std::string, std::string>>& codegen_device_headers();

}  // namespace lj
