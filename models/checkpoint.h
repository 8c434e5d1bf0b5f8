// A Hugging Face checkpoint's tensors by name: DIR/model.safetensors, or the shards that
// DIR/model.safetensors.index.json's weight_map names. Every file's header is read and checked when
// the checkpoint opens (so a missing or malformed shard fails before any weight is loaded); data is
// memory-mapped and read as it is used. The checkpoint remembers which tensors were taken, so what
// a model leaves unused can be reported.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "exec/safetensors.h"

namespace lj::models {

struct CheckpointTensor {
  const exec::SafetensorsFile* file = nullptr;
  const exec::SafeTensor* tensor = nullptr;
};

class Checkpoint {
 public:
  /// Throws UserError: no weights file, an index that does not parse or names a missing shard, a
  /// tensor the index places in a shard that lacks it, a tensor in two files, a malformed file.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  /// nullptr-filled when absent.
  CheckpointTensor find(std::string_view name) const;
  /// The tensor, marked used; a UserError naming it (and `why`: what needs it) when absent.
  CheckpointTensor take(const std::string& name, std::string_view why) const;
  /// Tensors no take() asked for, sorted.
  std::vector<std::string> unused() const;
  /// The files, in the order opened.
  size_t file_count() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<exec::SafetensorsFile>> files_;
  std::map<std::string, CheckpointTensor, std::less<>> by_name_;
  mutable std::set<std::string, std::less<>> used_;
};

}  // namespace lj::models
