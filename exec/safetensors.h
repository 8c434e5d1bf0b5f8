// safetensors files (the format PyTorch and Hugging Face exchange weights in): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian data. Our own small reader and writer: weights for `layerjit run` and the
// inputs and outputs exchanged with bench/compare_torch.py.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/reference.h"

namespace lj::exec {

struct SafeTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  ///< from the start of the file
  uint64_t bytes = 0;
};

class SafetensorsFile {
 public:
  /// Reads and checks the header: a malformed file is a UserError naming the file, the tensor and
  /// what is wrong (unknown dtype, a byte range that does not match the shape or leaves the file,
  /// overlapping tensors). The data is read on demand.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  /// In file order (by offset).
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  /// nullptr when the file has no tensor of that name.
  const SafeTensor* find(std::string_view name) const;
  /// The tensor's raw bytes (the device encoding of its dtype, little-endian).
  std::vector<unsigned char> read_bytes(const SafeTensor& t) const;
  /// The tensor's values, exactly (bf16/f16/fp8 widen without rounding).
  HostTensor read(const SafeTensor& t) const;
  /// The tensor's raw bytes where the file is memory-mapped (read-only, private; mapped on the first
  /// call and shared by copies of this object): no copy, the pages load as they are touched. A file
  /// that changed size since open() is a UserError.
  std::span<const unsigned char> mapped(const SafeTensor& t) const;

 private:
  struct Mapping;
  std::string path_;
  uint64_t size_ = 0;
  std::vector<SafeTensor> tensors_;
  mutable std::shared_ptr<const Mapping> map_;
};

/// For each param input of `g`, the file's tensor of the same name, checked: a param the file lacks,
/// or one whose dtype or shape differs, is a UserError naming both; tensors the graph does not use
/// are listed in `unused` (a file may hold several layers). In the order of g.inputs().
struct WeightMatch {
  ValueId param = -1;
  const SafeTensor* tensor = nullptr;
};
std::vector<WeightMatch> match_weights(const Graph& g, const SafetensorsFile& f, std::vector<std::string>* unused = nullptr);

/// Writes `tensors` (values exactly representable in their dtypes) in file order; throws UserError
/// when the file cannot be written or a value does not fit its dtype. The file appears whole or not
/// at all (written beside it, then renamed over it).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, HostTensor>>& tensors);

/// A tensor already in its file encoding (little-endian elements of `dtype`).
struct RawTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const unsigned char> bytes;  ///< numel(shape) * dtype_bytes(dtype) of them
};
/// write_safetensors for raw tensors (large test checkpoints are written this way, without doubles).
void write_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors);

/// The safetensors spelling of a dtype ("BF16"; "?" for none).
std::string_view safetensors_dtype(DType t);

}  // namespace lj::exec
