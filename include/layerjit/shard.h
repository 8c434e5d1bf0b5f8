// Tensor parallelism: the sharding pass (compiler/passes/shard.cpp, docs/tp.md).
//
// shard(g, tp) rewrites a decoder layer into the graph one rank of a tp-way group runs:
// Megatron's column-parallel projections (the QKV and gate/up matmuls: W's rows split, each rank
// keeping its share of every piece a split makes of the output, so a rank holds whole query heads
// with their KV-head groups, and each gate column with its up column), the attention over a rank's
// heads and its slice of the KV caches, row-parallel projections (o and down: W's columns split)
// each followed by an all_reduce of its partial sums. Every rank runs the same kernels on its share
// (SPMD) except where a residual add is folded before an all_reduce: rank 0 adds the residual to its
// partial sums, the others do not (ShardOptions). Inputs and params carry how the full tensors are
// split (ShardSpec); shard_tensor cuts a rank's share, gather_tensor puts the ranks' outputs back
// together.
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

struct ShardOptions {
  /// Move a residual add that follows an all_reduce before it (ShardedGraph::others): rank 0 adds
  /// the residual to its partial sums, the other ranks do not, and the all_reduce yields the sum.
  bool fold_residuals = true;
};

struct ShardedGraph {
  Graph graph;   ///< rank 0's graph
  /// The graph of ranks 1 .. tp-1: `graph` without the residual adds ShardOptions::fold_residuals
  /// moved before the all_reduces (each all_reduce sums the bare partial); equal to `graph` when
  /// nothing was folded. The inputs and outputs of the two are the same.
  Graph others;
  int tp = 1;
  const Graph& rank_graph(int rank) const { return rank == 0 ? graph : others; }
  std::map<std::string, ShardSpec> inputs;  ///< every graph input (and param) by name
  std::vector<ShardSpec> outputs;           ///< per output: split (gather along axis) or replicated (equal on every rank)
  /// Notes for `layerjit plan --tp`: how each matmul was split, where the all_reduces go.
  std::vector<std::string> notes;
};

/// The rank graph of `g` over `tp` ranks. Throws UserError (what, where, why) when g does not shard:
/// a head count, an FFN width or a split size that tp does not divide, a sharded value reaching an op
/// that would need the other ranks' part (a norm over the split axis, a per-token quantize of a
/// split activation), a matmul weight that is not a param. tp = 1 returns g unchanged (no all_reduce).
ShardedGraph shard(const Graph& g, int tp, const ShardOptions& o = {});

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
