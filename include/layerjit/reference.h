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

/// Runs one rank graph of a tensor-parallel group (the sharding pass's: layerjit/shard.h) for each
/// entry of `rank_inputs`, all at once on threads, as the ranks would run: at each all_reduce every
/// rank's partial is added in rank order in double and rounded once to the value's dtype, and every
/// rank goes on with that sum. A rank's error stops all of them and is rethrown. Returns each rank's
/// outputs in order.
std::vector<std::vector<HostTensor>> run_reference_ranks(const Graph& g, const std::vector<std::map<std::string, HostTensor>>& rank_inputs,
                                                         const Bindings& bindings);
/// The same where rank 0 runs `first` and the other ranks `others` (a sharded layer whose residual
/// adds rank 0 makes before the all_reduces: ShardedGraph::rank_graph).
std::vector<std::vector<HostTensor>> run_reference_ranks(const Graph& first, const Graph& others,
                                                         const std::vector<std::map<std::string, HostTensor>>& rank_inputs,
                                                         const Bindings& bindings);

/// Evaluates one node kind on host tensors: the per-op reference semantics.
std::vector<HostTensor> reference_op(OpKind kind, const std::vector<const HostTensor*>& operands,
                                     const Attrs& attrs, const std::vector<TensorType>& result_types,
                                     const Bindings& bindings);

}  // namespace lj
