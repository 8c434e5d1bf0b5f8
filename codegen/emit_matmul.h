// Shared by the two matmul kernel families (emit_gemv.cpp, emit_gemm.cpp): the operands of the group's
// matmul node and row addressing of possibly-viewed operands.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/emit_common.h"

namespace lj {

/// y = matmul(x, w): x [..., K] rows (a run-time count M), w [N, K] with constant dims, and the
/// epilogue the planner fused: optionally SwiGLU of the two halves of y (silu(y[:, :N/2]) *
/// y[:, N/2:], the output width halves), then a chain of pointwise nodes (bias, residual, activation,
/// cast/quantize), each reading the previous value and group inputs.
struct MatmulOperands {
  /// Non-empty: no matmul kernel implements the group, and why (with where, `reject_loc`); the
  /// fields below are then partly unset.
  std::string reject;
  SourceLoc reject_loc;
  NodeId node = -1;
  ValueId x = -1, w = -1, y = -1;
  ValueId row_scale = -1;  ///< f32 per row of x: each row's sums are multiplied by it (a folded RMSNorm)
  /// One-row prologue (FusionGroup::matmul.rms): row_scale = rms_scale(x) computed by the kernel from
  /// the x it reads (the SIMT GEMV adds up the squares on the way), never read from memory.
  NodeId rms = -1;
  /// Row-scale prologue (FusionGroup::matmul.row_scale_product): row_scale = that pointwise node of
  /// per-row values and scalars, evaluated where the kernel reads the scale (row_scale_expr).
  NodeId row_scale_product = -1;
  /// Activation-quantize prologue (FusionGroup::matmul.x_quantize): x (fp8 or i8 codes) and its
  /// per-row scale `x_scale` are made by the kernel, one row at a time, from `x_src` (the quantize's
  /// input, or with `x_norm` the rms_norm's input, normalised with the weight `x_gamma`): the codes
  /// in shared memory `xq_s`, the scale in `xq_scale` (emit_x_quantize_prologue). x is never read.
  /// Without a quantize, `x_norm` is the rms_norm making x, folded into the 4-bit GEMV: it reads
  /// `x_src` and `x_gamma` where it would read x (FusionGroup::matmul.x_norm).
  NodeId x_quantize = -1, x_norm = -1;
  ValueId x_src = -1, x_gamma = -1, x_scale = -1;
  /// Weight prologue (FusionGroup::matmul.dequant): W is the group-wise dequantize of 4-bit codes
  /// `wq` [N, K] (u4 or i4, two per byte) with scales `ws` [N, K / group] and zero points `wz` (u4
  /// or i8; -1: none), dequantized in registers; `w` is then never stored and `wt` is its dtype.
  NodeId dequant = -1;
  ValueId wq = -1, ws = -1, wz = -1;
  /// Row tail (FusionGroup::matmul.tail_quantize): after every CTA's stores, the one that counts
  /// last runs the row kernel's body (the rms_norm, if any, and the quantize) on `out`'s rows, read
  /// back from L2 (emit_row_tail).
  NodeId tail_norm = -1, tail_quantize = -1;
  int64_t group = 0;
  int64_t n = 0, k = 0;
  DimProduct rows;  ///< M: the product of x's leading dims
  DType xt = DType::BF16, wt = DType::BF16, yt = DType::BF16;
  bool glu = false;                ///< SwiGLU: W rows [0, n_out) are the gate, [n_out, n) the up projection
  ValueId gate = -1, up = -1;      ///< glu: the split's two halves of y (never stored)
  std::vector<NodeId> epilogue;    ///< fused nodes after the matmul, in graph order
  ValueId out = -1;                ///< the value the kernel stores (y without an epilogue); -1 with segments
  int64_t n_out = 0;               ///< columns of `out`
  /// A per-column scale before the split (FusionGroup::matmul.col_scale): each sum of column n
  /// times col_scale[n], rounded to `ct` (the cast's dtype, which the halves or heads have) where
  /// they are formed. Without one, ct is yt.
  ValueId col_scale = -1;
  DType ct = DType::BF16;

