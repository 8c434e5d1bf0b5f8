// Matmul groups, prefill shapes: the tensor-core GEMM. The main loop is the lj_gemm template
// (templates/layerjit/gemm.cuh: cp.async multi-stage pipeline, swizzled shared memory, ldmatrix,
// mma.sync m16n8k16); this emitter specialises it on the tile config, the constant N and K, and the
// operands' alignment, and writes the parts that depend on the graph: row addressing of x, W and y
// (views, leading dims) and the epilogue that rounds each fp32 accumulator to y's dtype once.
#include "codegen/emit_matmul.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg) {
  const Graph& g = ctx.graph();
  const std::string xn = g.value(op.x).name, wn = g.value(op.w).name, yn = g.value(op.y).name;
  LJ_CHECK(op.xt == op.wt && (op.xt == DType::BF16 || op.xt == DType::F16), g.node(op.node).loc,
           "{}: the tensor-core GEMM multiplies bf16 or f16 operands of one dtype, got %{}: {} and %{}: {}", ctx.kernel_name(),
           xn, dtype_name(op.xt), wn, dtype_name(op.wt));
  const Shape& xs = g.value(op.x).type.shape;
  const Shape& ys = g.value(op.y).type.shape;
  // cp.async moves 16-byte chunks: every row of x and W must start 16-byte aligned (K % 8 == 0 and
  // aligned view offsets); otherwise element loads fill the same shared-memory layout.
  const bool async = ctx.vector_width({op.x, op.w}, xs, 8) == 8;
  // Pairs of adjacent outputs (n even) are stored as one 2-element access where y's rows allow it.
  const bool pair_store = ctx.vector_width({op.y}, ys, 2) == 2;

  ctx.add_group_params();
  const std::string px = ctx.buffer_param(op.x, false), pw = ctx.buffer_param(op.w, false), py = ctx.buffer_param(op.y, true);
  const char* tx = c_type(op.xt);
  const char* ty = c_type(op.yt);

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/gemm.cuh\"");
  w.blank();
  w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", op.n, wn);
  w.line("constexpr lj_i64 K = {};  // reduction length", op.k);
  w.comment(fmt::format("Config: {}. {}", cfg.str(),
                        async ? "Rows are 16-byte aligned: cp.async copies." : "Rows are not 16-byte aligned: element loads."));
  w.line("typedef lj_gemm<{}, N, K, /*BM*/ {}, /*BN*/ {}, /*BK*/ {}, /*WM*/ {}, /*WN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, {}> Gemm;",
         tx, cfg.bm, cfg.bn, cfg.bk, cfg.warps_m, cfg.warps_n, cfg.stages, cfg.group_m, async ? "true" : "false");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(cfg.threads()));
    w.line("extern __shared__ __align__(128) unsigned char lj_smem[];");
    w.line("const lj_i64 M = {};  // rows of %{}", product_expr(op.rows), xn);
    w.line("lj_i64 m0, n0;");
    w.line("Gemm::tile(M, m0, n0);");
    w.line("float acc[Gemm::MI][Gemm::NI][4] = {{}};");
    {
      auto lam = w.scope("auto x_row = [&](lj_i64 m) -> lj_i64", "};");
      w.line("return {};", row_address(w, ctx, op.x, "m", "0", "xc"));
    }
    {
      auto lam = w.scope("auto w_row = [&](lj_i64 n) -> lj_i64", "};");
      w.line("return {};", row_address(w, ctx, op.w, "n", "0", "wc"));
    }
    w.comment(print_node(g, op.node));
    w.line("Gemm::mainloop({}, {}, x_row, w_row, M, m0, n0, acc, reinterpret_cast<{}*>(lj_smem));", px, pw, tx);
    w.comment("Epilogue: each fp32 sum rounded to %" + yn + "'s dtype once.");
    auto lam = w.scope("Gemm::for_each_pair(acc, M, m0, n0, [&](lj_i64 m, lj_i64 n, float v0, float v1)", "});");
    w.line("const lj_i64 at = {};", row_address(w, ctx, op.y, "m", "n", "yc"));
    if (pair_store) {
      w.line("if (n + 1 < N) {{");
      w.line("  lj_pack<{}, 2> p;", ty);
      w.line("  p.v[0] = lj_from_float<{}>(v0);", ty);
      w.line("  p.v[1] = lj_from_float<{}>(v1);", ty);
      w.line("  *reinterpret_cast<lj_pack<{}, 2>*>({} + at) = p;", ty, py);
      w.line("}} else {{");
      w.line("  {}[at] = lj_from_float<{}>(v0);", py, ty);
      w.line("}}");
    } else {
      w.line("{}[at] = lj_from_float<{}>(v0);", py, ty);
      const std::string next = row_address(w, ctx, op.y, "m", "(n + 1)", "yd");
      w.line("if (n + 1 < N) {}[{}] = lj_from_float<{}>(v1);", py, next, ty);
    }
  }

  GeneratedKernel k;
  k.group = ctx.group().id;
  k.name = ctx.kernel_name();
  k.source = w.str();
  k.params = ctx.params();
  k.launch.work = op.rows;
  k.launch.per_block = cfg.bm;
  k.launch.tiles_per_unit = (op.n + cfg.bn - 1) / cfg.bn;
  k.launch.threads = cfg.threads();
  k.launch.shared_bytes = cfg.shared_bytes(dtype_bytes(op.xt));
  return k;
}

}  // namespace lj
