// Matmul groups, prefill shapes, sm_80+: the mma.sync GEMM. The main loop is the lj_gemm template
// (templates/layerjit/gemm.cuh: cp.async multi-stage pipeline, swizzled shared memory, ldmatrix,
// mma.sync m16n8k16); this emitter specialises it on the tile config, the constant N and K, and the
// operands' alignment, and writes the parts that depend on the graph: row addressing of x and W
// (views, leading dims, the column order of SwiGLU and RoPE tiles). The epilogue is shared with the
// wgmma GEMM (emit_gemm_epilogue.cpp).
#include "codegen/emit_gemm.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts) {
  GemmKernel k(ctx, op, cfg, opts);
  SourceWriter& w = k.w;
  const Graph& g = ctx.graph();
  const char* cx = c_type(op.xt);
  emit_gemm_head(k, "gemm.cuh", "");
  w.comment(fmt::format("Config: {}. {}{}", cfg.str(),
                        k.async ? "Rows are 16-byte aligned: cp.async copies." : "Rows are not 16-byte aligned: element loads.",
                        k.q4 ? " W's codes by cp.async, dequantized into one W tile per k tile." : ""));
  w.line("typedef lj_gemm<{}, N, K, /*BM*/ {}, /*BN*/ {}, /*BK*/ {}, /*WM*/ {}, /*WN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, {}{}> Gemm;", cx,
         cfg.bm, cfg.bn, cfg.bk, cfg.warps_m, cfg.warps_n, cfg.stages, cfg.group_m, k.async ? "true" : "false",
         k.q4 ? fmt::format(", /*SPLIT*/ {}, Q", cfg.split_k) : k.split ? fmt::format(", /*SPLIT*/ {}", cfg.split_k) : "");
  w.blank();
  begin_gemm_body(k, 0, 128);
  emit_q4_weights(k);
  emit_cta_tile(k);
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
    } else if (k.pairs) {
      w.line("const lj_i64 j = v % BN, pr = v / BN * (BN / 2) + j % (BN / 2);  // the column's pair");
      w.line("const lj_i64 n = pr / HALF * D + pr % HALF + (j >= BN / 2 ? HALF : 0);");
    } else {
      w.line("const lj_i64 n = v;");
    }
    if (k.q4)
      w.line("return n;  // a row of the codes");
    else
      w.line("return {};", row_address(w, ctx, op.w, "n", "0", "wc"));
  }
  w.comment(print_node(g, op.node));
  w.line("Gemm::mainloop({}, {}, x_row, w_row, M, m0, n0, acc, reinterpret_cast<{}*>(lj_smem){});", k.px, k.q4 ? "wq" : k.pw, cx,
         k.split ? ", split" : "");
  emit_split_reduce(k);
  // The pipeline's ring is free again: the epilogue stages the tile there, and the RoPE tables
  // beside it where the target's shared memory allows.
  GemmStaging staging;
  staging.tile = fmt::format("reinterpret_cast<{}*>(lj_smem)", c_type(op.yt));
  staging.ring_bytes = opts.max_shared_bytes;
  emit_gemm_epilogue(k, staging);
  return finish_gemm(k);
}

}  // namespace lj
