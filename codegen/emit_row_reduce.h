// The row kernel's body (emit_row_reduce.cpp), shared with the GEMV's row tail (emit_matmul.cpp):
// one CTA's work on one row of a row_reduce group, whichever kernel it runs in.
#pragma once

#include <functional>
#include <string>

#include "codegen/emit_common.h"

namespace lj {

/// The kernel's reduction and quantize, and why none implements the group if it cannot.
struct RowReducePlan {
  NodeId red = -1;    ///< the norm or softmax
  NodeId dq = -1;     ///< a dynamic quantize of the row
  NodeId first = -1;  ///< the first node that needs the whole row
  Shape space;
  std::string reject;
  SourceLoc loc;
};
RowReducePlan plan_row_reduce(const Graph& g, const FusionGroup& grp);

/// The access width over the values indexed by the row's elements (not the one-per-row scale or
/// factor), and the threads the row kernel takes.
struct RowGeometry {
  int vec = 1;
  int threads = 32;
};
RowGeometry row_geometry(const KernelContext& ctx, const FusionGroup& grp, const RowReducePlan& plan);

/// The row kernel's work on the row `row` (a variable in scope) of group `grp` (its nodes, inputs
/// and outputs; `ctx` may be another group's that holds them) by `threads` threads, all of which
/// must reach it: load the row into registers, reduce, normalise, quantize, store. `row_lines`
/// comes after the constants (the row kernel's row index and bounds check); `past_l1` is read with
/// L2 loads (lj_load_cg: a row tail's source, written by other CTAs of the same kernel). With the
/// row kernel's threads the results are bit for bit the row kernel's (the same sums in the same
/// order); with others, the block sums add in another order.
void emit_row_body(SourceWriter& w, KernelContext& ctx, const FusionGroup& grp, const RowReducePlan& plan, int threads,
                   const std::function<void(SourceWriter&)>& row_lines, ValueId past_l1);

}  // namespace lj
