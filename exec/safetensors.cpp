#include "exec/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "layerjit/error.h"
#include "runtime/host_values.h"
#include "layerjit/check.h"

namespace lj::exec {

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // the format's own limit on the JSON header

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kNames[] = {{DType::F32, "F32"},       {DType::BF16, "BF16"},       {DType::F16, "F16"},
                                {DType::F8E4M3, "F8_E4M3"}, {DType::F8E5M2, "F8_E5M2"}, {DType::I8, "I8"},
                                {DType::I32, "I32"},
                                // layerjit's packed 4-bit types (no safetensors standard has them): the
                                // logical shape, numel / 2 bytes, element 2j in byte j's low nibble
                                {DType::U4, "U4"},          {DType::I4, "I4"}};

std::optional<DType> dtype_from(std::string_view name) {
  for (const DTypeName& d : kNames)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

}  // namespace

std::string_view safetensors_dtype(DType t) {
  for (const DTypeName& d : kNames)
    if (d.dtype == t) return d.name;
  return "?";
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  // An ifstream opens a directory "successfully" on Linux and reports its size as 2^63-1.
  LJ_CHECK(!std::filesystem::is_directory(path, ec), SourceLoc{},
           "'{}' is a directory, not a safetensors file (a model directory goes where a .lj file does, not to --weights)", path);
  // A FIFO (or a device) would block the open or never end: only regular files are read.
  LJ_CHECK(!std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec), SourceLoc{},
           "'{}' is not a regular file: safetensors weights are read from files", path);
  std::ifstream in(path, std::ios::binary);
  LJ_CHECK(in.good(), SourceLoc{}, "cannot read safetensors file '{}': no such file or not readable", path);
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  auto bad = [&](const std::string& why) { return UserError(fmt::format("{}: not a valid safetensors file: {}", path, why)); };
  if (file_size < 8) throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", file_size));
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];  // little-endian
  if (header_len > kMaxHeader || header_len > file_size - 8)
    throw bad(fmt::format("the header claims {} bytes but the file has {} after the length", header_len, file_size - 8));
  std::string header(static_cast<size_t>(header_len), '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json j;
  // A key given twice would silently take its last entry (the JSON parser keeps one): each object's
  // keys are collected as they are read, and a repeat is an error naming it.
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  auto watch = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.resize(static_cast<size_t>(depth) + 1), keys[static_cast<size_t>(depth)].clear();
    if (event == E::key && depth >= 1 && static_cast<size_t>(depth) <= keys.size() &&
        !keys[static_cast<size_t>(depth) - 1].insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    j = nlohmann::json::parse(header, watch);
  } catch (const nlohmann::json::parse_error& e) {
    throw bad(fmt::format("the JSON header does not parse: {}", e.what()));
  }
  if (!repeated.empty()) throw bad(fmt::format("the header names '{}' twice", repeated));
  if (!j.is_object()) throw bad("the JSON header is not an object");
  SafetensorsFile f;
  f.path_ = path;
  f.size_ = file_size;
  const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& e = it.value();
    auto bad_tensor = [&](const std::string& why) { return bad(fmt::format("tensor '{}': {}", it.key(), why)); };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw bad_tensor("needs dtype, shape and data_offsets");
    SafeTensor t;
    t.name = it.key();
    const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
    const std::optional<DType> d = dtype_from(dt);
    if (!d) throw bad_tensor(fmt::format("dtype '{}' is not one layerjit reads (F32, BF16, F16, F8_E4M3, F8_E5M2, I8, I32, U4, I4)", dt));
    t.dtype = *d;
    if (!e["shape"].is_array()) throw bad_tensor("shape is not a list");
    uint64_t n = 1;
    for (const auto& x : e["shape"]) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) throw bad_tensor("shape entries must be non-negative integers");
      t.shape.push_back(x.get<int64_t>());
      const auto extent = static_cast<uint64_t>(t.shape.back());
      if (extent != 0 && n > (uint64_t{1} << 62) / extent)
        throw bad_tensor(fmt::format("shape [{}] holds more elements than a file can", fmt::join(t.shape, ", ")));
      n *= extent;
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad_tensor("data_offsets must be [begin, end]");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (end < begin || end > data_size)
      throw bad_tensor(fmt::format("bytes [{}, {}) are outside the {}-byte data section", begin, end, data_size));
    if (is_packed(t.dtype) && (t.shape.empty() || t.shape.back() % 2 != 0))
      throw bad_tensor(fmt::format("a {} tensor packs two elements per byte: its last dimension must be even, got shape [{}]", dt,
                                   fmt::join(t.shape, ", ")));
    const uint64_t want = static_cast<uint64_t>(storage_bytes(t.dtype, static_cast<int64_t>(n)));
    if (end - begin != want)
      throw bad_tensor(fmt::format("{} bytes for shape [{}] of {}, which needs {}", end - begin, fmt::join(t.shape, ", "), dt, want));
    t.offset = data_start + begin;
    t.bytes = want;
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const SafeTensor& a, const SafeTensor& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < f.tensors_.size(); ++i)
    if (f.tensors_[i].offset < f.tensors_[i - 1].offset + f.tensors_[i - 1].bytes)
      throw bad(fmt::format("tensors '{}' and '{}' overlap", f.tensors_[i - 1].name, f.tensors_[i].name));
  return f;
}

