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
#include "layerjit/host_tensor.h"

namespace lj {

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
