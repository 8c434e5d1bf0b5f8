// Matmul groups, decode shapes: y[m, n] = sum_k x[m, k] * w[n, k] as a GEMV family kernel that
// streams W once per pass. One warp owns one output column n (a row of W, [N, K] row-major) and
// reads it with V-wide loads along K (16 bytes where alignment is proven), U of them in flight per
// lane; the rows of x are few and read through L1/L2, which every warp of a CTA shares. Each lane
// keeps MT fp32 accumulators (MT rows of x per pass), the warp reduces them with lj_warp_sum and
// lane 0 rounds to the output dtype once. M is usually a run-time symbol (T or B): the kernel loops
// over chunks of MT rows, re-reading W once per chunk, so any M is correct but only small M (decode,
// M <= 16) is fast; large M belongs to the tensor-core (mma.sync) GEMM, which reads W once per tile
// of M instead. The main loop is the lj_gemv_pass template (templates/layerjit/gemv.cuh); this
// emitter specialises it and writes the row addressing and the epilogue.
#include <algorithm>
#include <optional>

#include "codegen/emit_matmul.h"
#include "layerjit/op_attrs.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_gemv(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg) {
  const Graph& g = ctx.graph();
  const ValueId x = op.x, wt = op.w;
  // SwiGLU: a warp owns output column n and reads both W rows behind it (gate n, up N + n).
  const int64_t N = op.n_out, K = op.k;
  // RoPE epilogue: a warp owns the two columns of a rotation pair (two rows of W, as with SwiGLU).
  const bool rope = !op.segments.empty();
  const bool two_rows = op.glu || rope;
  const int64_t units = rope ? N / 2 : N;  // warps' worth of work: columns, or pairs of them
  const Shape& xs = g.value(x).type.shape;
  const DType xt = op.xt, wdt = op.wt;
  const int widest = std::max(dtype_bytes(xt), dtype_bytes(wdt));
  // V: 16 bytes per load where every row of x and W starts aligned; a K that no width divides (or
  // a view at an odd offset) falls back to narrower loads, down to scalars.
  const int vec = ctx.vector_width({x, wt}, xs, 16 / widest);
  // U: loads of W in flight per lane (default: 4 16-byte loads, 64 bytes per lane, 16 KiB per CTA).
  const int unroll = cfg.loads_in_flight;
  const DimProduct& rows = op.rows;
  // MT: rows of x per pass over W (default 4: few enough accumulators for several CTAs per SM); a
  // constant M below that needs no more.
  // An activation-quantize prologue makes x's codes one row at a time (in shared memory): MT = 1.
  const bool xq = op.x_quantize >= 0;
  // A row tail needs every warp at its completion count: warps past N idle instead of returning.
  const bool all_warps = xq || op.tail_quantize >= 0;
  const int mt = xq ? 1 : rows.symbols.empty() ? static_cast<int>(std::clamp<int64_t>(rows.constant, 1, cfg.rows_per_pass)) : cfg.rows_per_pass;
  const int warps = static_cast<int>(std::min<int64_t>(cfg.warps, units));
  const int threads = warps * 32;
  const int64_t step = int64_t{32} * vec * unroll;  // elements of a row one warp reads per iteration

  ctx.add_group_params();
  const std::string tail_scratch = row_tail_scratch(ctx, op);
  const std::string px = xq ? "xq_s" : ctx.buffer_param(x, false), pw = ctx.buffer_param(wt, false), po = rope ? "" : ctx.buffer_param(op.out, true);
  const char* tx = c_type(xt);
  const char* tw = c_type(wdt);
  const std::string xn = g.value(x).name, wn = g.value(wt).name;

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/gemv.cuh\"");
  w.line("#include \"layerjit/reduce.cuh\"");
  if (!op.epilogue.empty()) w.line("#include \"layerjit/math.cuh\"");
  if (xq || op.tail_quantize >= 0) w.line("#include \"layerjit/quant.cuh\"");
  if (op.tail_quantize >= 0) w.line("#include \"layerjit/vec.cuh\"");
  if (op.epilogue.empty() && op.tail_quantize >= 0) w.line("#include \"layerjit/math.cuh\"");
  w.blank();
  if (op.table >= 0) emit_inv_freq_table(w, g, op.table);
  if (op.glu) {
    w.line("constexpr lj_i64 N = {};  // output columns: silu(gate) * up, gate rows [0, N) and up rows [N, 2N) of %{}", N, wn);
  } else if (rope) {
    w.line("constexpr lj_i64 N = {};  // columns of %{}: rows of %{}, taken in rotation pairs", N, g.value(op.y).name, wn);
    w.line("constexpr lj_i64 D = {}, HALF = {};  // RoPE: heads of D columns, {}", op.rope_dim, op.rope_dim / 2,
           op.rope_interleaved ? "pairs (2i, 2i + 1)" : "pairs (i, i + HALF)");
  } else
    w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", N, wn);
  w.line("constexpr lj_i64 K = {};  // reduction length{}", K,
         K % step != 0 ? fmt::format(" (a tail of {} past the last whole 32 V U elements)", K % step) : "");
  w.line("constexpr int MT = {};  // rows of %{} per pass over %{}: fp32 accumulators per lane", mt, xn, wn);
  w.line("constexpr int V = {};  // elements per load ({} bytes)", vec, vec * widest);
  w.line("constexpr int U = {};  // loads of %{} in flight per lane", unroll, wn);
  w.line("constexpr int WARPS = {};  // {} per CTA: one per warp", warps, rope ? "column pairs" : "columns");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(threads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    emit_trigger_dependents(w, ctx.group());
    w.comment(print_node(g, op.node));
    w.line("const int lane = threadIdx.x & 31;");
    if (rope) {
      w.line("const lj_i64 pr = (lj_i64)blockIdx.x * WARPS + (threadIdx.x >> 5);  // the warp's pair of columns");
      w.put(all_warps ? "const bool active = pr < N / 2;  // every warp takes part in the block reductions"
                      : "if (pr >= N / 2) return;  // a whole warp: the shuffles below never see an exited lane");
      if (op.rope_interleaved)
        w.line("const lj_i64 n = 2 * pr, n2 = n + 1;");
      else
        w.line("const lj_i64 n = pr / HALF * D + pr % HALF, n2 = n + HALF;");
    } else {
      w.line("const lj_i64 n = (lj_i64)blockIdx.x * WARPS + (threadIdx.x >> 5);");
      w.put(all_warps ? "const bool active = n < N;  // every warp takes part in the block reductions"
                      : "if (n >= N) return;  // a whole warp: the shuffles below never see an exited lane");
    }
    w.line("const lj_i64 M = {};  // rows of %{}", product_expr(rows), xn);
    // (An inactive warp's rows of W are never read: its pointers may point past them.)
    w.line("const {}* __restrict__ w_row = {} + {};", tw, pw, row_address(w, ctx, wt, all_warps ? "(active ? n : 0)" : "n", "0", "wc"));
    if (two_rows)
      w.line("const {}* __restrict__ w_up = {} + {};", tw, pw,
             row_address(w, ctx, wt, all_warps ? (rope ? "(active ? n2 : 0)" : "(N + (active ? n : 0))") : (rope ? "n2" : "(N + n)"), "0", "wu"));
    if (xq)
      w.comment("Rows of %" + xn + " one at a time, each quantized into shared memory first; %" + wn + " is streamed once per row.");
    else
      w.comment("Rows of %" + xn + " in chunks of MT; %" + wn + " is streamed once per chunk.");
    std::optional<SourceWriter::Scope> chunk;
    chunk.emplace(w.scope("for (lj_i64 m0 = 0; m0 < M; m0 += MT)"));
    std::optional<SourceWriter::Scope> active_scope;
    if (xq) {
      emit_x_quantize_prologue(w, ctx, op, threads, "m0");
      active_scope.emplace(w.scope("if (active)"));
      w.line("const int rows = 1;");
      w.line("const lj_i64 x_row[MT] = {{0}};  // the row's codes in xq_s");
    } else {
      if (all_warps) active_scope.emplace(w.scope("if (active)"));
      w.line("const int rows = M - m0 < MT ? (int)(M - m0) : MT;");
      w.line("lj_i64 x_row[MT];  // element offsets of the chunk's rows of %{}", xn);
      w.line("#pragma unroll");
      auto i_loop = w.scope("for (int i = 0; i < MT; ++i)");
      w.line("const lj_i64 m = m0 + (i < rows ? i : 0);  // rows past M are never read");
      w.line("x_row[i] = {};", row_address(w, ctx, x, "m", "0", "xc"));
    }
    {  // the pass and the epilogue (inside `if (active)` with the prologue)
      const bool rms = op.rms >= 0;  // the rows' RMS factor from the squares of the x read on the way
      const std::string accs = two_rows ? "float acc[MT], acc_up[MT]" : "float acc[MT]";
      w.put(rms ? accs + ", ss[MT];  // ss: each row's sum of squares of %" + xn : accs + ";");
      {
        auto sw = w.scope("switch (rows)");
        for (int r = 1; r <= mt; ++r) {
          const std::string pass = fmt::format("lj_gemv_pass<{}, {}, MT, V, U, K, {}>", tw, tx, r);
          const std::string first = rms ? fmt::format("lj_gemv_pass_sq<{}, {}, MT, V, U, K, {}>(w_row, {}, x_row, lane, acc, ss)", tw, tx, r, px)
                                        : fmt::format("{}(w_row, {}, x_row, lane, acc)", pass, px);
          if (two_rows)
            w.line("case {}: {}; {}(w_up, {}, x_row, lane, acc_up); break;", r, first, pass, px);
          else
            w.line("case {}: {}; break;", r, first);
        }
      }
      w.line("#pragma unroll");
      auto i_loop = w.scope("for (int i = 0; i < MT; ++i)");
      w.line("if (i >= rows) break;  // uniform across the warp");
      w.line("const lj_i64 m = m0 + i;");
      // A folded RMSNorm: the row's sums times its factor, before the one rounding.
      std::string rs = rms ? fmt::format("rsqrtf(lj_warp_sum(ss[i]) / (float)K + {}f)", attr::eps(g.node(op.rms).attrs))
                           : row_scale_expr(w, ctx, op, "m", "sc");
      if (rms) w.comment(print_node(g, op.rms) + ": from the row this warp read");
      if (!rs.empty()) {
        w.line("const float rs = {};  // %{}", rs, g.value(op.row_scale).name);
        rs = " * rs";
      }
      w.line("const float sum = lj_warp_sum(acc[i]){};", rs);
      if (two_rows) w.line("const float sum_up = lj_warp_sum(acc_up[i]){};", rs);
      auto store = w.scope("if (lane == 0)");
      emit_gemv_output(w, ctx, op, po);
    }
    if (xq) {
      active_scope.reset();
      w.line("__syncthreads();  // every warp is done with xq_s before the next row's codes");
    }
    active_scope.reset();
    chunk.reset();
    emit_row_tail(w, ctx, op, threads, tail_scratch);
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work.constant = units;
  k.launch.per_block = warps;
  k.launch.threads = threads;
  k.config = cfg.str();
  k.launch.early = true;  // a warp per column, many small CTAs: where they land does not matter
  return k;
}

}  // namespace lj
