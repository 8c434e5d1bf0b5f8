// The tunable choices of a matmul group's kernel: which family (decode GEMV or tensor-core GEMM) and
// its tile parameters. The autotuner enumerates these, the pruner rejects the ones that cannot work
// on a shape or a device before anything is compiled, and the tuning DB stores the winner as text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layerjit/types.h"

namespace lj {

struct MatmulConfig {
  /// Gemv: decode shapes. Mma: mma.sync tensor-core GEMM (sm_80+). Wgmma: the Hopper GEMM (sm_90a:
  /// TMA loads, warpgroup MMAs, a producer and two consumer warpgroups; bm = 128 and bk = 64 fixed,
  /// the k tile one 128-byte swizzle row: see k_tile()).
  enum class Family : uint8_t { Gemv, Mma, Wgmma };
  Family family = Family::Mma;
  // Mma: CTA tile bm x bn, k step bk, warps_m x warps_n warps, cp.async stages, raster group rows.
  int bm = 128, bn = 128, bk = 32, warps_m = 2, warps_n = 2, stages = 4, group_m = 8;
  // Gemv: rows of x per pass over W, loads of W in flight per lane, warps (columns) per CTA.
  int rows_per_pass = 4, loads_in_flight = 4, warps = 8;
  /// Gemv, fp8 x and W on sm_89+, i8 ones on sm_80+, or 16-bit x and W from 4-bit codes on sm_80+ (MatmulProblem::weight_codes;
  /// a k step is then 128 elements: 16 bytes of codes per lane): the tensor-core GEMV (templates/layerjit/gemv_mma.cuh). A CTA owns
  /// 16 rows of W (8 pairs of rows with SwiGLU or RoPE) and up to 8 rows of x per pass; its `warps`
  /// warps take equal shares of K, `loads_in_flight` 64-element k steps ahead per lane, and add
  /// their partial sums in shared memory in a fixed order. rows_per_pass is 8 (the mma's columns), or
  /// 16 on 4-bit codes (" mt=16": each dequantized A fragment meets two chunks of 8 x rows, so 9-16
  /// rows read the codes once). Printed "gemv mma".
  bool tensor_cores = false;
  /// Gemv mma: each warp stages its next `code_stages` k steps in a ring in shared memory through
  /// cp.async instead of loading `loads_in_flight` steps into registers (0: registers). On 4-bit
  /// codes the codes (a static ring; templates/layerjit/gemv_q4.cuh, lj_gemv_q4_share_staged); on fp8
  /// and i8, W and x (a dynamic ring of 1.5 KiB per step and warp; gemv_mma.cuh,
  /// lj_gemv_mma_steps_staged), and where W is a weight its first steps are copied before the wait
  /// on the previous kernel. Printed "stages=S" in place of "u=U".
  int code_stages = 0;
  /// Gemv mma, fp8 and i8 on sm_90+: the bulk-fed GEMV. The CTA's 16 W rows stream through a ring of
  /// `bulk_stages` stages of 1 KiB per row in dynamic shared memory, one bulk copy (TMA) per row and
  /// stage issued by one thread, a stage's warps waiting on its mbarrier once (gemv_mma.cuh,
  /// lj_gemv_bulk_pass); the first stages of a weight W go out before the wait on the previous
  /// kernel. `warps` divides the stage's 16 k steps. Printed "bulk=S" in place of "u=U" (0: none).
  int bulk_stages = 0;
  /// Wgmma: a persistent grid (one CTA per SM walking the tiles), the producer loading the next
  /// tile's stages while the consumers run the epilogue, which stages into shared memory of its own.
  bool persistent = false;
  /// Wgmma, 128-row tiles (not split-K or stream-K): CTAs per thread-block cluster, 1 or 2. Two CTAs of a cluster
  /// take row tiles m0 and m0 + 128 of one column tile in step and share its W tile by TMA multicast,
  /// each loading one half for both (gemm_wgmma.cuh, CLUSTER). Printed " cluster=2".
  int cluster = 1;
  /// Wgmma, persistent too: the two consumer warpgroups own whole 128 x bn tiles and take turns, one
  /// running its epilogue while the other's MMAs run (gemm_wgmma.cuh, PINGPONG).
  bool pingpong = false;
  /// Wgmma, persistent too: stream-K. The grid's CTAs take equal shares of all tiles' k tiles
  /// (tile after tile), so a share may start or end inside a tile; the CTAs sharing a tile add their
  /// fp32 partials in a fixed order and the last to finish runs the epilogue. For few tiles that do
  /// not divide among the SMs (M = 128: 96 tiles of 128 x 64 for 132 SMs). Printed " streamk".
  bool stream_k = false;
  /// Mma and Wgmma: split-K, the k tiles of each output tile divided among `split_k` CTAs (few output
  /// tiles: M = 128 gives 16-48 of 128 x 256 on the Llama shapes for 132 SMs). Each stores its fp32
  /// partial in scratch; the last to finish adds them up in a fixed order and runs the epilogue
  /// (templates/layerjit/split_k.cuh). Printed "sk=N".
  int split_k = 1;
  /// Wgmma on 4-bit codes, 256 x 128 tiles one per CTA: W dequantized into registers by the consumer
  /// warpgroups and the product transposed (y^T = W x^T, wgmma's RS form: gemm_wgmma.cuh, WREG), no
  /// W tile in shared memory and no dequantizing warps. Printed " wreg".
  bool wreg = false;

