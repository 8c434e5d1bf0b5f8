// Matmul groups: y[m, n] = sum_k x[m, k] * w[n, k]. Two kernel families share the group: the decode
// GEMV (emit_gemv.cpp; W streamed once per few rows of x, bound by HBM bandwidth when M is small) and
// the tensor-core GEMM (emit_gemm.cpp; W read once per BM-row tile, bound by the tensor cores when M is
// large). The config — the autotuner's choice, or the default for the expected M — picks one.
#include "codegen/emit_matmul.h"

#include <algorithm>

#include "codegen/emitters.h"

namespace lj {

namespace {

bool unit_inner_stride(const TensorLayout& l) {
  return !l.strides.empty() && l.strides.back().symbols.empty() && l.strides.back().constant == 1;
}

}  // namespace

std::string row_address(SourceWriter& w, const KernelContext& ctx, ValueId v, const std::string& row, const std::string& last,
                        const std::string& stem) {
  const Shape& s = ctx.graph().value(v).type.shape;
  const Shape lead(s.begin(), s.end() - 1);
  std::vector<std::string> coords = emit_coords(w, lead, row, stem);
  coords.push_back(last);
  std::string a = ctx.address(v, s, coords);
  // "row * 4096LL + 0" reads better without the zero term of the column coordinate.
  if (last == "0" && a.size() > 4 && a.compare(a.size() - 4, 4, " + 0") == 0) a.resize(a.size() - 4);
  return a;
}

MatmulOperands matmul_operands(const KernelContext& ctx) {
  const Graph& g = ctx.graph();
  const FusionGroup& grp = ctx.group();
  // Epilogue fusion into the matmul comes with the planner's GEMM patterns; until then a matmul
  // group is exactly one matmul node.
  if (grp.nodes.size() != 1 || g.node(grp.nodes[0]).kind != OpKind::Matmul) {
    throw UserError(fmt::format("{}: a matmul group with fused nodes has no kernel yet (epilogue fusion: issue 6)",
                                ctx.kernel_name()));
  }
  MatmulOperands op;
  op.node = grp.nodes[0];
  const Node& mm = g.node(op.node);
  op.x = mm.operands[0], op.w = mm.operands[1], op.y = mm.results[0];
  const Shape& xs = g.value(op.x).type.shape;
  const Shape& ws = g.value(op.w).type.shape;
  LJ_CHECK(ws[0].is_const() && ws[1].is_const(), mm.loc, "{}: the weight %{} must have constant dimensions, got {}",
           ctx.kernel_name(), g.value(op.w).name, g.value(op.w).type.str());
  op.n = ws[0].value(), op.k = ws[1].value();
  // Views of x are splits and reshapes, which keep the innermost stride 1; the loads rely on it.
  LJ_CHECK(unit_inner_stride(ctx.layout(op.x)) && unit_inner_stride(ctx.layout(op.w)), mm.loc,
           "{}: matmul kernels read rows of %{} and %{} contiguously; a view with a strided last axis needs a copy first",
           ctx.kernel_name(), g.value(op.x).name, g.value(op.w).name);
  op.rows = dim_product(Shape(xs.begin(), xs.end() - 1));
  op.xt = g.value(op.x).type.dtype, op.wt = g.value(op.w).type.dtype, op.yt = g.value(op.y).type.dtype;
  return op;
}

MatmulProblem matmul_problem(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const MatmulOperands op = matmul_operands(ctx);
  MatmulProblem p;
  p.n = op.n, p.k = op.k, p.sm = opts.sm, p.max_shared_bytes = opts.max_shared_bytes;
  p.m = op.rows.constant;
  for (const std::string& s : op.rows.symbols) {
    const std::optional<int64_t> v = opts.hint.get(s);
    p.m = v ? p.m * *v : 0;  // unknown: 0
    if (!v) break;
  }
  // The tensor-core path multiplies like dtypes; mixed operands take the GEMV family.
  p.dtype = op.xt == op.wt ? op.xt : DType::F32;
  const int widest = std::max(dtype_bytes(op.xt), dtype_bytes(op.wt));
  p.aligned = ctx.vector_width({op.x, op.w}, g.value(op.x).type.shape, 16 / widest) * widest == 16;
  return p;
}

GeneratedKernel emit_matmul(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const MatmulOperands op = matmul_operands(ctx);
  const MatmulProblem p = matmul_problem(g, grp, opts);
  const MatmulConfig cfg = opts.matmul ? *opts.matmul : default_matmul_config(p);
  if (std::string why = reject_reason(cfg, p); !why.empty()) {
    throw UserError(fmt::format("{}: config '{}' cannot run this matmul ([M, {}] x [{}, {}]^T, {}): {}", ctx.kernel_name(),
                                cfg.str(), p.k, p.n, p.k, dtype_name(p.dtype), why));
  }
  return cfg.family == MatmulConfig::Family::Gemv ? emit_gemv(ctx, op, cfg) : emit_gemm_mma(ctx, op, cfg);
}

}  // namespace lj
