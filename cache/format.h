// Versions that make older cache contents unreadable on purpose. Bumping kCacheFormatVersion moves
// every process to a fresh versioned subdirectory (<root>/v<N>/) and changes every key, so a
// layout or manifest change can never be misread by a newer or older layerjit.
#pragma once

#include <string_view>

namespace lj::cache {

/// On-disk format of kernel entries and tuning records (directory name, manifest schema, key
/// encoding). Part of every key.
inline constexpr int kCacheFormatVersion = 1;

/// The layerjit release that wrote a record (from the CMake project version). Part of the tuning
/// key: a new release may generate different kernels for the same config string.
std::string_view layerjit_version();

}  // namespace lj::cache
