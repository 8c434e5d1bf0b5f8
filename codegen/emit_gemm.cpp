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
  const std::string xn = g.value(op.x).name, wn = g.value(op.w).name, on = g.value(op.out).name;
  LJ_CHECK(op.xt == op.wt && (op.xt == DType::BF16 || op.xt == DType::F16), g.node(op.node).loc,
           "{}: the tensor-core GEMM multiplies bf16 or f16 operands of one dtype, got %{}: {} and %{}: {}", ctx.kernel_name(),
           xn, dtype_name(op.xt), wn, dtype_name(op.wt));
  LJ_CHECK(!op.glu || cfg.bn / cfg.warps_n % 16 == 0, g.node(op.node).loc,
           "{}: SwiGLU pairs gate and up tiles of 8 columns: config '{}' gives warps {} columns", ctx.kernel_name(), cfg.str(),
           cfg.bn / cfg.warps_n);
  const Shape& xs = g.value(op.x).type.shape;
  const Shape& os = g.value(op.out).type.shape;
  const DType ot = g.value(op.out).type.dtype;
  // cp.async moves 16-byte chunks: every row of x and W must start 16-byte aligned (K % 8 == 0 and
  // aligned view offsets); otherwise element loads fill the same shared-memory layout.
  const bool async = ctx.vector_width({op.x, op.w}, xs, 8) == 8;
  // Pairs of adjacent outputs (n even) are stored as one 2-element access where the rows allow it.
  const bool pair_store = ctx.vector_width({op.out}, os, 2) == 2;
  // SwiGLU: the tile's columns interleave 8 gate and 8 up rows of W per 16 (see lj_gemm::for_each_glu).
  const int64_t virtual_n = op.glu ? (op.n_out + 7) / 8 * 16 : op.n;

  ctx.add_group_params();
  const std::string px = ctx.buffer_param(op.x, false), pw = ctx.buffer_param(op.w, false), po = ctx.buffer_param(op.out, true);
  const char* tx = c_type(op.xt);
  const char* to = c_type(ot);

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/gemm.cuh\"");
  if (!op.epilogue.empty()) w.line("#include \"layerjit/math.cuh\"");
  w.blank();
  if (op.glu) {
    w.line("constexpr lj_i64 N_OUT = {};  // output columns: silu(gate) * up", op.n_out);
    w.line("constexpr lj_i64 N = {};  // tile columns: 8 gate, 8 up rows of %{} per 16", virtual_n, wn);
  } else {
    w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", op.n, wn);
    w.line("constexpr lj_i64 N_OUT = N;");
  }
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
      auto lam = w.scope("auto w_row = [&](lj_i64 v) -> lj_i64", "};");
      if (op.glu) {
        w.line("const lj_i64 c = (v >> 4) * 8 + (v & 7);  // output column");
        w.line("if (c >= N_OUT) return -1;");
        w.line("const lj_i64 n = c + ((v >> 3) & 1) * N_OUT;  // gate rows first, then up rows");
      } else {
        w.line("const lj_i64 n = v;");
      }
      w.line("return {};", row_address(w, ctx, op.w, "n", "0", "wc"));
    }
    w.comment(print_node(g, op.node));
    w.line("Gemm::mainloop({}, {}, x_row, w_row, M, m0, n0, acc, reinterpret_cast<{}*>(lj_smem));", px, pw, tx);
    w.comment(op.epilogue.empty() ? "Epilogue: each fp32 sum rounded to %" + on + "'s dtype once."
                                  : "Epilogue: the fused nodes per output element, in registers; only %" + on + " is stored.");
    const std::string head = op.glu ? "Gemm::for_each_glu(acc, M, m0, n0, N_OUT, [&](lj_i64 m, lj_i64 n, float g0, float g1, float u0, float u1)"
                                    : "Gemm::for_each_pair(acc, M, m0, n0, [&](lj_i64 m, lj_i64 n, float v0, float v1)";
    auto lam = w.scope(head, "});");
    const std::vector<std::string> acc0 = op.glu ? std::vector<std::string>{"g0", "u0"} : std::vector<std::string>{"v0"};
    const std::vector<std::string> acc1 = op.glu ? std::vector<std::string>{"g1", "u1"} : std::vector<std::string>{"v1"};
    emit_epilogue_element(w, ctx, op, "m", "n", acc0, "r0", "0");
    w.line("const lj_i64 at = {};", row_address(w, ctx, op.out, "m", "n", "yc"));
    {
      auto both = w.scope("if (n + 1 < N_OUT)");
      emit_epilogue_element(w, ctx, op, "m", "(n + 1)", acc1, "r1", "1");
      if (pair_store) {
        w.line("lj_pack<{}, 2> p;", to);
        w.line("p.v[0] = lj_from_float<{}>(r0);", to);
        w.line("p.v[1] = lj_from_float<{}>(r1);", to);
        w.line("*reinterpret_cast<lj_pack<{}, 2>*>({} + at) = p;", to, po);
      } else {
        w.line("{}[at] = lj_from_float<{}>(r0);", po, to);
        w.line("{}[{}] = lj_from_float<{}>(r1);", po, row_address(w, ctx, op.out, "m", "(n + 1)", "yd"), to);
      }
    }
    w.line("else {}[at] = lj_from_float<{}>(r0);", po, to);
  }

  GeneratedKernel k;
  k.group = ctx.group().id;
  k.name = ctx.kernel_name();
  k.source = w.str();
  k.params = ctx.params();
  k.launch.work = op.rows;
  k.launch.per_block = cfg.bm;
  k.launch.tiles_per_unit = (virtual_n + cfg.bn - 1) / cfg.bn;
  k.launch.threads = cfg.threads();
  k.launch.shared_bytes = cfg.shared_bytes(dtype_bytes(op.xt));
  return k;
}

}  // namespace lj
