// Matmul groups, prefill shapes: the tensor-core GEMM. The main loop is the lj_gemm template
// (templates/layerjit/gemm.cuh: cp.async multi-stage pipeline, swizzled shared memory, ldmatrix,
// mma.sync m16n8k16); this emitter specialises it on the tile config, the constant N and K, and the
// operands' alignment, and writes the parts that depend on the graph: row addressing of x, W and y
// (views, leading dims) and the epilogue that rounds each fp32 accumulator to y's dtype once.
#include <algorithm>
#include <map>
#include <optional>

#include "codegen/emit_matmul.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_gemm_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts) {
  const int sm_count = opts.sm_count;
  const Graph& g = ctx.graph();
  // A RoPE epilogue stores segments of y as heads (op.segments), not one value.
  const bool rope = !op.segments.empty();
  const ValueId stored = rope ? op.y : op.out;
  const std::string xn = g.value(op.x).name, wn = g.value(op.w).name, on = g.value(stored).name;
  const bool hopper = cfg.family == MatmulConfig::Family::Wgmma;
  const bool sixteen = op.xt == DType::BF16 || op.xt == DType::F16;
  LJ_CHECK(op.xt == op.wt && (sixteen || (hopper && is_fp8(op.xt))), g.node(op.node).loc,
           "{}: the tensor-core GEMM multiplies bf16 or f16 operands of one dtype (the Hopper GEMM also f8e4m3 or f8e5m2), got %{}: {} "
           "and %{}: {}",
           ctx.kernel_name(), xn, dtype_name(op.xt), wn, dtype_name(op.wt));
  const int kt = cfg.k_tile(dtype_bytes(op.xt));  // elements of k per k tile
  const Shape& xs = g.value(op.x).type.shape;
  const Shape& os = g.value(stored).type.shape;
  const DType ot = g.value(stored).type.dtype;
  // Half-style rotation pairs columns d and d + D/2 of a head: a tile of whole heads holds both; a
  // narrower tile takes BN/2 columns from each half of one head instead (pair columns: W rows and
  // output columns permuted alike).
  const bool pairs = rope && !op.rope_interleaved && cfg.bn % op.rope_dim != 0;
  bool table_smem = false;   // the RoPE tables of the tile staged in shared memory (below)
  int64_t table_end = 0;     // then: where they end, past the staged tile
  // cp.async moves 16-byte chunks: every row of x and W must start 16-byte aligned (K % 8 == 0 and
  // aligned view offsets); otherwise element loads fill the same shared-memory layout.
  const bool async = ctx.vector_width({op.x, op.w}, xs, 8) == 8;
  const bool split = cfg.split_k > 1;
  // SwiGLU: the tile's columns interleave 8 gate and 8 up rows of W per 16 (see lj_gemm::for_each_glu).
  const int64_t virtual_n = op.glu ? (op.n_out + 7) / 8 * 16 : op.n;

  ctx.add_group_params();
  const std::string px = ctx.buffer_param(op.x, false), pw = ctx.buffer_param(op.w, false), po = rope ? "" : ctx.buffer_param(op.out, true);
  std::string tx, tw;  // Hopper: tensor maps of x's and W's rows (TMA)
  if (hopper) {
    std::optional<TensorMapSpec> sx = tma_rows(ctx, op.x), sw = tma_rows(ctx, op.w);
    LJ_CHECK(sx && sw, g.node(op.node).loc, "{}: config '{}' loads x and W with TMA, which needs rows one 16-byte aligned stride apart",
             ctx.kernel_name(), cfg.str());
    sx->box_rows = cfg.bm, sx->box_cols = kt;
    sw->box_rows = cfg.bn / 2, sw->box_cols = kt;  // two boxes per tile: gate and up rows with SwiGLU
    tx = ctx.tensor_map_param(op.x, *sx);
    tw = ctx.tensor_map_param(op.w, *sw);
  }
  // Split-K: each CTA's fp32 partial (bm x bn) plus room for a completion counter per tile.
  // Stream-K: two fp32 partials per CTA (the first and the last tile its share touches) and a counter.
  const std::string scratch = split ? ctx.scratch_param(int64_t{cfg.bm} * cfg.bn * 4 + 4)
                              : cfg.stream_k ? ctx.scratch_param(2 * int64_t{cfg.bm} * cfg.bn * 4 + 4) : "";
  const char* cx = c_type(op.xt);
  const char* to = c_type(ot);

  // The pipeline's buffers, which the epilogue reuses for the staged tile (a few configs need more
  // for it); a persistent kernel's tile has its own (in shared_bytes).
  const int pipeline_smem = std::max(cfg.shared_bytes(dtype_bytes(op.xt), dtype_bytes(op.yt)), cfg.bm * (cfg.bn + 8) * dtype_bytes(op.yt));

  SourceWriter w;
  // Split-K, after the main loop: the tile's partials in scratch (SPLIT per tile), then one completion
  // counter per tile; only the CTA that completes the tile goes on to the epilogue.
  auto emit_split_reduce = [&] {
    if (!split) return;
    w.comment("Split-K: the tile's partials in scratch (SPLIT per tile), then one completion counter per tile.");
    w.line("float* part = reinterpret_cast<float*>({}) + (lj_i64)(blockIdx.x / Gemm::SPLIT) * Gemm::SPLIT * Gemm::PART_FLOATS;", scratch);
    w.line("unsigned* counter = reinterpret_cast<unsigned*>(reinterpret_cast<float*>({}) + (lj_i64)gridDim.x * Gemm::PART_FLOATS) +", scratch);
    w.line("                    blockIdx.x / Gemm::SPLIT;");
    w.line("if (!Gemm::split_reduce(acc, part, counter, split)) return;  // another CTA of the tile finishes it");
  };
  ctx.header_comment(w);
  w.line("#include \"layerjit/{}\"", hopper ? "gemm_wgmma.cuh" : "gemm.cuh");
  if (!op.epilogue.empty()) w.line("#include \"layerjit/math.cuh\"");
  if (rope && hopper) w.line("#include \"layerjit/mma.cuh\"  // cp.async of the RoPE tables");
  w.blank();
  if (op.glu) {
    w.line("constexpr lj_i64 N_OUT = {};  // output columns: silu(gate) * up", op.n_out);
    w.line("constexpr lj_i64 N = {};  // tile columns: 8 gate, 8 up rows of %{} per 16", virtual_n, wn);
  } else {
    w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", op.n, wn);
    w.line("constexpr lj_i64 N_OUT = N;");
  }
  w.line("constexpr lj_i64 K = {};  // reduction length", op.k);
  if (rope) {
    w.line("constexpr lj_i64 D = {}, HALF = {};  // RoPE: heads of D columns, {}", op.rope_dim, op.rope_dim / 2,
           op.rope_interleaved ? "pairs (2i, 2i + 1)" : "pairs (i, i + HALF)");
    if (pairs) w.line("constexpr lj_i64 BN = {};  // a tile: BN / 2 pairs, their first columns, then their second", cfg.bn);
  }
  if (hopper) {
    w.comment(fmt::format("Config: {}. TMA loads of x and W, wgmma from shared memory (sm_90a).", cfg.str()));
    // 64-row tiles name every parameter up to BM (they are never persistent, ping-pong or stream-K).
    w.line("typedef lj_wgmma_gemm<{}, N, K, /*BN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, /*GLU*/ {}{}{}{}> Gemm;", cx, cfg.bn, cfg.stages,
           cfg.group_m, op.glu ? "true" : "false", cfg.persistent ? ", /*PERSISTENT*/ true" : "",
           cfg.pingpong ? ", /*PINGPONG*/ true" : cfg.stream_k ? ", /*PINGPONG*/ false, /*SPLIT*/ 1, /*STREAM_K*/ true" : "",
           cfg.bm == 64 ? fmt::format(", /*PERSISTENT*/ false, /*PINGPONG*/ false, /*SPLIT*/ {}, /*STREAM_K*/ false, /*BM*/ 64", cfg.split_k)
           : cfg.split_k > 1 ? fmt::format(", /*PERSISTENT*/ false, /*PINGPONG*/ false, /*SPLIT*/ {}", cfg.split_k) : "");
  } else {
    w.comment(fmt::format("Config: {}. {}", cfg.str(),
                          async ? "Rows are 16-byte aligned: cp.async copies." : "Rows are not 16-byte aligned: element loads."));
    w.line("typedef lj_gemm<{}, N, K, /*BM*/ {}, /*BN*/ {}, /*BK*/ {}, /*WM*/ {}, /*WN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, {}{}> Gemm;",
           cx, cfg.bm, cfg.bn, cfg.bk, cfg.warps_m, cfg.warps_n, cfg.stages, cfg.group_m, async ? "true" : "false",
           split ? fmt::format(", /*SPLIT*/ {}", cfg.split_k) : "");
  }
  w.blank();
  {
    // setmaxnreg needs a register cap at entry: __launch_bounds__(threads, 1). 64-row Hopper tiles
    // skip it (gemm_wgmma.cuh) and, where two rings fit an SM's shared memory, ask for two CTAs per SM.
    const bool two_per_sm = hopper && cfg.bm == 64 && 2 * (pipeline_smem + 1024) <= opts.max_shared_bytes + 1024;
    auto fn = w.scope(ctx.signature(cfg.threads(), hopper ? (two_per_sm ? 2 : 1) : 0));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    w.line("extern __shared__ __align__({}) unsigned char lj_smem[];", hopper ? 1024 : 128);
    w.line("const lj_i64 M = {};  // rows of %{}", product_expr(op.rows), xn);
    // A persistent CTA walks the tiles: the producer thread loads each tile's k tiles and moves on,
    // the consumers multiply and run the epilogue (the body of the loop below) for each.
    std::optional<SourceWriter::Scope> tile_loop;
    if (cfg.persistent) {
      w.line("const Gemm::Role role = Gemm::begin(lj_smem);");
      w.line("if (role == Gemm::IDLE) return;  // the producer warpgroup but its one loading thread");
      w.line("if (role == Gemm::PRODUCER) lj_tma_prefetch(&{}), lj_tma_prefetch(&{});", tx, tw);
      w.line("Gemm::Pipe pipe;  // the ring position, carried from tile to tile");
      w.line("const lj_i64 n_tiles = Gemm::tiles(M);");
      if (cfg.stream_k) {
        w.line("const lj_i64 total = n_tiles * Gemm::K_TILES, grid = gridDim.x;  // stream-K: all k tiles, in tile order, in grid shares");
        w.line("const lj_i64 share_end = Gemm::share_begin(blockIdx.x + 1, total, grid);");
        tile_loop.emplace(w.scope("for (lj_i64 i = Gemm::share_begin(blockIdx.x, total, grid), j = 0; i < share_end; ++j)"));
        w.line("const lj_i64 t = i / Gemm::K_TILES;  // the share's j-th tile, k tiles [kt0, kt1) of it");
        w.line("const int kt0 = (int)(i - t * Gemm::K_TILES);");
        w.line("const int kt1 = share_end - t * Gemm::K_TILES < Gemm::K_TILES ? (int)(share_end - t * Gemm::K_TILES) : (int)Gemm::K_TILES;");
        w.line("i = t * Gemm::K_TILES + kt1;");
      } else {
        tile_loop.emplace(w.scope("for (lj_i64 t = blockIdx.x, j = 0; t < n_tiles; t += gridDim.x, ++j)"));  // t: the CTA's j-th tile
      }
      w.line("lj_i64 m0, n0;");
      w.line("Gemm::tile_at(t, M, m0, n0);");
    } else if (split) {
      w.line("const int split = blockIdx.x % Gemm::SPLIT;  // split-K: this CTA's share of the tile's k tiles");
      w.line("lj_i64 m0, n0;");
      w.line("Gemm::tile_at(blockIdx.x / Gemm::SPLIT, M, m0, n0);");
    } else {
      w.line("lj_i64 m0, n0;");
      w.line("Gemm::tile(M, m0, n0);");
    }
    if (hopper) {
      w.comment(print_node(g, op.node));
      if (op.glu)
        w.line("const lj_i64 b_lo = n0 / 2, b_hi = N_OUT + n0 / 2;  // W rows: gate and up of output columns n0 / 2 ..");
      else if (pairs)
        w.line("const lj_i64 b_lo = n0 / 2 / HALF * D + n0 / 2 % HALF, b_hi = b_lo + HALF;  // W rows: both columns of pairs n0 / 2 ..");
      else
        w.line("const lj_i64 b_lo = n0, b_hi = n0 + {};  // W rows: the tile's two halves", cfg.bn / 2);
      if (cfg.persistent) {
        {
          auto prod = w.scope("if (role == Gemm::PRODUCER)");
          w.line("Gemm::produce(&{}, &{}, m0, b_lo, b_hi, pipe, lj_smem{});", tx, tw, cfg.stream_k ? ", kt0, kt1" : "");
          w.line("continue;");
        }
        if (cfg.pingpong) {
          auto other = w.scope("if (!Gemm::mine(j))");  // the other consumer warpgroup's tile
          w.line("pipe.skip_tile();");
          w.line("continue;");
        }
        w.line("float acc[Gemm::MI][Gemm::ACC];");
        if (cfg.stream_k) {
          w.line("Gemm::consume(acc, pipe, lj_smem, j, i < share_end, kt0, kt1);");
          w.line("if (!Gemm::stream_fixup(acc, reinterpret_cast<float*>({}), t, kt0, kt1, total, grid)) continue;  // another owner finishes it",
                 scratch);
        } else {
          w.line("Gemm::consume(acc, pipe, lj_smem, j, t + gridDim.x < n_tiles);");
        }
      } else {
        w.line("float acc[Gemm::MI][Gemm::ACC];");
        w.line("if (!Gemm::mainloop(&{}, &{}, m0, b_lo, b_hi, acc, lj_smem{})) return;  // the producer warpgroup is done", tx, tw,
               split ? ", split" : "");
        emit_split_reduce();
      }
    } else {
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
        } else if (pairs) {
          w.line("const lj_i64 j = v % BN, pr = v / BN * (BN / 2) + j % (BN / 2);  // the column's pair");
          w.line("const lj_i64 n = pr / HALF * D + pr % HALF + (j >= BN / 2 ? HALF : 0);");
        } else {
          w.line("const lj_i64 n = v;");
        }
        w.line("return {};", row_address(w, ctx, op.w, "n", "0", "wc"));
      }
      w.comment(print_node(g, op.node));
      w.line("Gemm::mainloop({}, {}, x_row, w_row, M, m0, n0, acc, reinterpret_cast<{}*>(lj_smem){});", px, pw, cx, split ? ", split" : "");
      emit_split_reduce();
    }
    const char* ty = c_type(op.yt);
    const int bn_out = op.glu ? cfg.bn / 2 : cfg.bn;
    w.comment("Epilogue: the tile, rounded to %" + g.value(op.y).name + "'s dtype, staged in shared memory; each thread then takes");
    w.comment(op.epilogue.empty() ? "8 consecutive outputs of a row and stores them as one access."
                                  : "8 consecutive outputs of a row, applies the fused nodes in registers and stores only %" + on + ".");
    const std::string staged = hopper ? fmt::format("Gemm::staging<{}>(lj_smem)", ty) : fmt::format("reinterpret_cast<{}*>(lj_smem)", ty);
    if (op.row_scale >= 0) {
      // A folded RMSNorm: each row's sums times its factor, before the one rounding to y's dtype.
      const std::string sn = g.value(op.row_scale).name;
      w.comment(fmt::format("Rows of the sums scaled by %{} (rows past M: 0, never stored).", sn));
      {
        auto lam = w.scope("auto lj_row_scale = [&](int r) -> float", "};");
        w.line("const lj_i64 m = m0 + r;");
        w.line("if (m >= M) return 0.f;");
        w.line("return {};  // %{}", row_scale_expr(w, ctx, op, "m", "sc"), sn);
      }
      w.line("Gemm::stage(acc, {}{}, lj_row_scale);", staged, hopper ? (cfg.pingpong ? ", j" : ", 0") : "");
    } else {
      w.line("Gemm::stage(acc, {}{});", staged, cfg.pingpong ? ", j" : "");
    }
    w.line("const {}* tile = {};", ty, staged);
    // RoPE: the cos/sin rows of the tile's BM rows go to shared memory beside the staged tile, each
    // element loaded once; read from L2 once per chunk instead, the epilogue's loads made the fused
    // QKV projection 38 us slower than the GEMM and RoPE kernels it replaced (T=4096, H200). Not in a
    // persistent kernel (its ring refills during the epilogue) or where the ring is too small.
    const int64_t half = op.rope_dim / 2;
    const int64_t staged_bytes = (int64_t{cfg.bm} * (cfg.bn + 8) * dtype_bytes(op.yt) + 127) / 128 * 128;  // 32-byte table reads
    const int64_t table_bytes = int64_t{cfg.bm} * half * 8;
    const int64_t ring_bytes = hopper ? int64_t{cfg.stages} * (cfg.bm + cfg.bn) * 128 : opts.max_shared_bytes;
    table_smem = rope && !cfg.persistent && staged_bytes + table_bytes <= ring_bytes;
    table_end = staged_bytes + table_bytes;
    if (table_smem) {
      const Shape& ts = g.value(op.cos).type.shape;
      const bool vec4 = half % 4 == 0 && ctx.vector_width({op.cos, op.sin}, ts, 4) == 4;
      w.comment("The cos/sin rows of the tile's rows, beside the staged tile: each loaded once.");
      w.line("float* lj_cos_t = reinterpret_cast<float*>(lj_smem + {});  // [{}][{}]", staged_bytes, cfg.bm, half);
      w.line("float* lj_sin_t = lj_cos_t + {};", int64_t{cfg.bm} * half);
      const int v = vec4 ? 4 : 1;
      const int64_t items = int64_t{cfg.bm} * half / v;
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
    // spilled under the 168-register cap of a 384-thread CTA.
    std::map<OperandRead, std::string> raw;
    std::optional<SourceWriter::Scope> batches, loop;
    if (!vec_reads.empty()) {
      w.line("constexpr int ITERS = ({} * CHUNKS + Gemm::EPI_THREADS - 1) / Gemm::EPI_THREADS;  // chunks per thread", cfg.bm);
      // (A persistent kernel keeps its loop state live too: 2 chunks fit there, 4 spilled.)
      const int batch = cfg.persistent ? 2 : 8;
      w.line("constexpr int BATCH = ITERS < {} ? ITERS : {};  // chunks whose operands are loaded together", batch, batch);
      batches.emplace(w.scope("for (int it0 = 0; it0 < ITERS; it0 += BATCH)"));
      for (const OperandRead& rd : vec_reads) {
        raw[rd] = "pre_" + ident(g.value(rd.value).name);
        w.line("lj_pack<{}, 8> {}[BATCH];  // %{}, raw", c_type(g.value(rd.value).type.dtype), raw[rd], g.value(rd.value).name);
      }
      {
        w.line("#pragma unroll");
        auto pre = w.scope("for (int b = 0; b < BATCH; ++b)");
        w.line("const int i = Gemm::epi_thread() + (it0 + b) * Gemm::EPI_THREADS;");
        chunk_of("i");
        w.line("if (it0 + b >= ITERS || i >= {} * CHUNKS || m >= M || n >= N_OUT) continue;", cfg.bm);
        std::vector<std::string> coords = emit_coords(w, Shape(os.begin(), os.end() - 1), "m", "ec");
        coords.push_back("n");
        for (const OperandRead& rd : vec_reads)
          w.line("{}[b] = lj_load_raw<{}, 8>({} + {});", raw[rd], c_type(g.value(rd.value).type.dtype), ctx.buffer_param(rd.value, false),
                 ctx.address(rd.value, os, coords));
      }
      w.line("#pragma unroll");
      loop.emplace(w.scope("for (int b = 0; b < BATCH; ++b)"));
      w.line("const int i = Gemm::epi_thread() + (it0 + b) * Gemm::EPI_THREADS;");
      chunk_of("i");
      w.line("if (it0 + b >= ITERS || i >= {} * CHUNKS) break;", cfg.bm);
    } else {
      loop.emplace(w.scope(fmt::format("for (int i = Gemm::epi_thread(); i < {} * CHUNKS; i += Gemm::EPI_THREADS)", cfg.bm)));
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
      const Shape& hs = g.value(op.segments.front().heads).type.shape;
      emit_rope_stores(w, ctx, op, "m", "n", 8, "y", "yp", ctx.vector_width(dests, hs, 8) == 8, table_smem ? "row" : "");
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
      emit_epilogue_element(w, ctx, op, "m", "(n + j)", acc, "r", "", preloaded);
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
    if (cfg.pingpong) {  // after the chunk loops, at the end of the tile's body
      loop.reset();
      batches.reset();
      w.line("Gemm::epilogue_done(j, t + gridDim.x < n_tiles);");
    }
  }

  GeneratedKernel k;
  k.group = ctx.group().id;
  k.name = ctx.kernel_name();
  k.source = w.str();
  k.params = ctx.params();
  k.launch.work = op.rows;
  k.launch.per_block = cfg.bm;
  // Stream-K: a CTA per k tile at most (grid <= total, see share_begin), one per SM (max_blocks below).
  k.launch.tiles_per_unit = (virtual_n + cfg.bn - 1) / cfg.bn * (split ? cfg.split_k : cfg.stream_k ? (op.k + kt - 1) / kt : 1);
  k.launch.threads = cfg.threads();
  k.arch_specific = hopper;
  k.config = cfg.str();
  k.launch.shared_bytes = pipeline_smem;  // a persistent kernel launches one CTA per SM (below)
  if (table_smem)
    k.launch.shared_bytes = std::max(k.launch.shared_bytes, static_cast<int>(table_end));
  if (cfg.persistent) k.launch.max_blocks = sm_count;
  return k;
}

}  // namespace lj