const SafeTensor* SafetensorsFile::find(std::string_view name) const {
  for (const SafeTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<unsigned char> SafetensorsFile::read_bytes(const SafeTensor& t) const {
  std::ifstream in(path_, std::ios::binary);
  std::vector<unsigned char> out(static_cast<size_t>(t.bytes));
  in.seekg(static_cast<std::streamoff>(t.offset));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  LJ_CHECK(in.good() || out.empty(), SourceLoc{}, "{}: reading tensor '{}' ({} bytes at {}) failed", path_, t.name, t.bytes, t.offset);
  return out;
}

HostTensor SafetensorsFile::read(const SafeTensor& t) const {
  const std::vector<unsigned char> raw = read_bytes(t);
  HostTensor h(t.dtype, t.shape);
  for (size_t i = 0; i < h.data.size(); ++i) h.data[i] = rt::decode_at(t.dtype, raw.data(), i);
  return h;
}

struct SafetensorsFile::Mapping {
  void* base = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

std::span<const unsigned char> SafetensorsFile::mapped(const SafeTensor& t) const {
  if (!map_) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    LJ_CHECK(fd >= 0, SourceLoc{}, "cannot map safetensors file '{}': {}", path_, std::strerror(errno));
    struct stat st{};
    const bool stat_ok = fstat(fd, &st) == 0;
    const int stat_errno = errno;
    if (!stat_ok || static_cast<uint64_t>(st.st_size) != size_) {
      ::close(fd);
      LJ_CHECK(false, SourceLoc{}, "{}: the file changed since it was opened ({})", path_,
               stat_ok ? fmt::format("{} bytes, was {}", st.st_size, size_) : std::string(std::strerror(stat_errno)));
    }
    auto m = std::make_shared<Mapping>();
    m->size = static_cast<size_t>(size_);
    void* base = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    ::close(fd);
    LJ_CHECK(base != MAP_FAILED, SourceLoc{}, "cannot map safetensors file '{}': {}", path_, std::strerror(map_errno));
    m->base = base;
    map_ = std::move(m);
  }
  LJ_ASSERT(t.offset + t.bytes <= map_->size, "tensor '{}' of {} lies outside the mapping", t.name, path_);
  return {static_cast<const unsigned char*>(map_->base) + t.offset, static_cast<size_t>(t.bytes)};
}

std::vector<WeightMatch> match_weights(const Graph& g, const SafetensorsFile& f, std::vector<std::string>* unused) {
  std::vector<WeightMatch> out;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    if (!info.is_param) continue;
    const SafeTensor* t = f.find(info.name);
    LJ_CHECK(t != nullptr, SourceLoc{}, "{}: no tensor '{}' for the weight %{}: {} of @{}", f.path(), info.name, info.name,
             info.type.str(), g.name());
    std::vector<int64_t> want;
    for (const Dim& d : info.type.shape) {
      LJ_CHECK(d.is_const(), SourceLoc{}, "@{}: weight %{} has the symbolic shape {}: weights from a file need constant shapes",
               g.name(), info.name, info.type.str());
      want.push_back(d.value());
    }
    LJ_CHECK(t->dtype == info.type.dtype && t->shape == want, SourceLoc{},
             "{}: tensor '{}' is {}[{}] but the weight %{} of @{} is {}", f.path(), t->name, dtype_name(t->dtype),
             fmt::join(t->shape, ", "), info.name, g.name(), info.type.str());
    out.push_back({v, t});
  }
  if (unused) {
    unused->clear();
    for (const SafeTensor& t : f.tensors()) {
      const bool used = std::any_of(out.begin(), out.end(), [&](const WeightMatch& m) { return m.tensor == &t; });
      if (!used) unused->push_back(t.name);
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, HostTensor>>& tensors) {
  std::vector<std::vector<unsigned char>> data;
  std::vector<RawTensor> raw;
  for (const auto& [name, t] : tensors) {
    data.emplace_back(static_cast<size_t>(storage_bytes(t.dtype, t.numel())));
    const std::optional<size_t> bad = rt::encode_tensor(t, data.back().data());
    LJ_CHECK(!bad, SourceLoc{}, "write_safetensors {}: tensor '{}' element {} ({}) is not a {} value", path, name, bad.value_or(0),
             bad ? t.data[*bad] : 0.0, dtype_name(t.dtype));
    raw.push_back({name, t.dtype, t.shape, data.back()});
  }
  write_safetensors_raw(path, raw);
}

void write_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t end = 0;
  for (const RawTensor& t : tensors) {
    const auto want = static_cast<uint64_t>(storage_bytes(t.dtype, numel(t.shape)));
    LJ_ASSERT(t.bytes.size() == want, "write_safetensors {}: tensor '{}' has {} bytes for {} of shape [{}]", path, t.name, t.bytes.size(),
              dtype_name(t.dtype), fmt::join(t.shape, ", "));
    header[t.name] = {{"dtype", std::string(safetensors_dtype(t.dtype))}, {"shape", t.shape}, {"data_offsets", {end, end + want}}};
    end += want;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // the data section starts 8-byte aligned
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const RawTensor& t : tensors)
      out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
    out.flush();
    if (!out.good()) {
      out.close();
      std::remove(tmp.c_str());
      LJ_CHECK(false, SourceLoc{}, "cannot write safetensors file '{}'", path);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    LJ_CHECK(false, SourceLoc{}, "cannot write safetensors file '{}': {}", path, std::strerror(err));
  }
}

}  // namespace lj::exec
