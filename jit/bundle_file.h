// The bytes of an AOT bundle (`layerjit bundle`): a fixed header, a JSON manifest, then the payloads
// (cubins and PTX) the manifest indexes. The header holds the manifest's XXH3-128 checksum and the
// manifest each payload's, and the payloads must tile the rest of the file exactly, so a flipped,
// missing or appended byte anywhere is found before anything is loaded. What the manifest means
// (targets, plans, kernels) is jit/bundle.h's; this file knows only the container.
//
//   offset 0   "LJBUNDLE"                     8 bytes
//          8   format version, u32 LE         (kBundleFormat)
//         12   0, u32 LE                      (reserved)
//         16   manifest length, u64 LE
//         24   manifest checksum              32 lowercase hex digits
//         56   manifest (JSON, UTF-8)
//   56 + len   payloads, back to back in manifest order ("payloads": [{"size", "checksum"}])
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/result.h"

namespace lj::jit {

inline constexpr std::string_view kBundleMagic = "LJBUNDLE";
inline constexpr uint32_t kBundleFormat = 1;

struct BundleFile {
  nlohmann::json manifest;            ///< as written, with "payloads" (each one's size and checksum)
  std::vector<std::string> payloads;  ///< in manifest order, every checksum verified
};

/// The file's bytes: `manifest` (an object; its "payloads" field is written here) and `payloads`.
std::string encode_bundle(nlohmann::json manifest, std::span<const std::string> payloads);
/// Checks and splits the bytes of a bundle; the error says what is wrong and where (`name` is the
/// file, for the message).
rt::Result<BundleFile> decode_bundle(std::string_view bytes, std::string_view name);

/// Writes the bundle to `path` as a temp file beside it, fsync'd, then renamed into place: a reader
/// sees the old file or the whole new one, never a torn one.
rt::Status write_bundle_file(const std::string& path, const nlohmann::json& manifest, std::span<const std::string> payloads);
/// Reads and checks `path` (decode_bundle).
rt::Result<BundleFile> read_bundle_file(const std::string& path);

}  // namespace lj::jit
