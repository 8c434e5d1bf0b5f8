// Key computation (see key.h). The encoding of one field is: tag byte, 8-byte little-endian length,
// bytes. Lists are a tag, a count, then each element length-prefixed; an optional is a presence byte
// then, when present, the length-prefixed value. The tags are fixed forever for a format version:
// changing any of them is a format change (bump kCacheFormatVersion).
#include "cache/key.h"

#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::cache {

namespace {

enum KernelTag : uint8_t {
  kTagFormat = 1,
  kTagSource = 2,
  kTagOptions = 3,
  kTagArch = 4,
  kTagNvrtc = 5,
  kTagHeaders = 6,
  kTagEnvCount = 7,
  kTagEnvName = 8,
  kTagEnvValue = 9,
};

XXH3_state_t* state(void* p) { return static_cast<XXH3_state_t*>(p); }

CacheKey from_hash(XXH128_hash_t h) { return CacheKey{h.high64, h.low64}; }

}  // namespace

std::string CacheKey::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<CacheKey> CacheKey::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = text[i];
    uint64_t d = 0;
    if (c >= '0' && c <= '9') d = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<uint64_t>(c - 'A' + 10);
    else return std::nullopt;
    halves[i / 16] = (halves[i / 16] << 4) | d;
  }
  return CacheKey{halves[0], halves[1]};
}

KeyHasher::KeyHasher(std::string_view domain) : state_(XXH3_createState()) {
  LJ_ASSERT(state_ != nullptr, "XXH3_createState failed (out of memory)");
  XXH3_128bits_reset(state(state_));
  add(0, domain);
}

KeyHasher::~KeyHasher() { XXH3_freeState(state(state_)); }

void KeyHasher::raw(const void* data, size_t size) { XXH3_128bits_update(state(state_), data, size); }

void KeyHasher::length(uint64_t n) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(n >> (8 * i));
  raw(le, sizeof le);
}

void KeyHasher::add(uint8_t tag, std::string_view bytes) {
  raw(&tag, 1);
  length(bytes.size());
  raw(bytes.data(), bytes.size());
}

void KeyHasher::add(uint8_t tag, int64_t value) {
  raw(&tag, 1);
  length(8);
  length(static_cast<uint64_t>(value));
}

void KeyHasher::add_list(uint8_t tag, std::span<const std::string> items) {
  raw(&tag, 1);
  length(items.size());
  for (const std::string& s : items) {
    length(s.size());
    raw(s.data(), s.size());
  }
}

void KeyHasher::add_optional(uint8_t tag, const std::optional<std::string>& value) {
  raw(&tag, 1);
  unsigned char present = value ? 1 : 0;
  raw(&present, 1);
  if (value) {
    length(value->size());
    raw(value->data(), value->size());
  }
}

CacheKey KeyHasher::finish() const { return from_hash(XXH3_128bits_digest(state(state_))); }

CacheKey compute_key(const KeyComponents& c) {
  KeyHasher h("layerjit-kernel");
  h.add(kTagFormat, static_cast<int64_t>(c.format_version));
  h.add(kTagSource, c.source);
  h.add_list(kTagOptions, c.options);
  h.add(kTagArch, c.arch);
  h.add(kTagNvrtc, c.nvrtc_version);
  h.add(kTagHeaders, c.device_headers_hash);
  h.add(kTagEnvCount, static_cast<int64_t>(c.env.size()));
  for (const EnvSetting& e : c.env) {
    h.add(kTagEnvName, e.name);
    h.add_optional(kTagEnvValue, e.value);
  }
  return h.finish();
}

std::string hash_device_headers(std::span<const std::pair<std::string_view, std::string_view>> headers) {
  KeyHasher h("layerjit-device-headers");
  h.add(1, static_cast<int64_t>(headers.size()));
  for (const auto& [name, text] : headers) {
    h.add(2, name);
    h.add(3, text);
  }
  return h.finish().hex();
}

std::string checksum(std::string_view bytes) {
  return from_hash(XXH3_128bits(bytes.data(), bytes.size())).hex();
}

}  // namespace lj::cache
