// Fusion groups: the planner's output. Each group becomes one kernel (views become none); it
// records the IR nodes it absorbs, the values it reads from and writes to device memory, the
// intermediates it keeps on chip, and why it was formed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layerjit/graph.h"

namespace lj {

// The one list of group kinds: id, name in plans and kernel names.
#define LJ_GROUP_KINDS(X)                                                                       \
  X(Elementwise, "elementwise")   /* chains of pointwise ops with broadcasts (incl. SwiGLU)  */ \
  X(RowReduce, "row_reduce")      /* rms_norm/layer_norm/softmax + prologue/epilogue         */ \
  X(RopeKvWrite, "rope_kv_write") /* ropes and KV-cache writes (with their rope_table)      */ \
  X(Matmul, "matmul")             /* GEMM / GEMV (epilogues: issue 6)                        */ \
  X(Attention, "attention")       /* flash attention / split-KV decode                       */ \
  X(Reduce, "reduce")             /* reduce_sum/max/mean over one axis                       */ \
  X(Copy, "copy")                 /* transpose, concat                                       */ \
  X(RopeTable, "rope_table")      /* a rope_table alone: the cos/sin tables, stored for the  */ \
                                  /* RoPE epilogues of the projections (rope_kv_write's     */ \
                                  /* kernels write it)                                       */ \
  X(Gather, "gather")             /* an embedding lookup: rows of a table by id              */ \
  X(AllReduce, "all_reduce")      /* the sum over a tensor-parallel group's ranks: NCCL, no  */ \
                                  /* generated kernel (docs/tp.md)                           */

enum class GroupKind : uint8_t {
#define LJ_X(id, name) id,
  LJ_GROUP_KINDS(LJ_X)
#undef LJ_X
};

std::string_view group_kind_name(GroupKind k);

/// What the planner matched in a matmul group's epilogue (grow_matmul, grow_rope_projection): the
/// emitters read it rather than match the pattern again. Empty for a bare matmul.
struct MatmulEpilogue {
  /// A per-column scale before a SwiGLU or RoPE epilogue's split: mul(y, s[N]) then cast (a W8A8
  /// projection's per-channel weight scale on its f32 sums). The kernel multiplies each sum by its
  /// column's s and rounds to the cast's dtype where it forms the halves or heads.
  NodeId col_scale = -1, col_cast = -1;
  /// SwiGLU: silu(gate) * up over the two halves `gate`, `up` of the matmul's output (a split).
  NodeId silu = -1, mul = -1;
  ValueId gate = -1, up = -1;
  /// Pointwise nodes after it (bias, residual, activation, cast/quantize), each reading the last.
  std::vector<NodeId> pointwise;
  /// RoPE in the epilogue: the output cut into heads along its columns (legality's head_pieces),
  /// each piece rotated by `rope` (or not: -1) and written to the KV cache by `writes` (of the
  /// piece's heads) and `rotated_writes` (of the rope's result), in node order.
  struct RopePiece {
    int64_t c0 = 0, c1 = 0, d = 0;  ///< columns of the output; the heads' head_dim
    ValueId heads = -1;             ///< the piece as heads [rows, H, D]
    NodeId rope = -1;
    std::vector<NodeId> writes, rotated_writes;
  };
  std::vector<RopePiece> rope_pieces;  ///< non-empty: a RoPE epilogue (then no SwiGLU, no pointwise)
  /// The tables every rope reads (cos, sin: a rope_table's results), its head_dim and pairing.
  ValueId cos = -1, sin = -1;
  int64_t rope_dim = 0;
  bool rope_interleaved = false;
  /// One-row prologues (FusionOptions::one_row_prologues): the rope_table whose tables the ropes
  /// read, computed by the kernel at its row's position instead of read from memory, and the
  /// rms_scale of x whose factor scales the sums, computed from the x the kernel reads anyway.
  NodeId table = -1, rms = -1;
  /// A row-scale prologue (any size): the pointwise node that makes the row scale out of per-row
  /// values and scalars (an fp8 layer's activation scale times the weight's), evaluated per row
  /// where the kernel reads the scale.
  NodeId row_scale_product = -1;
  /// An activation-quantize prologue (one row, fp8 or i8 x; FusionOptions::one_row_prologues): the
  /// per-row dynamic quantize making x's codes and the scale the row-scale product reads, and the
  /// rms_norm of the row it quantizes (or -1), computed by each CTA of the GEMV, the codes kept in
  /// its shared memory (at most kMaxQuantizePrologueK of them). Without a quantize, x_norm is the
  /// rms_norm making a 4-bit-weight GEMV's x at one row (a one-row prologue): the kernel multiplies
  /// the x it loads by the norm's weight and scales the sums by the row's factor.
  NodeId x_quantize = -1, x_norm = -1;
  /// A weight prologue (FusionOptions::weight_dequant_prologues): the group-wise dequantize of packed
  /// 4-bit codes that makes W, read by the kernel as codes, scales and zero points and dequantized
  /// in registers; W itself is never stored (no weight preparation, no bf16 copy of the weights).
  NodeId dequant = -1;
  /// A row tail (FusionOptions::row_tails: one row, a GEMV): the per-row dynamic quantize of the
  /// value the epilogue stores (`tail_src`), and the rms_norm before it (or -1), which a row kernel
  /// of their own would run next. The CTA that finishes last (a completion counter) reads the row
  /// back from L2 and runs the row kernel's body on it with the GEMV's threads: the quantize's codes
  /// and scale are the group's outputs, the normed row never reaches memory. `tail_src` is stored
  /// whether or not another kernel reads it.
  NodeId tail_norm = -1, tail_quantize = -1;
  ValueId tail_src = -1;
};

/// The longest row an activation-quantize prologue takes (MatmulEpilogue::x_quantize): its codes
/// live in the GEMV's static shared memory (16 KiB of 1-byte codes; Llama-3-8B's down projection
/// has 14336).
inline constexpr int64_t kMaxQuantizePrologueK = 16384;

/// The static shared memory an activation-quantize prologue may take for the codes and its copy of
/// the row (and of the norm's weight) read once from L2; above it the prologue reads L2 once per
/// pass. 42 KiB: Llama-3-8B's down row (14336 bf16 and their codes) fits beside the GEMV's 4 KiB of
/// partials under the 48 KiB of static shared memory a kernel may declare.
inline constexpr int64_t kQuantizePrologueSharedBytes = 42 * 1024;

/// The longest row a row tail takes (MatmulEpilogue::tail_quantize): the GEMV's threads hold it in
/// registers, at most 64 floats each (256 threads: Llama-3-8B's 14336-wide MLP rows fit).
inline constexpr int64_t kMaxRowTail = 16384;

struct FusionGroup {
  int id = 0;
  GroupKind kind = GroupKind::Copy;
  std::vector<NodeId> nodes;       // absorbed nodes, in graph order
  std::vector<ValueId> inputs;     // read from device memory (a view is read as the part it names)
  std::vector<ValueId> outputs;    // written to device memory: used by another group or returned
  std::vector<ValueId> internal;   // produced and consumed inside: never reach device memory
  /// Returned views the kernel copies into buffers of their own (see OutputView); each is also in
  /// `inputs`, read in place in the buffer it aliases. Only rope_kv_write kernels copy.
  std::vector<ValueId> copies;
  /// Views in buffers of their own (FusionPlan::dense_views), carried by every group so that each
  /// kernel addresses them as the plan lays them out.
  std::vector<ValueId> dense_views;
  std::vector<std::string> why;    // the legality decisions that formed the group, for `plan`
  /// Weight preparation: the group reads params only (a folded norm's W * w), so the executable runs
  /// it once when the weights are bound, not per call, and keeps its outputs with the weights.
  bool prepare = false;
  /// Matmul groups: the epilogue the planner fused.
  MatmulEpilogue matmul;
  /// Decode attention (FusionOptions::cache_prefetch): the kernel loads the cache's rows before the
  /// new tokens' positions, and the positions, before it waits for the kernel before it (which
  /// writes the new rows), and launches early (programmatic dependent launch) to do so while that
  /// kernel runs. Set only where no kernel of the graph writes those rows (cache_prefetch_refusal).
  bool cache_before_wait = false;
  /// Lets the next kernel launch as soon as every CTA of this one has passed its wait, not as its
  /// CTAs exit: set on the kernel before a cache_before_wait attention, whose CTAs then take the SMs
  /// this one leaves free and stream the cache while it runs.
  bool trigger_dependents = false;
};

/// The node a group is built around: a matmul group's matmul (its one-row prologues come first in
/// node order), else the group's first node.
NodeId anchor_node(const Graph& g, const FusionGroup& grp);

/// A graph output that is a view (reshape, split) of another value's buffer: the prefill layer
/// returns %v, a [T, 8, 128] slice of the [T, 6144] QKV projection. Left a view, the whole buffer
/// must survive the run for the caller to read the slice; copied out by a kernel that reads that
/// buffer anyway, the output lives in a buffer of its own and the larger one is freed after its last
/// reader (for the 8B prefill layer at T=4096: 48 MiB of the projection pinned through the MLP, where
/// the arena peaks, against an 8 MiB copy). Readers inside the graph still read the value in place.
struct OutputView {
  ValueId value = -1;
  ValueId buffer = -1;   // the value whose memory it aliases (memory_owner)
  int copied_by = -1;    // the group that copies it (an index into FusionPlan::groups); -1: it stays a view
  std::string why;       // the decision, for `plan`
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in a valid execution order
  std::vector<NodeId> views;        // reshape/split nodes: aliases, no kernel, no traffic
  std::vector<OutputView> output_views;  // every distinct graph output made by a view, in output order
  /// Views whose own dense buffer the group making them stores into, because what they view is never
  /// stored: the v heads of a QKV projection whose epilogue applies RoPE (%qkv stays on chip, %v is
  /// read by attention and returned). Readers read them there; views of them alias them.
  std::vector<ValueId> dense_views;
  /// Graph-level decisions made before grouping (norm folding), for `plan`.
  std::vector<std::string> notes;
  bool fused = true;
};

struct FusionOptions {
  bool fuse = true;              // false: one group per op (the honest unfused baseline)
  bool matmul_epilogues = true;  // false: matmuls stay alone (to measure what epilogue fusion gains)
  bool copy_output_views = true; // false: returned views stay aliases (to measure what the copies save)
  bool fold_norms = true;        // lower(): RMSNorms folded into the matmuls that read them (fold_norms)
  /// Where `sizes` make a matmul's rows one (decode of one sequence: the GEMV, whose warps each read
  /// the whole row of x), the rms_scale and rope_table it alone reads join its group and are
  /// computed in the kernel: two or three kernels of one CTA's work fewer per decode step. With W
  /// from 4-bit codes and norm_prologues, the rms_norm making x joins (MatmulEpilogue::x_norm).
  bool one_row_prologues = true;
  /// With one_row_prologues, also the per-row quantize (and the rms_norm before it) making an fp8 or
  /// i8 x: each CTA of the GEMV quantizes the row into its shared memory. Off by default: measured
  /// slower on the H200 (docs/perf.md): the fp8 decode layer at B = 1 0.1016 ms with them against
  /// 0.0878 without any one-row prologue, since every CTA quantizes the whole row before its weights
  /// stream (gate/up's 1792 CTAs: 0.0328 -> 0.0491 ms); with the row read once and W primed, on the
  /// H100 0.1161-0.1165 against 0.1030-0.1032. `--quantize-prologues` on the CLI.
  bool quantize_prologues = false;
  /// The same for the GEMVs whose W has at most this many rows (0: none), whose CTAs fill about one
  /// round (gate/up's 28672 rows come in ~7 rounds of CTAs, each paying the prologue again). Off by
  /// default: at 8192 (QKV, o, down) measured slower on the H100 (docs/perf.md): the fp8 decode layer
  /// at B = 1 0.1075-0.1077 ms against 0.1030-0.1032 with the row kernels, each prologue adding 2-5 us
  /// to its GEMV though it reads the row once and the first steps of W go out before it.
  /// `--quantize-prologue-rows N` on the CLI.
  int64_t quantize_prologue_rows = 0;
  /// With one_row_prologues, the per-row quantize (and the rms_norm before it) of a GEMV's output
  /// joins the GEMV as its row tail (MatmulEpilogue::tail_quantize): the last CTA to finish
  /// normalises and quantizes the row, where a row kernel of one CTA ran after the GEMV (the fp8
  /// and W8A8 decode layers' quantizes after o and gate/up). Off by default: measured slower on the
  /// H100 (docs/perf.md): the fp8 decode layer at B = 1 0.1089-0.1091 ms with them against
  /// 0.1065-0.1066 without, since every CTA's completion count (a fence and an atomic round trip
  /// before it exits) holds its slot, once per round of CTAs (gate/up 0.0426 -> 0.0487 ms), and the
  /// tail's own row work costs what the row kernel cost inside the CUDA graph. `--row-tails` on the CLI.
  bool row_tails = false;
  /// With one_row_prologues, also the rms_norm making a 4-bit GEMV's x (MatmulEpilogue::x_norm):
  /// x times the norm's weight on load, x's squares on the tensor cores. Off by default: measured
  /// slower on the H100 (docs/perf.md): the INT4 decode layer at B = 1 0.0797 ms with them against
  /// 0.0781 without any one-row prologue, gate/up's GEMV 0.0303 -> 0.0364 ms (the norm's weight,
  /// two more mmas and four packed multiplies per word of codes, and u=2 where u=4 would spill).
  /// `--norm-prologues` on the CLI.
  bool norm_prologues = false;
  /// Where `sizes` give a matmul at most 16 rows (decode) and its W is a group-wise dequantize of
  /// packed 4-bit params, the dequantize joins the matmul's group: the 4-bit GEMV reads the codes (a
  /// quarter of the bf16 bytes) and dequantizes them in registers. Otherwise the dequantize is
  /// weight preparation, run once when the weights are bound, and the matmul reads its bf16 result.
  bool weight_dequant_prologues = true;
  /// Also at more rows, or rows not known at plan time: the GEMMs read the codes and dequantize W's
  /// tiles into shared memory (templates/layerjit/gemm_q4.cuh), so no bf16 copy of the weights is
  /// ever made (a quarter of the memory). Off by default: on the H200 these GEMMs run at 0.3-0.5x the
  /// bf16 GEMMs over the prepared weights for now (docs/perf.md). `--packed-weights` on the CLI.
  bool packed_weight_gemms = false;
  /// Decode attention reads the cache rows no kernel of the graph writes before the kernel before it
  /// has finished, and that kernel lets it launch early (FusionGroup::cache_before_wait):
  /// the cache streams while the QKV projection runs. `--no-cache-prefetch` on the CLI.
  bool cache_prefetch = true;
  /// The symbol values the plan is made for (the compile hint); unbound symbols decide nothing.
  Bindings sizes;
};

/// A graph ready for code generation: the caller's graph after the graph passes the options ask for
/// (norm folding; the caller's own graph when none changes it) and its fusion plan. Every value id of
/// the caller's graph means the same value in `graph`, which may have more.
struct Lowered {
  std::shared_ptr<const Graph> graph;
  FusionPlan plan;
};
Lowered lower(const Graph& g, const FusionOptions& opts = {});

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
/// `unfused_source`: the graph the unfused totals are counted on (the caller's graph, before norm
/// folding); `g` itself when null.
std::string print_plan(const Graph& g, const FusionPlan& plan, const Bindings& b, const Graph* unfused_source = nullptr);

}  // namespace lj
