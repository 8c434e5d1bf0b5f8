#include "jit/bundle_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cache/key.h"
#include "cache/posix_file.h"

namespace lj::jit {

namespace {

constexpr size_t kHeaderBytes = 56;
constexpr uint64_t kMaxBundleBytes = uint64_t{4} << 30;  // far above any layer's kernels; a bound on what a bad file can make us read

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)])} << (8 * i);
  return v;
}

}  // namespace

std::string encode_bundle(nlohmann::json manifest, std::span<const std::string> payloads) {
  nlohmann::json index = nlohmann::json::array();
  for (const std::string& p : payloads) index.push_back({{"size", p.size()}, {"checksum", cache::checksum(p)}});
  manifest["payloads"] = std::move(index);
  const std::string text = manifest.dump(1);
  std::string out(kBundleMagic);
  put_u32(out, kBundleFormat);
  put_u32(out, 0);
  put_u64(out, text.size());
  out += cache::checksum(text);
  out += text;
  for (const std::string& p : payloads) out += p;
  return out;
}

rt::Result<BundleFile> decode_bundle(std::string_view bytes, std::string_view name) {
  auto bad = [&](const std::string& why) { return rt::Error{fmt::format("bundle {}: {}", name, why)}; };
  if (bytes.size() < kHeaderBytes || bytes.substr(0, kBundleMagic.size()) != kBundleMagic)
    return bad("not a layerjit bundle (no LJBUNDLE header)");
  const uint64_t format = get_le(bytes, 8, 4);
  if (format != kBundleFormat)
    return bad(fmt::format("bundle format {}, this layerjit reads format {}: write it again with this version", format, kBundleFormat));
  const uint64_t length = get_le(bytes, 16, 8);
  if (length > bytes.size() - kHeaderBytes)
    return bad(fmt::format("the manifest is {} bytes but the file holds {} after the header: truncated", length, bytes.size() - kHeaderBytes));
  const std::string_view text = bytes.substr(kHeaderBytes, length);
  if (cache::checksum(text) != bytes.substr(24, 32)) return bad("the manifest's checksum does not match: the file is corrupt");
  BundleFile out;
  try {
    out.manifest = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return bad(fmt::format("the manifest is not JSON: {}", e.what()));
  }
  if (!out.manifest.is_object() || !out.manifest.contains("payloads") || !out.manifest["payloads"].is_array())
    return bad("the manifest has no payload index");
  size_t at = kHeaderBytes + length;
  const nlohmann::json& index = out.manifest["payloads"];
  for (size_t i = 0; i < index.size(); ++i) {
    const nlohmann::json& p = index[i];
    if (!p.is_object() || !p.contains("size") || !p["size"].is_number_unsigned() || !p.contains("checksum") || !p["checksum"].is_string())
      return bad(fmt::format("payload {} has no size and checksum in the manifest", i));
    const uint64_t size = p["size"].get<uint64_t>();
    if (size > bytes.size() - at) return bad(fmt::format("payload {} ({} bytes) runs past the end of the file: truncated", i, size));
    const std::string_view data = bytes.substr(at, size);
    if (cache::checksum(data) != p["checksum"].get<std::string>())
      return bad(fmt::format("payload {} (bytes {}-{}) does not match its checksum: the file is corrupt", i, at, at + size));
    out.payloads.emplace_back(data);
    at += size;
  }
  if (at != bytes.size()) return bad(fmt::format("{} byte(s) after the last payload: the file was appended to or is corrupt", bytes.size() - at));
  return out;
}

rt::Status write_bundle_file(const std::string& path, const nlohmann::json& manifest, std::span<const std::string> payloads) {
  if (int err = cache::replace_file(path, encode_bundle(manifest, payloads), /*durable=*/true); err != 0)
    return rt::Error{fmt::format("cannot write {}: {}", path, std::strerror(err))};
  return {};
}

rt::Result<BundleFile> read_bundle_file(const std::string& path) {
  // O_NONBLOCK: a FIFO must not wait for a writer; read_all then refuses anything but a regular file.
  cache::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return rt::Error{fmt::format("bundle {}: cannot open: {}", path, std::strerror(errno))};
  std::string bytes;
  if (int err = cache::read_all(fd.get(), bytes, kMaxBundleBytes); err != 0)
    return rt::Error{fmt::format("bundle {}: cannot read: {}", path,
                                 err == EFBIG ? "larger than 4 GiB" : err == EINVAL ? "not a regular file" : std::strerror(err))};
  return decode_bundle(bytes, path);
}

}  // namespace lj::jit
