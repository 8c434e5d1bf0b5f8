// The layerjit device headers (runtime/device/*.cuh), embedded into the library at build time by
// embed_headers.cmake, so NVRTC gets them from memory and never reads the source tree at run time.
#pragma once

#include <span>
#include <string_view>

namespace lj::rt {

struct EmbeddedHeader {
  std::string_view include_name;  ///< e.g. "layerjit/random.cuh"
  std::string_view text;
};

/// Every embedded header, in a stable order.
std::span<const EmbeddedHeader> embedded_headers();

}  // namespace lj::rt
