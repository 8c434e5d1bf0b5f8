// The tensor-core GEMM kernels, written in parts: the head and the CTA's tile (emit_gemm.cpp), the
// family's main loop (emit_gemm_mma.cpp: mma.sync, cp.async ring; emit_gemm_wgmma.cpp: TMA,
// warpgroup MMAs, persistent, ping-pong and stream-K schedules), and the epilogue both share
// (emit_gemm_epilogue.cpp: the tile staged in shared memory, then 8 consecutive outputs per thread
// through the fused nodes, the RoPE stores or one vector store).
#pragma once

#include <optional>
#include <string>

#include "codegen/emit_matmul.h"

namespace lj {

/// What the parts of one GEMM kernel share: the group's operands and config, facts derived from
/// them, the kernel's parameters (registered in the constructor, in the order the kernels take
/// them) and the source being written. Built in place: the open scopes point at `w`.
struct GemmKernel {
  GemmKernel(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg, const EmitOptions& opts);
  GemmKernel(const GemmKernel&) = delete;
  GemmKernel& operator=(const GemmKernel&) = delete;

  KernelContext& ctx;
  const MatmulOperands& op;
  const MatmulConfig& cfg;
  const EmitOptions& opts;
  bool hopper = false;  ///< the wgmma family (sm_90a)
  bool rope = false;    ///< a RoPE epilogue stores segments of y as heads (op.segments), not one value
  /// Half-style rotation pairs columns d and d + D/2 of a head: a tile of whole heads holds both; a
  /// narrower tile takes BN/2 columns from each half of one head instead (pair columns: W rows and
  /// output columns permuted alike).
  bool pairs = false;
  /// cp.async moves 16-byte chunks: every row of x and W starts 16-byte aligned (K % 8 == 0 and
  /// aligned view offsets); otherwise element loads fill the same shared-memory layout.
  bool async = false;
  bool split = false;  ///< split-K
  /// W from 4-bit codes (op.dequant, gemm_q4.cuh): `pw` is then the codes, `tw` a map over their
  /// bytes, and the kernel builds `wq`, the lj_q4 of codes, scales and zero points, from `q4_init`.
  bool q4 = false;
  std::string q4_type, q4_init;
  ValueId stored = -1;  ///< the value the epilogue stores (y itself with RoPE)
  int kt = 0;           ///< elements of k per k tile
  /// SwiGLU: the tile's columns interleave 8 gate and 8 up rows of W per 16 (lj_gemm::for_each_glu).
  int64_t virtual_n = 0;
  /// The pipeline's buffers, which the epilogue reuses for the staged tile (a few configs need more
  /// for it); a persistent kernel's tile has its own (in shared_bytes).
  int pipeline_smem = 0;
  /// The epilogue tile's rows staged at a time: bm, or a ping-pong tile's m64 halves one after the
  /// other where the whole tile would not fit beside the ring (MatmulConfig::staged_rows).
  int staged_rows = 0;
  std::string px, pw, po;  ///< x, W and the output (none with RoPE)
  std::string tx, tw;      ///< wgmma: tensor maps of x's and W's rows (TMA)
  std::string scratch;     ///< split-K and stream-K partials
  SourceWriter w;
  std::optional<SourceWriter::Scope> body, tile_loop;  ///< the kernel's body; a persistent CTA's loop over tiles
  bool table_smem = false;  ///< the RoPE tables of the tile staged in shared memory (the epilogue's choice)
  int64_t table_end = 0;    ///< then: where they end, past the staged tile
};

/// The header comment, the includes (`main_header`, the family's template, and `extra_include`
/// if not empty) and the constants N, N_OUT, K (and D, HALF, BN for RoPE; the weight prologue's Q).
void emit_gemm_head(GemmKernel& k, const char* main_header, const std::string& extra_include);
/// Opens the kernel: signature (`min_blocks` CTAs per SM, 0 for none), the programmatic-launch wait,
/// the dynamic shared memory (aligned to `smem_align`) and M.
void begin_gemm_body(GemmKernel& k, int min_blocks, int smem_align);
/// With a weight prologue (k.q4): `const Q wq{...};`, the codes, scales and zero points.
void emit_q4_weights(GemmKernel& k);
/// A non-persistent CTA's output tile (m0, n0) and, with split-K, its share of the k tiles.
void emit_cta_tile(GemmKernel& k);
/// Split-K, after the main loop: the tile's partials in scratch (SPLIT per tile), then one completion
/// counter per tile; only the CTA that completes the tile goes on to the epilogue.
void emit_split_reduce(GemmKernel& k);

/// Where the family's stage() puts the rounded tile, and the room its epilogue may use.
struct GemmStaging {
  std::string tile;         ///< the staged tile's pointer (to y's dtype)
  std::string scaled_args;  ///< stage()'s arguments after the tile, with a row scale
  std::string args;         ///< and without
  int64_t ring_bytes = 0;   ///< shared memory the RoPE tables may take beside the staged tile
  std::string stage = "Gemm::stage";  ///< the family's stage() (a ping-pong half: Gemm::stage_half<H>)
  int rows = 0;             ///< the rows staged and stored (0: the whole tile, bm), from m0
  std::string row_scales;   ///< the row scales read before the main loop (empty: stage() reads them)
};
/// `lj_row_scale(r)`, a folded RMSNorm's factor of the tile's row r (0 past M), as a lambda over m0.
void emit_row_scale_lambda(GemmKernel& k);
/// The epilogue of the tile whose fp32 sums are `acc`: the rounded tile staged in shared memory,
/// then 8 consecutive outputs of a row per thread through the fused nodes (or RoPE) to memory.
void emit_gemm_epilogue(GemmKernel& k, const GemmStaging& staging);

/// Closes the kernel and describes its launch.
GeneratedKernel finish_gemm(GemmKernel& k);

}  // namespace lj
