// Named predicates behind every fusion decision, so `layerjit plan` can say why.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/graph.h"

namespace lj {

/// Reshape and split produce aliases of their input (no kernel, no traffic).
bool is_view(OpKind k);
/// Pointwise ops a fused elementwise kernel can evaluate per element (with broadcast operands).
bool is_elementwise(OpKind k);
/// Row-wise reductions over the last axis that a row kernel computes in one pass.
bool is_row_reduction(OpKind k);

/// Quantize without a scale operand: it reduces its input to find the scale, so it is not pointwise.
bool is_dynamic_quantize(const Node& n);
/// A node a fused kernel can evaluate per element: an elementwise kind, but no dynamic quantize.
bool is_pointwise(const Node& n);
/// A dequantize with group-wise scales (`group` set): scales indexed by column group and, for 4-bit
/// codes, elements read by nibble, so not pointwise; a kernel of its own (emit_elementwise.cpp).
bool is_group_dequantize(const Node& n);
/// Why the group-wise dequantize `n` cannot be a matmul's weight prologue (FusionGroup::matmul.dequant),
/// "" if it can: packed 4-bit codes [N, K] of the graph's params with K a multiple of 32 and groups
/// of a multiple of 32 elements (each 16-byte load of a row's codes lies in one group), scales and
/// zero points params too, the result 16-bit (the tensor cores' operand).
std::string weight_dequant_refusal(const Graph& g, const Node& n);
/// A dynamic quantize with one scale per row of a [rows, D] tensor (axis 0, the per-token scale of
/// activations): a row kernel finds the row's amax, the scale and the codes in one pass.
bool is_row_quantize(const Graph& g, const Node& n);

/// An attention whose query rows of each KV head fit one 16-row tile (query tokens x query heads per
/// KV head <= 16, the tokens constant): the split-KV decode kernel computes it, else flash prefill.
bool is_decode_attention(const Graph& g, const Node& n);

/// Users of every value (node ids, in graph order) and whether it is a graph output.
class UseMap {
 public:
  explicit UseMap(const Graph& g);
  const std::vector<NodeId>& users(ValueId v) const { return users_[static_cast<size_t>(v)]; }
  bool is_output(ValueId v) const { return is_output_[static_cast<size_t>(v)]; }

 private:
  std::vector<std::vector<NodeId>> users_;
  std::vector<bool> is_output_;
};

/// Why decode attention `n` may not read its cache before the kernel before it has finished, ""
/// where it may (FusionGroup::cache_before_wait): its positions are a graph input, and k and v are
/// each a contiguous cache that is a graph input, or a kv_cache_write into one (its only user) at
/// the same positions. A row before the first new token's position is then written by no kernel of
/// the graph; every kernel before the one just before the attention has completed when it starts.
std::string cache_prefetch_refusal(const Graph& g, const UseMap& uses, const Node& n);

/// Would adding `candidate` to a group create a cycle between groups: a path that leaves the group
/// (or the candidate) through an outside node and comes back in? `member(n)` says whether node n is
/// in the group, which must be free of such paths already (every member joined through this check);
/// views of members' results count as members (aliases of memory the group writes). Node ids are a
/// topological order (operands are defined first), so a new path must pass through the candidate
/// and only nodes between the lowest and highest ids of the group and the candidate (`lo`, `hi`) can
/// lie on it: growing a group node by node costs about its boundary, not its size.
bool creates_cycle(const Graph& g, const UseMap& uses, const std::function<bool(NodeId)>& member, NodeId lo, NodeId hi,
                   NodeId candidate);
/// The same for a group given as its nodes.
bool creates_cycle(const Graph& g, const UseMap& uses, const std::vector<NodeId>& group, NodeId candidate);

/// Same output shape: an elementwise node may join a producer's group only if it does not
/// broadcast the producer's result into a larger iteration space.
bool same_iteration_space(const Graph& g, NodeId a, NodeId b);

/// `part` holds fewer elements than `whole` at every symbol value: `whole`'s symbols include
/// `part`'s and its constant factor is larger (a [T, 8, 128] slice of a [T, 6144] buffer). A copy
/// of `part` frees memory only then.
bool smaller_at_every_size(const Graph& g, ValueId part, ValueId whole);
/// Kinds whose kernel can copy a view row by row alongside its own work: rope_kv_write (one CTA per
/// position row; the copy is one more stream of loads and stores, as a cache write of v is).
bool copies_rows(GroupKind k);
/// Rows of a rope_kv_write group: its positions, or the leading dim of what it rotates or writes.
Dim rope_group_rows(const Graph& g, const FusionGroup& grp);
/// `v` fits a row copy in group `grp`: [rows, H, D] or [rows, D] with the group's rows and constant
/// trailing dims (each CTA copies its row's H x D elements).
bool fits_row_copy(const Graph& g, const FusionGroup& grp, ValueId v);

/// One piece of a projection cut into attention heads: columns [c0, c1) of y [rows, N], split off
/// along the last axis and reshaped to heads [rows, H, D].
struct HeadPiece {
  int64_t c0 = 0, c1 = 0;
  ValueId piece = -1;  ///< the split's result [rows, c1 - c0]
  ValueId heads = -1;  ///< its reshape [rows, H, D]
  int64_t h = 0, d = 0;
};
/// y's pieces when y [rows, N] is read only by one split along its last axis whose every result is
/// read only by one reshape to [rows, H, D] (the QKV projection: q, k and v heads); empty otherwise.
/// Neither y nor a piece may be a graph output. The planner's RoPE-in-epilogue fusion walks this
/// structure and records what it fused in the group (MatmulEpilogue::rope_pieces).
std::vector<HeadPiece> head_pieces(const Graph& g, const UseMap& uses, ValueId y);

}  // namespace lj