  /// RoPE in the epilogue (the planner's record, FusionGroup::matmul): y is cut into heads and
  /// never stored; each segment of columns is stored as heads, rotated where a rope reads it, into
  /// values and KV-cache entries. The tile config pairs columns so that a thread holds both values of
  /// each pair it rotates (pair_columns).
  struct Dest {
    ValueId value = -1;     ///< a [rows, H, D] value: a rope's result or a dense heads view
    NodeId cache_write = -1;  ///< or a kv_cache_write at the positions `pos`
  };
  struct Segment {
    int64_t c0 = 0, c1 = 0, d = 0;  ///< columns of y; the heads' head_dim
    ValueId heads = -1;             ///< the piece of y as heads [rows, H, D]
    NodeId rope = -1;               ///< rotates the segment (-1: stored as computed)
    std::vector<Dest> plain, rotated;
  };
  std::vector<Segment> segments;
  int64_t rope_dim = 0;  ///< D of the rotation: pairs lie within heads of D columns
  bool rope_interleaved = false;
  ValueId cos = -1, sin = -1, pos = -1;
  /// One-row prologue (FusionGroup::matmul.table): the rope_table of cos and sin, whose angles the
  /// GEMV epilogue computes at the row's position `pos` (emit_rope_angle); cos and sin are never stored.
  NodeId table = -1;
};

/// Describes the group's matmul and the epilogue the planner recorded, or says why the kernels cannot
/// implement it (`reject`: W dims not constant, rows of x or W not K-contiguous, not one stored output).
MatmulOperands matmul_operands(const KernelContext& ctx);

/// Column `col` of y from its fp32 sum `acc` as the split's halves or heads hold it, before their
/// rounding: `acc`, or with a column scale acc times the column's factor (then rounded to op.ct).
std::string column_scaled(KernelContext& ctx, const MatmulOperands& op, const std::string& acc, const std::string& col);

/// Emits the epilogue of one output element at row `m`, column `n`: `acc` holds the fp32 sums (one
/// for y, or gate and up with glu), rounded to y's dtype first as an unfused matmul would store them.
/// Declares `<result>`, the fp32 value to store (without an epilogue: the sum itself). Loads of group inputs (bias,
/// residual, scales) are emitted here unless `preloaded` has them (vector loads made by the caller);
/// `stem` keeps coordinate names distinct per call. `acc_rounded`: `acc` already holds values of y's
/// dtype (the GEMMs' staged tile), so they are used as they are.
void emit_epilogue_element(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m,
                           const std::string& n, const std::vector<std::string>& acc, const std::string& result,
                           const std::string& stem, const std::map<OperandRead, std::string>& preloaded = {},
                           bool acc_rounded = false);

/// Loads the position of row `m` into `pos` and checks it against every cache the epilogue writes.
void emit_rope_position(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m);

/// With a one-row table (op.table): the angle of the rotation pair of column `n` at `pos`, as the
/// rope_table kernel computes it (sincos in double of pos * lj_inv_freq[i], rounded to f32), into
/// floats named `cos_name` and `sin_name`. Needs `lj_inv_freq` (emit_inv_freq_table) and D, HALF.
void emit_rope_angle(SourceWriter& w, const KernelContext& ctx, const MatmulOperands& op, const std::string& n,
                     const std::string& cos_name, const std::string& sin_name);

/// Emits the stores of `width` consecutive output columns of row `m` starting at column `n` (an
/// expression; the run lies in one head and one half of it) for a RoPE epilogue: `y` is an array
/// of the values rounded to y's dtype, `partner` of the other element of each one's rotation pair.
/// `vector` allows one `width`-wide store per destination (proven aligned by the caller).
/// `table_row`, when not empty, is the row of the tile whose cos/sin the kernel staged in shared
/// memory as `lj_cos_t` / `lj_sin_t` [rows][D/2]; else they are read from memory. Cache writes need
/// the row's position `pos`: loaded and checked here unless `load_position` is false (the caller's
/// earlier call did it in an enclosing scope). `angle`, when not empty, names the floats {cos, sin}
/// of the run's one pair (width 1: emit_rope_angle), computed by the caller.
void emit_rope_stores(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m, const std::string& n,
                      int width, const std::string& y, const std::string& partner, bool vector, const std::string& table_row = "",
                      bool load_position = true, const std::pair<std::string, std::string>& angle = {});

/// The row scale of row `m` (a flat row index of x) as a float expression, after the coordinate lines
/// it needs; "" without a row scale. `stem` keeps names distinct per call.
/// With 4-bit W (op.dequant): the bytes of `rows` W rows' scales and zero points (u4 zero points
/// packed two to a byte, an odd count rounded up).
int64_t q4_constant_bytes(const Graph& g, const MatmulOperands& op, int64_t rows);

std::string row_scale_expr(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m,
                           const std::string& stem);

/// The activation-quantize prologue for row `row` (a flat row index of x) of every thread of the
/// CTA (`threads`, a multiple of 32; all must reach it): declares `xq_s` (K codes in shared memory)
/// and `xq_scale`, computed as the row kernel computes them (the same per-element expressions: the
/// same codes and scale up to the order of the block sums), and ends with a __syncthreads. Needs
/// layerjit/vec.cuh, reduce.cuh and quant.cuh.
void emit_x_quantize_prologue(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, int threads, const std::string& row);

/// A row tail's completion counter: the kernel's scratch parameter (4 bytes per CTA, the first
/// used), added before the signature is written; "" without a tail.
std::string row_tail_scratch(KernelContext& ctx, const MatmulOperands& op);

/// The row tail (op.tail_quantize >= 0; else nothing), at the end of a GEMV kernel of `threads`
/// threads that all reach it (none has returned): counts the CTA on the completion counter in
/// `scratch` (row_tail_scratch), and in the CTA that counts last runs the row kernel's body on every
/// row of `op.out`, then sets the counter back to zero. Needs layerjit/vec.cuh, reduce.cuh,
/// quant.cuh and math.cuh.
void emit_row_tail(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, int threads, const std::string& scratch);

/// The group inputs the epilogue reads, each with how it is read (a per-channel scale follows its axis).
std::vector<OperandRead> epilogue_reads(const KernelContext& ctx, const MatmulOperands& op);

/// The element offset of `v` at (leading coordinates of row `row`, `last`): emits the coordinate
/// lines for rank > 2 operands and returns the expression. `stem` keeps names distinct per operand.
std::string row_address(SourceWriter& w, const KernelContext& ctx, ValueId v, const std::string& row, const std::string& last,
                        const std::string& stem);

/// `v`'s rows (all dims but the last) as a 2-D tensor for TMA loads, box sizes left 0; nullopt unless
/// they are one constant stride apart from a constant start, both 16-byte aligned.
std::optional<TensorMapSpec> tma_rows(const KernelContext& ctx, ValueId v);

/// The GEMV families' output at row `m`, column `n` (names in the generated code) from the fp32 sums
/// `sum` and, with SwiGLU or RoPE, `sum_up` (the up row, or column `n2` of the rotation pair): the
/// pair's RoPE stores and cache writes, or the epilogue and one store to `out_param`.
void emit_gemv_output(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& out_param);

// The family emitters; `cfg` has passed reject_reason (emit_matmul checks it first), which owns
// every rule a config must meet (tile widths for SwiGLU and RoPE pairs, split-K depth, dtypes).
GeneratedKernel emit_gemv(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg);
/// The tensor-core GEMV ("gemv mma", emit_gemv_mma.cpp): fp8 x and W, or bf16/f16 x and W made
/// from 4-bit codes by a weight prologue (op.dequant).
GeneratedKernel emit_gemv_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg);
/// The tensor-core GEMMs: mma.sync (emit_gemm_mma.cpp) and the Hopper wgmma GEMM (emit_gemm_wgmma.cpp).
GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts);
GeneratedKernel emit_gemm_wgmma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts);

}  // namespace lj
