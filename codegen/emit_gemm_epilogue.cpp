// The tensor-core GEMM's epilogue, shared by the mma.sync and wgmma kernels: the tile, rounded to
// y's dtype, staged in shared memory by the family's stage(); each thread then takes 8 consecutive
// outputs of a row, applies the fused nodes in registers (or rotates them for RoPE) and stores them.
#include <map>
#include <optional>

#include "codegen/emit_gemm.h"
#include "layerjit/text.h"

namespace lj {

void emit_row_scale_lambda(GemmKernel& k) {
  SourceWriter& w = k.w;
  // A folded RMSNorm: each row's sums times its factor, before the one rounding to y's dtype.
  const std::string sn = k.ctx.graph().value(k.op.row_scale).name;
  w.comment(fmt::format("Rows of the sums scaled by %{} (rows past M: 0, never stored).", sn));
  auto lam = w.scope("auto lj_row_scale = [&](int r) -> float", "};");
  w.line("const lj_i64 m = m0 + r;");
  w.line("if (m >= M) return 0.f;");
  w.line("return {};  // %{}", row_scale_expr(w, k.ctx, k.op, "m", "sc"), sn);
}

void emit_gemm_epilogue(GemmKernel& k, const GemmStaging& staging) {
  SourceWriter& w = k.w;
  KernelContext& ctx = k.ctx;
  const MatmulOperands& op = k.op;
  const MatmulConfig& cfg = k.cfg;
  const Graph& g = ctx.graph();
  const bool rope = k.rope, pairs = k.pairs;
  const std::string on = g.value(k.stored).name;
  const Shape& os = g.value(k.stored).type.shape;
  const char* to = c_type(g.value(k.stored).type.dtype);
  const std::string& po = k.po;
  const char* ty = c_type(op.yt);
  const int bn_out = op.glu ? cfg.bn / 2 : cfg.bn;
  const int rows = staging.rows > 0 ? staging.rows : cfg.bm;  // of the tile, from m0
  w.comment("Epilogue: the tile, rounded to %" + g.value(op.y).name + "'s dtype, staged in shared memory; each thread then takes");
  w.comment(op.epilogue.empty() ? "8 consecutive outputs of a row and stores them as one access."
                                : "8 consecutive outputs of a row, applies the fused nodes in registers and stores only %" + on + ".");
  const std::string& staged = staging.tile;
  if (op.row_scale >= 0 && !staging.row_scales.empty()) {
    w.line("{}(acc, {}{}, {});  // rows scaled by %{}", staging.stage, staged, staging.scaled_args, staging.row_scales,
           g.value(op.row_scale).name);
  } else if (op.row_scale >= 0) {
    emit_row_scale_lambda(k);
    w.line("{}(acc, {}{}, lj_row_scale);", staging.stage, staged, staging.scaled_args);
  } else {
    w.line("{}(acc, {}{});", staging.stage, staged, staging.args);
  }
  w.line("const {}* tile = {};", ty, staged);
  // RoPE: the cos/sin rows of the tile's BM rows go to shared memory beside the staged tile, each
  // element loaded once; read from L2 once per chunk instead, the epilogue's loads made the fused
  // QKV projection 38 us slower than the GEMM and RoPE kernels it replaced (T=4096, H200). Not in a
  // persistent kernel (its ring refills during the epilogue) or where the ring is too small.
  const int64_t half = op.rope_dim / 2;
  const int64_t staged_bytes = (int64_t{rows} * (cfg.bn + 8) * dtype_bytes(op.yt) + 127) / 128 * 128;  // 32-byte table reads
  const int64_t table_bytes = int64_t{rows} * half * 8;
  const int64_t ring_bytes = staging.ring_bytes;
  k.table_smem = rope && !cfg.persistent && staged_bytes + table_bytes <= ring_bytes;
  k.table_end = staged_bytes + table_bytes;
  if (k.table_smem) {
    const Shape& ts = g.value(op.cos).type.shape;
    const bool vec4 = half % 4 == 0 && ctx.vector_width({op.cos, op.sin}, ts, 4) == 4;
    w.comment("The cos/sin rows of the tile's rows, beside the staged tile: each loaded once.");
    w.line("float* lj_cos_t = reinterpret_cast<float*>(lj_smem + {});  // [{}][{}]", staged_bytes, rows, half);
    w.line("float* lj_sin_t = lj_cos_t + {};", int64_t{rows} * half);
    const int v = vec4 ? 4 : 1;
    const int64_t items = int64_t{rows} * half / v;
    const std::string cp = ctx.buffer_param(op.cos, false), sp = ctx.buffer_param(op.sin, false);
    const std::string ca = ctx.address(op.cos, ts, {"(m0 + r)", "f"}), sa = ctx.address(op.sin, ts, {"(m0 + r)", "f"});
    if (vec4) {
      // cp.async: every copy of the thread in flight at once and no registers held (loads into
      // registers first spilled in the wgmma kernel; one load-store trip at a time waited for L2
      // once per trip).
      {
        auto loop = w.scope(fmt::format("for (int i = Gemm::epi_thread(); i < {}; i += Gemm::EPI_THREADS)", items));
        w.line("const int r = i / {}, f = i % {} * 4;", half / 4, half / 4);
        w.line("const bool in = m0 + r < M;  // rows past M: zeros");
        w.line("lj_cp_async16(lj_cos_t + r * {} + f, in ? {} + {} : {}, in ? 16 : 0);", half, cp, ca, cp);
        w.line("lj_cp_async16(lj_sin_t + r * {} + f, in ? {} + {} : {}, in ? 16 : 0);", half, sp, sa, sp);
      }
      w.line("lj_cp_async_commit();");
      w.line("lj_cp_async_wait<0>();");
    } else {
      auto loop = w.scope(fmt::format("for (int i = Gemm::epi_thread(); i < {}; i += Gemm::EPI_THREADS)", items));
      w.line("const int r = i / {}, f = i % {} * {};", half / v, half / v, v);
      w.line("float c[{}] = {{}}, s[{}] = {{}};", v, v);
      w.line("if (m0 + r < M) lj_load<float, {}>({} + {}, c), lj_load<float, {}>({} + {}, s);", v, cp, ca, v, sp, sa);
      w.line("lj_store<float, {}>(lj_cos_t + r * {} + f, c);", v, half);
      w.line("lj_store<float, {}>(lj_sin_t + r * {} + f, s);", v, half);
    }
    w.line("Gemm::epi_sync();");
  }
  w.line("constexpr int CHUNKS = {} / 8;  // 8-column chunks per tile row of %{}", bn_out, on);
  if (op.glu)
    w.line("const lj_i64 n0_out = n0 / 2;  // 16 tile columns (8 gate, 8 up) per 8 outputs");
  else
    w.line("const lj_i64 n0_out = n0;");
  // Full 16-byte stores where every row of the output starts aligned and N_OUT % 8 == 0 (then a
  // chunk that starts inside the row ends inside it); else element stores up to N_OUT.
  const bool full = !rope && ctx.vector_width({op.out}, os, 8) == 8;
  // Epilogue operands that vary along the row (a residual, a bias) are read 8 at a time where
  // their rows allow 16-byte accesses too; the rest element by element in the loop below.
  std::vector<OperandRead> vec_reads;
  if (full)
    for (const OperandRead& rd : epilogue_reads(ctx, op))
      if (rd.axis < 0 && ctx.varies_innermost(rd.value, os) && ctx.vector_width({rd.value}, os, 8) == 8) vec_reads.push_back(rd);
  auto chunk_of = [&](const std::string& i) {
    w.line("const int row = {} / CHUNKS, cb = {} % CHUNKS;", i, i);
    if (pairs) {
      w.line("const lj_i64 pr = n0 / 2 + cb * 8 % (BN / 2);  // the chunk's first pair");
      w.line("const lj_i64 m = m0 + row, n = pr / HALF * D + pr % HALF + (cb * 8 >= BN / 2 ? HALF : 0);");
    } else {
      w.line("const lj_i64 m = m0 + row, n = n0_out + cb * 8;");
    }
  };
  // Those reads are issued 8 chunks at a time before any is used: one memory latency per 8 chunks
  // instead of one per chunk (the loop is not software-pipelined by the compiler, and a residual GEMM
  // spent ~13 us per tile waiting on its 16 chunks one by one). 8 raw packs are 32 registers; all 16
  // spilled under the 168-register cap of a 384-thread CTA (the wgmma consumers' 232 since
  // setmaxnreg takes effect).
  // In the GEMM with W in registers (wreg) the batches are walked from the thread's first chunk
  // (`i0`), not counted (`it0` up to ITERS): with NVRTC 13.0, an epilogue loop of constant trip count
  // there, batched or not, makes ptxas serialize the main loop's wgmmas (C7514; not with nvcc's PTX
  // of the same source), the thread-bounded one does not.
  const bool from_thread = cfg.wreg;
  std::map<OperandRead, std::string> raw;
  std::optional<SourceWriter::Scope> batches, loop;
  if (!vec_reads.empty()) {
    w.line("constexpr int ITERS = ({} * CHUNKS + Gemm::EPI_THREADS - 1) / Gemm::EPI_THREADS;  // chunks per thread", rows);
    // (A persistent kernel keeps its loop state live too: 4 chunks fit there, 8 spilled; 2 where a
    // half-staged tile keeps the other half's sums live.)
    const int batch = !cfg.persistent ? 8 : rows < cfg.bm ? 2 : 4;
    w.line("constexpr int BATCH = ITERS < {} ? ITERS : {};  // chunks whose operands are loaded together", batch, batch);
    batches.emplace(w.scope(from_thread ? fmt::format("for (int i0 = Gemm::epi_thread(); i0 < {} * CHUNKS; i0 += BATCH * Gemm::EPI_THREADS)", rows)
                                        : "for (int it0 = 0; it0 < ITERS; it0 += BATCH)"));
    const std::string chunk_index = from_thread ? "const int i = i0 + b * Gemm::EPI_THREADS;"
                                                : "const int i = Gemm::epi_thread() + (it0 + b) * Gemm::EPI_THREADS;";
    for (const OperandRead& rd : vec_reads) {
      raw[rd] = "pre_" + ident(g.value(rd.value).name);
      w.line("lj_pack<{}, 8> {}[BATCH];  // %{}, raw", c_type(g.value(rd.value).type.dtype), raw[rd], g.value(rd.value).name);
    }
    {
      w.line("#pragma unroll");
      auto pre = w.scope("for (int b = 0; b < BATCH; ++b)");
      w.line("{}", chunk_index);
      chunk_of("i");
      w.line("if ({}i >= {} * CHUNKS || m >= M || n >= N_OUT) continue;", from_thread ? "" : "it0 + b >= ITERS || ", rows);
      std::vector<std::string> coords = emit_coords(w, Shape(os.begin(), os.end() - 1), "m", "ec");
      coords.push_back("n");
      for (const OperandRead& rd : vec_reads)
        w.line("{}[b] = lj_load_raw<{}, 8>({} + {});", raw[rd], c_type(g.value(rd.value).type.dtype), ctx.buffer_param(rd.value, false),
               ctx.address(rd.value, os, coords));
    }
    w.line("#pragma unroll");
    loop.emplace(w.scope("for (int b = 0; b < BATCH; ++b)"));
    w.line("{}", chunk_index);
    chunk_of("i");
    w.line("if ({}i >= {} * CHUNKS) break;", from_thread ? "" : "it0 + b >= ITERS || ", rows);
  } else {
    loop.emplace(w.scope(fmt::format("for (int i = Gemm::epi_thread(); i < {} * CHUNKS; i += Gemm::EPI_THREADS)", rows)));
    chunk_of("i");
  }
  w.line("if (m >= M || n >= N_OUT) continue;");
  if (rope) {
    // Each thread's 8 columns and their 8 partners, both from the staged tile.
    w.line("float y[8], yp[8];");
    w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + cb * 8, y);", ty);
    if (op.rope_interleaved) {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < 8; ++j) yp[j] = y[j ^ 1];");
    } else if (pairs) {
      w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + (cb * 8 + BN / 2) % BN, yp);", ty);
    } else {
      w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + cb * 8 + (n % D < HALF ? HALF : -HALF), yp);", ty);
    }
    std::vector<ValueId> dests;
    for (const MatmulOperands::Segment& sg : op.segments)
      for (const auto* ds : {&sg.plain, &sg.rotated})
        for (const MatmulOperands::Dest& d : *ds) dests.push_back(d.value >= 0 ? d.value : g.node(d.cache_write).results[0]);
    if (op.col_scale >= 0) {
      // Each column's sum times its factor, rounded to the heads' dtype as the cast before the split.
      // The 8 columns' factors and their partners' are 8 consecutive ones each (n is a multiple of 8
      // and a run lies in one half of a head): two 32-byte loads where the factors are dense.
      const Shape& ss = g.value(op.col_scale).type.shape;
      const std::string partner = "(n + (n % D < HALF ? HALF : -HALF))";  // half style: the run of partners
      if (ctx.vector_width({op.col_scale}, ss, 8) == 8) {
        const std::string sp = ctx.buffer_param(op.col_scale, false);
        const char* ts = c_type(g.value(op.col_scale).type.dtype);
        // (Interleaved pairs lie in the same 8 columns: the partner's factor is cs[j ^ 1].)
        w.line("float cs[8]{};  // %{} at the 8 columns{}", op.rope_interleaved ? "" : ", csp[8]", g.value(op.col_scale).name,
               op.rope_interleaved ? "" : " and at their partners");
        w.line("lj_load<{}, 8>({} + {}, cs);", ts, sp, ctx.address(op.col_scale, ss, {"n"}));
        if (!op.rope_interleaved) w.line("lj_load<{}, 8>({} + {}, csp);", ts, sp, ctx.address(op.col_scale, ss, {partner}));
        w.line("#pragma unroll");
        auto j_loop = w.scope("for (int j = 0; j < 8; ++j)");
        w.line("y[j] = {};", rounded_expr(op.ct, "y[j] * cs[j]"));
        w.line("yp[j] = {};", rounded_expr(op.ct, op.rope_interleaved ? "yp[j] * cs[j ^ 1]" : "yp[j] * csp[j]"));
      } else {
        w.line("#pragma unroll");
        auto j_loop = w.scope("for (int j = 0; j < 8; ++j)");
        w.line("y[j] = {};", rounded_expr(op.ct, column_scaled(ctx, op, "y[j]", "(n + j)")));
        w.line("yp[j] = {};", rounded_expr(op.ct, column_scaled(ctx, op, "yp[j]", op.rope_interleaved ? "(n + (j ^ 1))" : "(" + partner + " + j)")));
      }
    }
    const Shape& hs = g.value(op.segments.front().heads).type.shape;
    emit_rope_stores(w, ctx, op, "m", "n", 8, "y", "yp", ctx.vector_width(dests, hs, 8) == 8, k.table_smem ? "row" : "");
  } else {
  std::vector<std::string> acc;
  if (op.glu) {
    w.line("float gate[8], up[8];");
    w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + cb * 16, gate);", ty);
    w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + cb * 16 + 8, up);", ty);
    acc = {"gate[j]", "up[j]"};
  } else {
    w.line("float y[8];");
    w.line("lj_load<{}, 8>(tile + row * Gemm::STAGE_LD + cb * 8, y);", ty);
    acc = {"y[j]"};
  }
  std::map<OperandRead, std::string> preloaded;
  for (const OperandRead& rd : vec_reads) {
    const std::string r = "v_" + ident(g.value(rd.value).name);
    w.line("float {}[8];  // %{}", r, g.value(rd.value).name);
    w.line("lj_unpack({}[b], {});", raw[rd], r);
    preloaded[rd] = r + "[j]";
  }
  w.line("float out[8];");
  {
    w.line("#pragma unroll");
    auto j_loop = w.scope("for (int j = 0; j < 8; ++j)");
    std::optional<SourceWriter::Scope> guard;
    if (!full) guard.emplace(w.scope("if (n + j < N_OUT)"));
    emit_epilogue_element(w, ctx, op, "m", "(n + j)", acc, "r", "", preloaded, /*acc_rounded=*/true);
    w.line("out[j] = r;");
  }
  if (full) {
    w.line("lj_store<{}, 8>({} + {}, out);", to, po, row_address(w, ctx, op.out, "m", "n", "yc"));
  } else {
    const std::string at = row_address(w, ctx, op.out, "m", "(n + j)", "yc");  // emits the row's coordinates first
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < 8; ++j)");
    w.line("  if (n + j < N_OUT) {}[{}] = lj_from_float<{}>(out[j]);", po, at, to);
  }
  }
}

}  // namespace lj
