// Tensor parallelism: the sharding pass (compiler/passes/shard.cpp, docs/tp.md).
//
// shard(g, tp) rewrites a decoder layer into the graph one rank of a tp-way group runs, the same
// graph on every rank (SPMD): Megatron's column-parallel projections (the QKV and gate/up
// matmuls: W's rows split, each rank keeping its share of every piece a split makes of the output,
// so a rank holds whole query heads with their KV-head groups, and each gate column with its up
// column), the attention over a rank's heads and its slice of the KV caches, row-parallel
// projections (o and down: W's columns split) each followed by an all_reduce of its partial sums.
// Inputs and params carry how the full tensors are split (ShardSpec); shard_tensor cuts a rank's
// share, gather_tensor puts the ranks' outputs back together.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/host_tensor.h"

namespace lj {

/// How a full tensor is divided over the ranks: whole on every rank, or split along `axis` whose
/// extent is the sum of `pieces` (consecutive runs: the QKV projection's q, k and v rows), each rank
/// taking the r-th tp-th of every piece, in piece order.
struct ShardSpec {
  int axis = -1;                ///< -1: replicated (every rank holds it whole)
  std::vector<int64_t> pieces;  ///< along axis, in the full tensor; each divisible by tp
  bool split() const { return axis >= 0; }
  std::string str() const;
};

struct ShardedGraph {
  Graph graph;  ///< the per-rank graph
  int tp = 1;
  std::map<std::string, ShardSpec> inputs;  ///< every graph input (and param) by name
  std::vector<ShardSpec> outputs;           ///< per output: split (gather along axis) or replicated (equal on every rank)
  /// Notes for `layerjit plan --tp`: how each matmul was split, where the all_reduces go.
  std::vector<std::string> notes;
};

/// The rank graph of `g` over `tp` ranks. Throws UserError (what, where, why) when g does not shard:
/// a head count, an FFN width or a split size that tp does not divide, a sharded value reaching an op
/// that would need the other ranks' part (a norm over the split axis, a per-token quantize of a
/// split activation), a matmul weight that is not a param. tp = 1 returns g unchanged (no all_reduce).
ShardedGraph shard(const Graph& g, int tp);

/// Rank `rank`'s share of a full tensor under `spec`.
HostTensor shard_tensor(const HostTensor& full, const ShardSpec& spec, int tp, int rank);
/// shard_tensor over a tensor's raw little-endian elements of `dtype` (packed 4-bit ones too, where
/// each rank's runs are whole bytes): what binding weights from a file does, run by run, without
/// widening them. `full` must hold the tensor of `shape` exactly.
std::vector<unsigned char> shard_bytes(std::span<const unsigned char> full, DType dtype, const std::vector<int64_t>& shape,
                                       const ShardSpec& spec, int tp, int rank);
/// The full tensor from every rank's share (a replicated spec: rank 0's).
HostTensor gather_tensor(const std::vector<HostTensor>& parts, const ShardSpec& spec, int tp);

}  // namespace lj
