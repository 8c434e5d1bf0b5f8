// Shared by the two matmul kernel families (emit_gemv.cpp, emit_gemm.cpp): the operands of the group's
// matmul node and row addressing of possibly-viewed operands.
#pragma once

#include <string>

#include "codegen/emit_common.h"

namespace lj {

/// y = matmul(x, w): x [..., K] rows (a run-time count M), w [N, K] with constant dims.
struct MatmulOperands {
  NodeId node = -1;
  ValueId x = -1, w = -1, y = -1;
  int64_t n = 0, k = 0;
  DimProduct rows;  ///< M: the product of x's leading dims
  DType xt = DType::BF16, wt = DType::BF16, yt = DType::BF16;
};

/// Checks the group is one matmul node the kernels can read (constant W dims, K-contiguous rows).
MatmulOperands matmul_operands(const KernelContext& ctx);

/// The element offset of `v` at (leading coordinates of row `row`, `last`): emits the coordinate
/// lines for rank > 2 operands and returns the expression. `stem` keeps names distinct per operand.
std::string row_address(SourceWriter& w, const KernelContext& ctx, ValueId v, const std::string& row, const std::string& last,
                        const std::string& stem);

GeneratedKernel emit_gemv(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg);
GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg);

}  // namespace lj
