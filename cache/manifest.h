// The manifest of a kernel cache entry: a small JSON file that names the entry's payload files and
// carries their sizes and checksums, the key components and what is known about the kernel. Its
// atomic rename into place is what publishes an entry; payload files no manifest names are garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key.h"

namespace lj::cache {

/// What the compiler knows about a kernel beyond its bytes (for `layerjit cache show`).
struct KernelInfo {
  std::string kernel_name;             ///< the __global__ function (or fusion group) name
  double compile_seconds = 0;          ///< NVRTC wall time of the cold compile
  std::optional<int> registers;        ///< per thread, when known (cuFuncGetAttribute / cuobjdump)
  std::optional<int> spill_bytes;      ///< local-memory spill stores + loads, when known
};

/// One payload file of an entry.
struct PayloadRef {
  std::string file;      ///< "<key>-<pid>-<token>.cubin": a name inside the entry's shard directory
  uint64_t bytes = 0;
  std::string checksum;  ///< checksum() of the contents
};

struct Manifest {
  int format_version = kCacheFormatVersion;
  CacheKey key;
  KernelInfo info;
  // The key components except the source, which is a payload (and hashed again on load).
  std::vector<std::string> options;
  std::string arch;
  std::string nvrtc_version;
  std::string device_headers_hash;
  std::vector<EnvSetting> env;
  std::string layerjit_version;
  int64_t created_unix = 0;
  PayloadRef cubin;
  PayloadRef source;

  /// The full key components, given the source text.
  KeyComponents components(std::string source_text) const;
};

std::string manifest_to_json(const Manifest& m);
/// Parses and validates a manifest (types, key format, payload names belonging to the key). On
/// failure returns nullopt and says why in `error`.
std::optional<Manifest> manifest_from_json(std::string_view text, std::string& error);

/// File names inside a shard directory: "<key>.json" and "<key>-<pid>-<token><ext>".
std::string manifest_name(const CacheKey& key);
std::string payload_name(const CacheKey& key, std::string_view ext);
/// True when `name` is a payload name of `key` with extension `ext` (and so safe to open or delete:
/// no slash, no "..", nothing outside the shard).
bool is_payload_name(std::string_view name, const CacheKey& key, std::string_view ext);

}  // namespace lj::cache
