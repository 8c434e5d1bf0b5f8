// Manifest (de)serialisation (see manifest.h). Parsing is strict: a manifest that fails any check
// is treated as corrupt, never half-trusted, because it names files the loader will open.
#include "cache/manifest.h"

#include "cache/posix_file.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

namespace lj::cache {

using nlohmann::json;

KeyComponents Manifest::components(std::string source_text) const {
  return KeyComponents{std::move(source_text), options, arch, nvrtc_version, device_headers_hash, env,
                       format_version};
}

std::string manifest_name(const CacheKey& key) { return key.hex() + ".json"; }

std::string payload_name(const CacheKey& key, std::string_view ext) {
  return fmt::format("{}-{}-{}{}", key.hex(), ::getpid(), random_token(), ext);
}

bool is_payload_name(std::string_view name, const CacheKey& key, std::string_view ext) {
  std::string prefix = key.hex() + "-";
  if (name.size() <= prefix.size() + ext.size()) return false;
  if (name.substr(0, prefix.size()) != prefix) return false;
  if (name.substr(name.size() - ext.size()) != ext) return false;
  std::string_view middle = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
  auto dash = middle.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == middle.size()) return false;
  for (size_t i = 0; i < middle.size(); ++i) {
    char c = middle[i];
    bool ok = i == dash || (i < dash ? (c >= '0' && c <= '9') : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
    if (!ok) return false;
  }
  return true;
}

static json payload_json(const PayloadRef& p) {
  return json{{"file", p.file}, {"bytes", p.bytes}, {"xxh3_128", p.checksum}};
}

std::string manifest_to_json(const Manifest& m) {
  json env = json::array();
  for (const EnvSetting& e : m.env) env.push_back(json{{"name", e.name}, {"value", e.value ? json(*e.value) : json()}});
  json j{
      {"format", m.format_version},
      {"key", m.key.hex()},
      {"kernel_name", m.info.kernel_name},
      {"arch", m.arch},
      {"options", m.options},
      {"nvrtc_version", m.nvrtc_version},
      {"device_headers_hash", m.device_headers_hash},
      {"env", env},
      {"layerjit_version", m.layerjit_version},
      {"created_unix", m.created_unix},
      {"compile_seconds", m.info.compile_seconds},
      {"registers", m.info.registers ? json(*m.info.registers) : json()},
      {"spill_bytes", m.info.spill_bytes ? json(*m.info.spill_bytes) : json()},
      {"cubin", payload_json(m.cubin)},
      {"source", payload_json(m.source)},
  };
  return j.dump(2) + "\n";
}

namespace {

// Reads manifests without exceptions escaping: every accessor checks the type first.
struct Reader {
  const json& j;
  std::string& error;

  const json* field(const char* name, json::value_t type) {
    auto it = j.find(name);
    if (it == j.end()) {
      error = fmt::format("missing field '{}'", name);
      return nullptr;
    }
    bool ok = it->type() == type ||
              (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned) ||
              (type == json::value_t::number_float && it->is_number());
    if (!ok) {
      error = fmt::format("field '{}' has the wrong type", name);
      return nullptr;
    }
    return &*it;
  }
  bool string(const char* name, std::string& out) {
    const json* f = field(name, json::value_t::string);
    if (f) out = f->get<std::string>();
    return f != nullptr;
  }
  bool optional_int(const char* name, std::optional<int>& out) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return true;
    if (!it->is_number_integer()) {
      error = fmt::format("field '{}' has the wrong type", name);
      return false;
    }
    out = it->get<int>();
    return true;
  }
};

bool read_payload(const json& j, const char* name, const CacheKey& key, std::string_view ext, PayloadRef& out,
                  std::string& error) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_object()) {
    error = fmt::format("missing object '{}'", name);
    return false;
  }
  Reader r{*it, error};
  const json* bytes = r.field("bytes", json::value_t::number_unsigned);
  if (!bytes || !r.string("file", out.file) || !r.string("xxh3_128", out.checksum)) return false;
  out.bytes = bytes->get<uint64_t>();
  if (!is_payload_name(out.file, key, ext)) {
    error = fmt::format("'{}' file name '{}' does not belong to key {}", name, out.file, key.hex());
    return false;
  }
  return true;
}

}  // namespace

std::optional<Manifest> manifest_from_json(std::string_view text, std::string& error) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  Manifest m;
  Reader r{j, error};
  std::string key_hex;
  const json* format = r.field("format", json::value_t::number_integer);
  if (!format || !r.string("key", key_hex) || !r.string("kernel_name", m.info.kernel_name) ||
      !r.string("arch", m.arch) || !r.string("nvrtc_version", m.nvrtc_version) ||
      !r.string("device_headers_hash", m.device_headers_hash) || !r.string("layerjit_version", m.layerjit_version))
    return std::nullopt;
  m.format_version = format->get<int>();
  auto key = CacheKey::from_hex(key_hex);
  if (!key) {
    error = fmt::format("key '{}' is not 32 hex digits", key_hex);
    return std::nullopt;
  }
  m.key = *key;
  const json* options = r.field("options", json::value_t::array);
  const json* env = r.field("env", json::value_t::array);
  const json* created = r.field("created_unix", json::value_t::number_integer);
  const json* seconds = r.field("compile_seconds", json::value_t::number_float);
  if (!options || !env || !created || !seconds) return std::nullopt;
  for (const json& o : *options) {
    if (!o.is_string()) {
      error = "an option is not a string";
      return std::nullopt;
    }
    m.options.push_back(o.get<std::string>());
  }
  for (const json& e : *env) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("value") ||
        !(e["value"].is_string() || e["value"].is_null())) {
      error = "malformed env entry";
      return std::nullopt;
    }
    m.env.push_back({e["name"].get<std::string>(),
                     e["value"].is_null() ? std::nullopt : std::optional<std::string>(e["value"].get<std::string>())});
  }
  m.created_unix = created->get<int64_t>();
  m.info.compile_seconds = seconds->get<double>();
  if (!r.optional_int("registers", m.info.registers) || !r.optional_int("spill_bytes", m.info.spill_bytes))
    return std::nullopt;
  // The image of a compute_XY entry is PTX (disk_cache.cpp names it so).
  const std::string_view image_ext = m.arch.rfind("compute_", 0) == 0 ? ".ptx" : ".cubin";
  if (!read_payload(j, "cubin", m.key, image_ext, m.cubin, error) ||
      !read_payload(j, "source", m.key, ".cu", m.source, error))
    return std::nullopt;
  return m;
}

}  // namespace lj::cache
