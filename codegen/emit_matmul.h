// Shared by the two matmul kernel families (emit_gemv.cpp, emit_gemm.cpp): the operands of the group's
// matmul node and row addressing of possibly-viewed operands.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/emit_common.h"

namespace lj {

/// y = matmul(x, w): x [..., K] rows (a run-time count M), w [N, K] with constant dims, and the
/// epilogue the planner fused: optionally SwiGLU of the two halves of y (silu(y[:, :N/2]) *
/// y[:, N/2:], the output width halves), then a chain of pointwise nodes (bias, residual, activation,
/// cast/quantize), each reading the previous value and group inputs.
struct MatmulOperands {
  NodeId node = -1;
  ValueId x = -1, w = -1, y = -1;
  int64_t n = 0, k = 0;
  DimProduct rows;  ///< M: the product of x's leading dims
  DType xt = DType::BF16, wt = DType::BF16, yt = DType::BF16;
  bool glu = false;                ///< SwiGLU: W rows [0, n_out) are the gate, [n_out, n) the up projection
  ValueId gate = -1, up = -1;      ///< glu: the split's two halves of y (never stored)
  std::vector<NodeId> epilogue;    ///< fused nodes after the matmul, in graph order
  ValueId out = -1;                ///< the value the kernel stores (y without an epilogue)
  int64_t n_out = 0;               ///< columns of `out`
};

/// Checks the group is a matmul with an epilogue the kernels implement (constant W dims, K-contiguous
/// rows, one stored output) and describes it.
MatmulOperands matmul_operands(const KernelContext& ctx);

/// Emits the epilogue of one output element at row `m`, column `n`: `acc` holds the fp32 sums (one
/// for y, or gate and up with glu), rounded to y's dtype first as an unfused matmul would store them.
/// Declares `<result>`, the fp32 value to store (without an epilogue: the sum itself). Loads of group inputs (bias,
/// residual, scales) are emitted here unless `preloaded` has them (vector loads made by the caller);
/// `stem` keeps coordinate names distinct per call.
void emit_epilogue_element(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m,
                           const std::string& n, const std::vector<std::string>& acc, const std::string& result,
                           const std::string& stem, const std::map<OperandRead, std::string>& preloaded = {});

/// The group inputs the epilogue reads, each with how it is read (a per-channel scale follows its axis).
std::vector<OperandRead> epilogue_reads(const KernelContext& ctx, const MatmulOperands& op);

/// The element offset of `v` at (leading coordinates of row `row`, `last`): emits the coordinate
/// lines for rank > 2 operands and returns the expression. `stem` keeps names distinct per operand.
std::string row_address(SourceWriter& w, const KernelContext& ctx, ValueId v, const std::string& row, const std::string& last,
                        const std::string& stem);

/// `v`'s rows (all dims but the last) as a 2-D tensor for TMA loads, box sizes left 0; nullopt unless
/// they are one constant stride apart from a constant start, both 16-byte aligned.
std::optional<TensorMapSpec> tma_rows(const KernelContext& ctx, ValueId v);

GeneratedKernel emit_gemv(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg);
GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, int sm_count);

}  // namespace lj
