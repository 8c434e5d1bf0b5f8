// A tensor on the host, as the CPU reference (reference.h) computes with it and the runtime uploads
// and downloads it: elements held as double, always exactly representable in the tensor's dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "layerjit/types.h"

namespace lj {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major

  HostTensor() = default;
  HostTensor(DType dt, std::vector<int64_t> shp);  // zero-filled
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? i + static_cast<int>(shape.size()) : i)); }
  /// Rounds every element to the dtype (call after filling data by hand).
  void round_to_dtype();
};

/// Rounds one value to a dtype as the GPU would store it.
double round_to(DType t, double x);

/// Fills with uniform values in [lo, hi), deterministic for a seed, rounded to the dtype.
void fill_uniform(HostTensor& t, uint64_t seed, double lo = -1.0, double hi = 1.0);

/// A 4-bit tensor (u4, i4) with every code equally likely: fill_uniform over the codes' range.
void fill_codes(HostTensor& t, uint64_t seed);

}  // namespace lj