  /// "mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8", "wgmma bm=128 bn=256 stages=4 gm=8" (with
  /// " persistent", " pingpong" or " streamk" when set, " sk=N" for split-K), "gemv mt=4 u=4 warps=8" or "gemv mma u=4 warps=8": the tuning DB's text, and what `plan`/`tune`
  /// print.
  std::string str() const;
  int threads() const {
    return family == Family::Wgmma ? (bm == 64 ? 256 : 384) : 32 * (family == Family::Mma ? warps_m * warps_n : warps);
  }
  /// Elements of k per k tile: bk, except for the Wgmma family, whose k tile is one 128-byte row
  /// (64 bf16/f16 or 128 fp8 elements).
  int k_tile(int elem_bytes) const { return family == Family::Wgmma ? 128 / elem_bytes : bk; }
  /// Dynamic shared memory of the tensor-core families for `elem_bytes`-wide operands (0 for Gemv);
  /// a persistent wgmma kernel adds its epilogue tile of `out_bytes`-wide elements, staged_rows() of
  /// them (`max_shared`: the device's limit, 0 for none).
  int shared_bytes(int elem_bytes, int out_bytes = 2, bool weight_codes = false, int max_shared = 0) const;
  /// The rows of a persistent wgmma tile its epilogue stages at a time: bm, or for a ping-pong tile
  /// whose whole staging would take the ring past `max_shared` bytes (0: no limit), one m64 half
  /// after the other, so that the ring can keep a stage more (the i8 tile's f32 staging, 68 KiB,
  /// left room for 4 stages of 32 KiB; cuBLASLt's int8 kernel runs 7: docs/gemm.md).
  int staged_rows(int elem_bytes, int out_bytes, bool weight_codes, int max_shared) const;
  bool operator==(const MatmulConfig&) const = default;
};

/// The bulk-fed GEMV's ring (MatmulConfig::bulk_stages): bytes of each W row per stage, and the
/// dynamic shared memory of `stages` stages (16 rows padded by 16 bytes, and a barrier each), as
/// gemv_mma.cuh's lj_gemv_bulk_ring<S, kGemvBulkStageBytes> lays them out.
inline constexpr int64_t kGemvBulkStageBytes = 1024;
/// Dynamic shared memory of a `wreg` config (wgmma on 4-bit codes, W in registers): its ring of x
/// tiles and codes, the barriers, and the tile's bn W rows' scales and zero points at
/// `constant_row_bytes` a row.
int64_t wreg_shared_bytes(const MatmulConfig& c, int64_t constant_row_bytes);
inline constexpr int64_t gemv_bulk_ring_bytes(int stages) { return stages * (16 * (kGemvBulkStageBytes + 16) + 8); }

/// Parses str()'s text; nullopt with `error` set ("what, where, why") on anything else.
std::optional<MatmulConfig> parse_matmul_config(std::string_view text, std::string* error);

/// The problem a config is chosen for: M is the bound or expected row count (a symbol's bucket).
struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::BF16;  ///< the operands' dtype (f32 where they differ: only the GEMV mixes them)
  bool aligned = true;        ///< rows of x and W start 16-byte aligned (cp.async, vector loads)
  int sm = 90;
  bool arch_specific = false;  ///< sm_90a: the Wgmma family is available
  /// x's rows and W's rows are 2-D tensors TMA can load: one constant row stride, a constant start,
  /// both 16-byte aligned.
  bool tma = false;
  int max_shared_bytes = 227 * 1024;  ///< per block, opt-in (H100/H200: 227 KiB)
  int out_bytes = 2;                  ///< the matmul result's element size (the staged epilogue tile)
  int sm_count = 132;                 ///< SMs of the target (sizes split-K in the default config)
  /// RoPE in the epilogue with half-style pairs (d, d + D/2): D, which a tile's width must divide or
  /// be a multiple of so that each tile holds both columns of its pairs; 0 without.
  int64_t rope_pair_dim = 0;
  /// SwiGLU in the epilogue: a tensor-core tile pairs 8 gate and 8 up columns per 16 of each warp.
  bool glu = false;
  /// RoPE in the epilogue, any pairing (rope_pair_dim is set for the half style only).
  bool rope = false;
  /// One-row prologues the planner put in the group (FusionGroup::matmul.rms, .table): the rows' RMS
  /// factor computed from x, which only the SIMT GEMV does (its warps read whole rows of x), and the
  /// RoPE angles computed at each row's position, which only the GEMV families' epilogues do.
  bool rms_in_kernel = false, angles_in_kernel = false;
  /// An activation-quantize prologue (FusionGroup::matmul.x_quantize): the GEMVs make x's codes from
  /// its row in the kernel, one row at a time; the GEMMs do not.
  bool quantize_in_kernel = false;
  /// The rms_norm making x folded in (FusionGroup::matmul.x_norm without a quantize, 4-bit W at one
  /// row): only the tensor-core GEMV on codes does it, one chunk of 8 rows per pass.
  bool norm_in_kernel = false;
  /// A row tail (FusionGroup::matmul.tail_quantize): the GEMVs' last CTA normalises and quantizes
  /// the stored rows of `tail_row` elements in registers; 0: none.
  int64_t tail_row = 0;
  /// W is made from 4-bit codes by a weight prologue (FusionGroup::matmul.dequant): only the
  /// tensor-core GEMV reads codes ("gemv mma" with 16-bit x; templates/layerjit/gemv_q4.cuh). `dtype`
  /// is then x's and the dequantized W's 16-bit type.
  bool weight_codes = false;
  /// With weight_codes: bytes of one W row's scales and zero points (a tile's are staged in shared
  /// memory by some configs).
  int64_t code_constant_row_bytes = 0;
  /// Each row of x's sums is multiplied by a row scale (a folded norm, per-token scales).
  bool row_scaled = false;
};

