// Cache keys: XXH3-128 over everything that decides the bytes of a compiled kernel. Two compiles
// with equal keys must produce interchangeable cubins, so every input that can change NVRTC's output
// is a key component (docs/cache.md explains each one). Fields are encoded with a tag and a length
// prefix, so no two different component tuples share an encoding: ("ab","c") != ("a","bc").
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/env_registry.h"
#include "cache/format.h"

namespace lj::cache {

/// A 128-bit content hash, printed as 32 lowercase hex digits (high half first).
struct CacheKey {
  uint64_t high = 0;
  uint64_t low = 0;

  std::string hex() const;
  /// Parses exactly 32 hex digits (either case); anything else is nullopt.
  static std::optional<CacheKey> from_hex(std::string_view text);
  auto operator<=>(const CacheKey&) const = default;
};

/// Everything a kernel key is made of.
struct KeyComponents {
  std::string source;                    ///< the generated CUDA C++, byte for byte
  std::vector<std::string> options;      ///< the exact NVRTC option list, in order
  std::string arch;                      ///< "sm_90a", "sm_80", "compute_90"
  std::string nvrtc_version;             ///< "13.0"
  std::string device_headers_hash;       ///< hash_device_headers() of the embedded .cuh files
  std::vector<EnvSetting> env;           ///< capture_code_env() at compile time
  int format_version = kCacheFormatVersion;
};

/// The key of one compile.
CacheKey compute_key(const KeyComponents& c);

/// One hash over a set of (include name, text) headers, in the given order: any byte of any embedded
/// device header that changes, or a header added, removed or renamed, changes it.
std::string hash_device_headers(std::span<const std::pair<std::string_view, std::string_view>> headers);

/// Integrity checksum of a payload (XXH3-128, 32 hex digits).
std::string checksum(std::string_view bytes);

/// Streaming XXH3-128 over tagged, length-prefixed fields: the one encoding every layerjit key uses.
/// `domain` separates key families (kernel keys and tuning keys never collide by construction).
class KeyHasher {
 public:
  explicit KeyHasher(std::string_view domain);
  ~KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;

  void add(uint8_t tag, std::string_view bytes);
  void add(uint8_t tag, int64_t value);
  void add_list(uint8_t tag, std::span<const std::string> items);
  void add_optional(uint8_t tag, const std::optional<std::string>& value);
  CacheKey finish() const;

 private:
  void raw(const void* data, size_t size);
  void length(uint64_t n);
  void* state_;  // XXH3_state_t, kept opaque so xxhash.h stays out of this header
};

}  // namespace lj::cache
