// Where each IR value lives in device memory: the analysis the fusion planner and codegen share. A
// value produced by a kernel (or a graph input) owns a dense row-major buffer; a view (reshape, split)
// is an offset and strides into the buffer it aliases, and a kv_cache_write's result is its cache
// (the write is in place). Offsets and strides are symbolic products (constant * symbols), so a view
// of a [T, 6144] buffer is described exactly for every T.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/graph.h"

namespace lj {

struct TensorLayout {
  ValueId buffer = -1;              // the value that owns the memory
  DimProduct offset;                // in elements
  std::vector<DimProduct> strides;  // in elements, one per dim of the value
};

/// The one aliasing rule: the operand whose memory `v` lives in (a view's source, a kv_cache_write's
/// cache), or -1 where `v` owns its memory (every other value, and a view in `dense`, which
/// FusionPlan::dense_views stores in a buffer of its own).
ValueId aliased_operand(const Graph& g, ValueId v, const std::vector<ValueId>& dense = {});
/// The value owning `v`'s memory: aliased_operand followed to its end (compute_layouts' buffer).
ValueId memory_owner(const Graph& g, ValueId v, const std::vector<ValueId>& dense = {});

/// Layouts of every value of `g`. A kv_cache_write result aliases its cache operand (the write is in
/// place); a view in `dense` (FusionPlan::dense_views) owns a dense buffer, and views of it alias
/// that. Throws UserError if a reshape of a strided view cannot be expressed as a view (it would
/// need a copy), naming the value.
std::vector<TensorLayout> compute_layouts(const Graph& g, const std::vector<ValueId>& dense = {});

/// Layouts as a run of `plan` leaves the values: compute_layouts(g, plan.dense_views), except that each returned view
/// the plan copies (OutputView::copied_by >= 0) is the dense buffer of its own the copy fills. Kernels
/// read values through compute_layouts (a copied view's readers still read it in place); memory
/// planning, binding and downloading outputs go through these.
std::vector<TensorLayout> plan_layouts(const Graph& g, const FusionPlan& plan);

/// C++ expression for a symbolic product, given how symbols are spelled in the kernel: "6144",
/// "T", "(64 * T)". Constants print as int64 literals where needed.
std::string product_expr(const DimProduct& p);

/// The C++ name of a symbol's kernel parameter: "s_T". Prefixed so that no symbol name (M, N, K, ...)
/// can collide with the constants and locals the emitters write.
std::string symbol_ident(std::string_view symbol);

/// Row-major strides of a dense shape.
std::vector<DimProduct> dense_strides(const Shape& s);

DimProduct multiply(const DimProduct& a, const DimProduct& b);
DimProduct add_constant_multiple(const DimProduct& base, const DimProduct& term, int64_t times);
DimProduct dim_as_product(const Dim& d);

}  // namespace lj
