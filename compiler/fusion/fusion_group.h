// Fusion groups: the planner's output. Each group becomes one kernel (views become none); it
// records the IR nodes it absorbs, the values it reads from and writes to device memory, the
// intermediates it keeps on chip, and why it was formed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "layerjit/graph.h"

namespace lj {

// The one list of group kinds: id, name in plans and kernel names.
#define LJ_GROUP_KINDS(X)                                                                       \
  X(Elementwise, "elementwise")   /* chains of pointwise ops with broadcasts (incl. SwiGLU)  */ \
  X(RowReduce, "row_reduce")      /* rms_norm/layer_norm/softmax + prologue/epilogue         */ \
  X(RopeKvWrite, "rope_kv_write") /* rope_table, ropes, KV-cache writes (any of them)        */ \
  X(Matmul, "matmul")             /* GEMM / GEMV (epilogues: issue 6)                        */ \
  X(Attention, "attention")       /* flash attention / split-KV decode                       */ \
  X(Reduce, "reduce")             /* reduce_sum/max/mean over one axis                       */ \
  X(Copy, "copy")                 /* transpose, concat                                       */

enum class GroupKind : uint8_t {
#define LJ_X(id, name) id,
  LJ_GROUP_KINDS(LJ_X)
#undef LJ_X
};

std::string_view group_kind_name(GroupKind k);

struct FusionGroup {
  int id = 0;
  GroupKind kind = GroupKind::Copy;
  std::vector<NodeId> nodes;       // absorbed nodes, in graph order
  std::vector<ValueId> inputs;     // read from device memory (a view is read as the part it names)
  std::vector<ValueId> outputs;    // written to device memory: used by another group or returned
  std::vector<ValueId> internal;   // produced and consumed inside: never reach device memory
  std::vector<std::string> why;    // the legality decisions that formed the group, for `plan`
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in a valid execution order
  std::vector<NodeId> views;        // reshape/split nodes: aliases, no kernel, no traffic
  bool fused = true;
};

struct FusionOptions {
  bool fuse = true;              // false: one group per op (the honest unfused baseline)
  bool matmul_epilogues = true;  // false: matmuls stay alone (to measure what epilogue fusion gains)
};

/// Covers every non-view node of `g` with exactly one group. Deterministic: the same graph gives the
/// same groups in the same order.
FusionPlan plan_fusion(const Graph& g, const FusionOptions& opts = {});

/// FLOPs and minimum device-memory bytes of one group at bound symbol values. In-place cache writes
/// count only the entries written.
struct GroupCost {
  double flops = 0;
  double bytes = 0;
};
GroupCost group_cost(const Graph& g, const FusionGroup& grp, const Bindings& b);

/// Human-readable plan: groups, nodes, traffic; totals against the unfused plan when symbols are
/// bound (stable text, used by `layerjit plan` and golden tests).
std::string print_plan(const Graph& g, const FusionPlan& plan, const Bindings& b);

}  // namespace lj
