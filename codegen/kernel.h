// A generated kernel: its CUDA C++ source and the contract with the runtime — the parameter list
// (buffers, then symbol values) and the launch rule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/matmul_config.h"
#include "compiler/fusion/fusion_group.h"
#include "layerjit/graph.h"

namespace lj {

/// A 2-D view of a buffer's rows for TMA tile loads: `rows` rows of `cols` elements, `row_stride`
/// elements apart, starting `offset` elements into the buffer; loaded in boxes of box_rows x box_cols
/// elements with the 128-byte swizzle. Emitted only where the host encoding is known to succeed (16-byte
/// aligned start and stride).
struct TensorMapSpec {
  DimProduct rows;
  int64_t cols = 0, row_stride = 0, offset = 0;
  int box_rows = 0, box_cols = 0;
};

struct KernelParam {
  /// Scratch: device memory private to the kernel (no graph value), launch.blocks() * scratch_per_block
  /// bytes, zeroed when allocated; the kernel leaves it zeroed again where it relies on zeros (the
  /// split-KV attention's completion counters), so one allocation serves every launch.
  /// TensorMap: a CUtensorMap over `buffer`'s memory (`tmap`), encoded by the host at launch and
  /// passed by value (runtime/kernel_args.h).
  enum class Kind { Buffer, Symbol, Scratch, TensorMap };
  Kind kind = Kind::Buffer;
  std::string name;    // C++ parameter name in the source
  ValueId buffer = -1; // Buffer: the value owning the memory
  DType dtype = DType::F32;
  bool written = false;  // Buffer: the kernel stores to it
  bool read = false;     // Buffer: the kernel loads from it (both: an in-place cache update)
  std::string symbol;    // Symbol: which IR symbol (passed as int64)
  int64_t scratch_per_block = 0;  // Scratch: bytes per block of the launch
  TensorMapSpec tmap;             // TensorMap: the view of `buffer` it describes
};

/// grid.x = outer * ceil(work / per_block) * tiles_per_unit, block = threads, with `shared_bytes` of
/// dynamic shared memory. (A GEMM covers ceil(M / BM) row tiles times a constant count of column tiles;
/// attention covers B sequences times ceil(T / tokens per CTA) query tiles times the KV heads.)
struct LaunchRule {
  DimProduct outer;  // default: the constant 1
  DimProduct work;
  int64_t per_block = 1;
  int64_t tiles_per_unit = 1;
  int threads = 128;
  int shared_bytes = 0;
  /// A persistent kernel's cap (one CTA per SM; its CTAs stride over the tiles): grid.x is at most
  /// this. 0: no cap.
  int64_t max_blocks = 0;
  /// Worth launching early (programmatic dependent launch, sm_90+): its grid is many small CTAs, or
  /// few, so where they land does not matter; launched after another kernel of the call, its CTAs
  /// are resident and waiting in lj_pdl_begin when that kernel ends. Not for kernels sized to one
  /// even wave (attention, the tensor-core GEMMs): early CTAs land on the SMs that free first and
  /// unbalance them (docs/exec.md). Those launch after the previous kernel ends, as without PDL.
  bool early = false;

  /// grid.x for the symbol values in `b` (every symbol of `work` must be bound).
  int64_t blocks(const Bindings& b) const;
  /// "ceil(T / 128) * 48": the rule as text, for manifests and `inspect`.
  std::string str() const;
};

struct GeneratedKernel {
  int group = 0;
  std::string name;    // lj_<graph>_g<id>_<kind>: stable, so profilers show our names
  std::string source;  // complete translation unit for NVRTC
  std::vector<KernelParam> params;
  LaunchRule launch;
  /// The source uses arch-specific instructions (wgmma): it compiles only for sm_<EmitOptions::sm>a.
  bool arch_specific = false;
  /// The tunable choice it was generated with ("wgmma bm=128 bn=256 stages=4 gm=8", an attention
  /// tile "128x2x64x2"); empty for kernels without one.
  std::string config;
};

/// Tiles of the flash-attention prefill kernel. mma.sync (sm_80+): BM query rows per CTA, MT m-tiles
/// of 16 rows per warp (BM / (16 * MT) warps), BN keys per K/V tile, STAGES tiles in the cp.async
/// ring. wgmma (sm_90a, attention_wgmma.cuh): 128 query rows, BN keys per tile, STAGES in the TMA
/// ring (bm and mt unused).
///
/// decode (the split-KV kernel, one query token per sequence): BN keys per warp and stage, WARPS warps,
/// STAGES in the cp.async ring, CHUNK keys per CTA (0: the emitter's choice for the hinted batch and
/// cache length, about two CTAs per SM).
struct AttentionConfig {
  int bm = 128, mt = 2, bn = 64, stages = 2;
  bool wgmma = false;
  bool decode = false;
  int warps = 4, chunk = 0;
  /// "128x2x64x2" (bm x mt x bn x stages), "wgmma bn=128 stages=2", or "decode bn=16 warps=4 stages=3"
  /// (with " chunk=N" when set).
  std::string str() const;
  /// The decode kernel's default: 16 keys per warp and stage, 4 warps, 3 stages, chunk chosen.
  static AttentionConfig decode_default() { return AttentionConfig{128, 1, 16, 3, false, true, 4, 0}; }
  /// The Hopper default: 128 x 128 tiles, a double buffer (two stages of K and V: 160 KiB with Q).
  static AttentionConfig hopper() { return AttentionConfig{128, 1, 128, 2, true}; }
};
/// Parses str()'s form; nullopt with `error` set (what, and the expected form) otherwise. Whether the
/// tiles fit a group is the emitter's check.
std::optional<AttentionConfig> parse_attention_config(std::string_view text, std::string* error);
/// The decode kernel's tile sets the tuner and bench_attention --sweep try, the default first.
std::vector<AttentionConfig> decode_attention_candidates();

struct EmitOptions {
  int sm = 90;  // target architecture (80, 90, ...): specialises the source
  /// The target is the arch-specific variant (sm_90a): kernels may use wgmma and setmaxnreg, and must
  /// then be compiled for exactly that target.
  bool arch_specific = false;
  /// Symbol values the kernel is chosen for (a tuning bucket's representative): picks the default
  /// config, e.g. GEMV or tensor-core GEMM for a matmul over T rows. The kernel stays correct for any
  /// value; only its speed depends on the hint.
  Bindings hint;
  /// A matmul group's config (the autotuner's choice); unset: default_matmul_config.
  std::optional<MatmulConfig> matmul;
  /// An attention prefill kernel's tiles; unset: the default.
  std::optional<AttentionConfig> attention;
  /// Opt-in shared memory per block of the target device (limits GEMM tiles).
  int max_shared_bytes = 227 * 1024;
  /// SMs of the target device: a persistent kernel launches this many CTAs (correct for any count).
  int sm_count = 132;
};

/// Bytes of the kernel's scratch buffer for the symbol values in `b` (0: it has none).
int64_t scratch_bytes(const GeneratedKernel& k, const Bindings& b);

/// Emits the kernel of one group: elementwise, row_reduce, rope_kv_write, matmul (GEMV or tensor-core
/// GEMM) or attention (flash prefill or split-KV decode). Reduce and copy groups have no generator
/// yet: asking for one is a UserError naming the group.
GeneratedKernel emit_group(const Graph& g, const FusionGroup& grp, const EmitOptions& opts = {});

/// The matmul problem of a matmul group (M from the constant shape or the hint, 0 if unknown).
MatmulProblem matmul_problem(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);

/// Whether emit_group has an emitter for this kind.
bool has_emitter(GroupKind k);

}  // namespace lj
