// Matmul groups, prefill shapes, sm_90a: the Hopper GEMM. The main loop is the lj_wgmma_gemm
// template (templates/layerjit/gemm_wgmma.cuh: TMA loads of x and W into a ring of stages, a
// producer warpgroup and one or two consumer warpgroups issuing wgmma from shared memory); this
// emitter specialises it on the tile config and the constant N and K, names the W rows of each tile
// (the column order of SwiGLU and RoPE tiles), and writes the schedule the config asks for: one tile
// per CTA, split-K, or a persistent grid walking the tiles (ping-pong consumers, or stream-K shares
// of all k tiles). The epilogue is shared with the mma.sync GEMM (emit_gemm_epilogue.cpp).
#include <optional>

#include "codegen/emit_gemm.h"
#include "layerjit/text.h"

namespace lj {

namespace {

// A persistent CTA walks the tiles: the producer thread loads each tile's k tiles and moves on, the
// consumers multiply and run the epilogue (the loop's body) for each. The two roles walk them in
// loops of their own, so that no code joins them after setmaxnreg (gemm_wgmma.cuh,
// producer_registers): this writes what both loops use.
void emit_tile_preamble(GemmKernel& k) {
  SourceWriter& w = k.w;
  w.line("const Gemm::Role role = Gemm::begin(lj_smem);");
  w.line("Gemm::Pipe pipe;  // the ring position, carried from tile to tile");
  w.line("const lj_i64 n_tiles = Gemm::tiles(M);");
  if (k.cfg.stream_k) {
    w.line("const lj_i64 total = n_tiles * Gemm::K_TILES, grid = gridDim.x;  // stream-K: all k tiles, in tile order, in grid shares");
    w.line("const lj_i64 share_end = Gemm::share_begin(blockIdx.x + 1, total, grid);");
  } else if (k.cfg.cluster > 1) {
    w.line("const lj_i64 t0 = blockIdx.x / Gemm::CLUSTER, stride = gridDim.x / Gemm::CLUSTER;  // this cluster, and how many");
  }
}

// The loop over the CTA's tiles (t, the j-th; stream-K: k tiles [kt0, kt1) of it), up to m0 and n0.
SourceWriter::Scope open_tile_loop(GemmKernel& k) {
  SourceWriter& w = k.w;
  std::optional<SourceWriter::Scope> loop;
  if (k.cfg.stream_k) {
    loop.emplace(w.scope("for (lj_i64 i = Gemm::share_begin(blockIdx.x, total, grid), j = 0; i < share_end; ++j)"));
    w.line("const lj_i64 t = i / Gemm::K_TILES;  // the share's j-th tile, k tiles [kt0, kt1) of it");
    w.line("const int kt0 = (int)(i - t * Gemm::K_TILES);");
    w.line("const int kt1 = share_end - t * Gemm::K_TILES < Gemm::K_TILES ? (int)(share_end - t * Gemm::K_TILES) : (int)Gemm::K_TILES;");
    w.line("i = t * Gemm::K_TILES + kt1;");
  } else if (k.cfg.cluster > 1) {  // t: the cluster's j-th pair of tiles, taken by both CTAs in step
    loop.emplace(w.scope("for (lj_i64 t = t0, j = 0; t < n_tiles; t += stride, ++j)"));
  } else {
    loop.emplace(w.scope("for (lj_i64 t = blockIdx.x, j = 0; t < n_tiles; t += gridDim.x, ++j)"));  // t: the CTA's j-th tile
  }
  w.line("lj_i64 m0, n0;");
  w.line("Gemm::tile_at(t, M, m0, n0);");
  return std::move(*loop);
}

// The W rows of the tile's two halves (b_lo, b_hi).
void emit_w_rows(GemmKernel& k) {
  SourceWriter& w = k.w;
  if (k.op.glu)
    w.line("const lj_i64 b_lo = n0 / 2, b_hi = N_OUT + n0 / 2;  // W rows: gate and up of output columns n0 / 2 ..");
  else if (k.pairs)
    w.line("const lj_i64 b_lo = n0 / 2 / HALF * D + n0 / 2 % HALF, b_hi = b_lo + HALF;  // W rows: both columns of pairs n0 / 2 ..");
  else
    w.line("const lj_i64 b_lo = n0, b_hi = n0 + {};  // W rows: the tile's two halves", k.cfg.bn / 2);
}

// The persistent producer warpgroup: its register budget, then its walk over the tiles (the
// producer thread's loads; with 4-bit codes warps 1-3 dequantize), then its exit.
void emit_producer_loop(GemmKernel& k) {
  SourceWriter& w = k.w;
  const MatmulConfig& cfg = k.cfg;
  auto producer = w.scope("if (role != Gemm::CONSUMER)");
  w.line("Gemm::producer_registers();");
  w.line("if (role == Gemm::IDLE) return;  // the producer warpgroup but its one loading thread{}", k.q4 ? " and the dequantizing warps" : "");
  w.line("if (role == Gemm::PRODUCER) lj_tma_prefetch(&{}), lj_tma_prefetch(&{});", k.tx, k.tw);
  {
    auto loop = open_tile_loop(k);
    emit_w_rows(k);
    const std::string kts = cfg.stream_k ? ", kt0, kt1" : "";
    if (k.q4)
      w.line("if (role == Gemm::TRANSFORM) Gemm::transform(wq, b_lo, b_hi, pipe, lj_smem{});", kts);
    w.line("{}Gemm::produce(&{}, &{}, m0, b_lo, b_hi, pipe, lj_smem{});", k.q4 ? "else " : "", k.tx, k.tw, kts);
  }
  if (cfg.cluster > 1) w.line("Gemm::producer_tail(pipe, lj_smem);  // the peer's last releases");
  w.line("return;");
}

// A folded RMSNorm's (or a per-token quantization's) row scales of the consumer thread's rows,
// read before its main loop: their global loads (one per row) wait under the MMAs instead of after
// them, where each tile's epilogue waited on them before staging. Not in the i8 kernels, whose s32
// sums and f32 epilogue tile leave no room for them (ptxas spilled 24 more bytes there).
bool row_scales_first(const GemmKernel& k) { return k.op.row_scale >= 0 && k.op.xt != DType::I8; }
void emit_row_scale_preload(GemmKernel& k) {
  if (!row_scales_first(k)) return;
  emit_row_scale_lambda(k);
  k.w.line("const Gemm::RowScales lj_rs = Gemm::row_scales(lj_row_scale);  // read before the main loop");
}

}  // namespace

GeneratedKernel emit_gemm_wgmma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts) {
  GemmKernel k(ctx, op, cfg, opts);
  SourceWriter& w = k.w;
  const Graph& g = ctx.graph();
  emit_gemm_head(k, "gemm_wgmma.cuh", k.rope ? "#include \"layerjit/mma.cuh\"  // cp.async of the RoPE tables" : "");
  w.comment(cfg.wreg ? fmt::format("Config: {}. TMA loads of x and W's codes; W dequantized into registers, y^T = W x^T (wgmma with A "
                                    "from registers, sm_90a).",
                                    cfg.str())
                      : fmt::format("Config: {}. TMA loads of x and W{}, wgmma from shared memory (sm_90a).", cfg.str(),
                                    k.q4 ? "'s codes, dequantized into the W tile by warps 1-3" : ""));
  // 64- and 256-row tiles name every parameter up to BM (they are never persistent, ping-pong or stream-K).
  if (k.q4)  // every parameter up to the weight prologue's Q
    w.line("typedef lj_wgmma_gemm<{}, N, K, /*BN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, /*GLU*/ {}, /*PERSISTENT*/ {}, /*PINGPONG*/ {}, "
           "/*SPLIT*/ {}, /*STREAM_K*/ {}, /*BM*/ {}, Q{}> Gemm;",
           c_type(op.xt), cfg.bn, cfg.stages, cfg.group_m, op.glu, cfg.persistent, cfg.pingpong, cfg.split_k, cfg.stream_k, cfg.bm,
           cfg.wreg ? ", /*CLUSTER*/ 1, /*WREG*/ true" : "");
  else if (cfg.cluster > 1)  // every parameter up to CLUSTER
    w.line("typedef lj_wgmma_gemm<{}, N, K, /*BN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, /*GLU*/ {}, /*PERSISTENT*/ {}, /*PINGPONG*/ {}, "
           "/*SPLIT*/ 1, /*STREAM_K*/ false, /*BM*/ 128, lj_no_q4, /*CLUSTER*/ {}> Gemm;",
           c_type(op.xt), cfg.bn, cfg.stages, cfg.group_m, op.glu, cfg.persistent, cfg.pingpong, cfg.cluster);
  else
    w.line("typedef lj_wgmma_gemm<{}, N, K, /*BN*/ {}, /*STAGES*/ {}, /*GROUP_M*/ {}, /*GLU*/ {}{}{}{}> Gemm;", c_type(op.xt), cfg.bn,
           cfg.stages, cfg.group_m, op.glu ? "true" : "false", cfg.persistent ? ", /*PERSISTENT*/ true" : "",
           cfg.pingpong ? ", /*PINGPONG*/ true" : cfg.stream_k ? ", /*PINGPONG*/ false, /*SPLIT*/ 1, /*STREAM_K*/ true" : "",
           cfg.bm != 128 ? fmt::format(", /*PERSISTENT*/ false, /*PINGPONG*/ false, /*SPLIT*/ {}, /*STREAM_K*/ false, /*BM*/ {}", cfg.split_k, cfg.bm)
           : cfg.split_k > 1 ? fmt::format(", /*PERSISTENT*/ false, /*PINGPONG*/ false, /*SPLIT*/ {}", cfg.split_k) : "");
  w.blank();
  // setmaxnreg needs a register cap at entry: __launch_bounds__(threads, 1). 64-row tiles skip it
  // (gemm_wgmma.cuh) and, where two rings fit an SM's shared memory, ask for two CTAs per SM.
  const bool two_per_sm = cfg.bm == 64 && 2 * (k.pipeline_smem + 1024) <= opts.max_shared_bytes + 1024;
  begin_gemm_body(k, two_per_sm ? 2 : 1, 1024);
  emit_q4_weights(k);
  if (cfg.persistent) {
    emit_tile_preamble(k);
    emit_producer_loop(k);
    w.line("Gemm::consumer_registers();");
    k.tile_loop.emplace(open_tile_loop(k));
  } else {
    emit_cta_tile(k);
  }
  w.comment(print_node(g, op.node));
  if (cfg.persistent) {  // (the W rows are the producer's)
    if (cfg.pingpong) {
      auto other = w.scope("if (!Gemm::mine(j))");  // the other consumer warpgroup's tile
      w.line("pipe.skip_tile();");
      w.line("continue;");
    }
    emit_row_scale_preload(k);
    w.line("float acc[Gemm::MI][Gemm::ACC];");
    if (cfg.stream_k) {
      w.line("Gemm::consume(acc, pipe, lj_smem, j, i < share_end, kt0, kt1);");
      w.line("if (!Gemm::stream_fixup(acc, reinterpret_cast<float*>({}), t, kt0, kt1, total, grid)) continue;  // another owner finishes it",
             k.scratch);
    } else {
      w.line("Gemm::consume(acc, pipe, lj_smem, j, t + {} < n_tiles);", cfg.cluster > 1 ? "stride" : "gridDim.x");
    }
  } else {
    emit_w_rows(k);
    emit_row_scale_preload(k);
    w.line("float acc[Gemm::MI][Gemm::ACC];");
    w.line("if (!Gemm::mainloop(&{}, &{}, m0, b_lo, b_hi, acc, lj_smem{})) return;  // the producer warpgroup is done", k.tx, k.tw,
           k.q4 ? (k.split ? ", split, wq" : ", 0, wq") : k.split ? ", split" : "");
    emit_split_reduce(k);
  }
  // The tile is staged in shared memory of its own (staging()); a ping-pong consumer stages in its
  // half (its tile's turn j). The RoPE tables fit beside it where the ring's stages leave room.
  GemmStaging staging;
  staging.tile = fmt::format("Gemm::staging<{}>(lj_smem)", c_type(op.yt));
  staging.scaled_args = cfg.pingpong ? ", j" : ", 0";
  staging.args = cfg.pingpong ? ", j" : "";
  staging.ring_bytes = int64_t{cfg.stages} * (cfg.bm * 128 + (cfg.wreg ? cfg.bn * 32 : cfg.bn * 128));
  if (row_scales_first(k)) staging.row_scales = "lj_rs";
  if (k.staged_rows == cfg.bm) {
    emit_gemm_epilogue(k, staging);
  } else {
    // A ping-pong tile whose whole staging does not fit beside its ring: each m64 half is staged
    // and stored in turn (m0 of the half shadows the tile's).
    w.line("const lj_i64 lj_m0_tile = m0;");
    staging.rows = k.staged_rows;
    for (int h = 0; h < cfg.bm / k.staged_rows; ++h) {
      auto half = w.scope("");
      w.line("const lj_i64 m0 = lj_m0_tile + {};  // rows {}..{} of the tile", h * k.staged_rows, h * k.staged_rows,
             (h + 1) * k.staged_rows - 1);
      staging.stage = fmt::format("Gemm::stage_half<{}>", h);
      emit_gemm_epilogue(k, staging);
    }
  }
  if (cfg.pingpong) w.line("Gemm::epilogue_done(j, t + {} < n_tiles);", cfg.cluster > 1 ? "stride" : "gridDim.x");  // at the end of the tile's body
  return finish_gemm(k);
}

}  // namespace lj
