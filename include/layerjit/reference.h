// The CPU reference: the oracle for every numeric test. Runs a whole graph for small symbol
// bindings. Elements are held as double; values of bf16/f16/fp8/i8 tensors are always exactly
// representable in their dtype, because every store rounds as the GPU format rounds
// (round-to-nearest-even; fp8 saturating to the finite range; integers saturating).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "layerjit/graph.h"

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

/// Runs the graph on the CPU. `inputs` maps every graph input name to a tensor of its bound shape
/// and dtype (checked: a missing, extra or mis-shaped input is a UserError). Returns the outputs
/// in order.
std::vector<HostTensor> run_reference(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                      const Bindings& bindings);

/// Evaluates one node kind on host tensors: the per-op reference semantics.
std::vector<HostTensor> reference_op(OpKind kind, const std::vector<const HostTensor*>& operands,
                                     const Attrs& attrs, const std::vector<TensorType>& result_types,
                                     const Bindings& bindings);

}  // namespace lj
