// Checkpoint: the single-file and the sharded layouts of Hugging Face's save_pretrained.
#include "models/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layerjit/check.h"
#include "layerjit/error.h"

namespace lj::models {

namespace {

constexpr std::string_view kSingle = "model.safetensors";
constexpr std::string_view kIndex = "model.safetensors.index.json";

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// weight_map: tensor name -> shard file name, from the index.
std::map<std::string, std::string> read_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LJ_CHECK(in.good(), SourceLoc{}, "cannot read '{}'", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  LJ_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), SourceLoc{},
           "{}: no weight_map object (tensor name -> shard file)", path);
  std::map<std::string, std::string> out;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    LJ_CHECK(it.value().is_string(), SourceLoc{}, "{}: weight_map entry '{}' is not a file name", path, it.key());
    const auto file = it.value().get<std::string>();
    LJ_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..", SourceLoc{},
             "{}: weight_map entry '{}' names '{}', not a file beside the index", path, it.key(), file);
    out[it.key()] = file;
  }
  LJ_CHECK(!out.empty(), SourceLoc{}, "{}: the weight_map is empty", path);
  return out;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  auto add_file = [&](const std::string& name) -> const exec::SafetensorsFile* {
    c.files_.push_back(std::make_unique<exec::SafetensorsFile>(exec::SafetensorsFile::open(dir + "/" + name)));
    return c.files_.back().get();
  };
  auto add_tensors = [&](const exec::SafetensorsFile* f) {
    for (const exec::SafeTensor& t : f->tensors()) {
      auto [it, fresh] = c.by_name_.emplace(t.name, CheckpointTensor{f, &t});
      LJ_CHECK(fresh, SourceLoc{}, "{}: tensor '{}' is in both {} and {}", dir, t.name, it->second.file->path(), f->path());
    }
  };
  const std::string index = dir + "/" + std::string(kIndex);
  if (exists(index)) {
    const std::map<std::string, std::string> weight_map = read_index(index);
    std::map<std::string, const exec::SafetensorsFile*> shards;
    for (const auto& [tensor, file] : weight_map) {
      if (shards.count(file)) continue;
      LJ_CHECK(exists(dir + "/" + file), SourceLoc{}, "{}: shard '{}' is missing (the index places '{}' in it)", dir, file, tensor);
      shards[file] = add_file(file);
      add_tensors(shards[file]);
    }
    for (const auto& [tensor, file] : weight_map) {
      const auto it = c.by_name_.find(tensor);
      LJ_CHECK(it != c.by_name_.end() && it->second.file == shards[file], SourceLoc{},
               "{}: the index places tensor '{}' in {}, which does not hold it", dir, tensor, file);
    }
    return c;
  }
  const std::string single(kSingle);
  LJ_CHECK(exists(dir + "/" + single), SourceLoc{}, "{}: no weights: neither {} nor {} is there", dir, kSingle, kIndex);
  add_tensors(add_file(single));
  return c;
}

CheckpointTensor Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? CheckpointTensor{} : it->second;
}

CheckpointTensor Checkpoint::take(const std::string& name, std::string_view why) const {
  const CheckpointTensor t = find(name);
  LJ_CHECK(t.tensor != nullptr, SourceLoc{}, "{}: the checkpoint has no tensor '{}' ({})", dir_, name, why);
  used_.insert(name);
  return t;
}

std::vector<std::string> Checkpoint::unused() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : by_name_)
    if (!used_.count(name)) out.push_back(name);
  return out;
}

}  // namespace lj::models