/// Decode GEMV for M = 1, 16-row mma.sync tiles up to 32 rows (above 16 rows: one 64x64 tile over all
/// rows where the columns alone give 3 tiles per SM, split 4 ways along K where K >= N), 64x64 tiles up to 64 (up to 128 without
/// the Hopper GEMM), then the Hopper GEMM where the target has it — 128 x 256 tiles where they fill the
/// SMs, else 128 x 128 tiles split along K until they do — else 128x128 mma.sync tiles. mma.sync needs
/// bf16/f16/i8 operands; fp8 takes the tensor-core GEMV at M = 1 on sm_89+ ("gemv mma"), the Hopper GEMM
/// for M > 1 where the target has it, else the GEMV. i8 (W8A8) takes the mma.sync tiles of the 16-bit
/// dtypes with bk doubled (the same bytes per stage: m16n8k32 steps) and the Hopper GEMM as fp8 does.
MatmulConfig default_matmul_config(const MatmulProblem& p);

/// Empty if `c` can run `p` on the target; else why not (shared memory, registers, divisibility,
/// operand dtypes). Checked before any candidate is compiled.
std::string reject_reason(const MatmulConfig& c, const MatmulProblem& p);

/// Every config the autotuner tries for `p`, default first; `rejected` (optional) receives
/// "config: reason" for the ones the pruner removed.
std::vector<MatmulConfig> matmul_candidates(const MatmulProblem& p, std::vector<std::string>* rejected = nullptr);

}  // namespace lj
