// The contract between a generated kernel and the code that launches it: its entry point, its
// parameter list (buffers, symbol values, scratch, tensor maps) and its launch rule. Codegen fills
// it (codegen/kernel.h's GeneratedKernel is one), the runtime packs arguments and launches from it,
// and nothing else about a kernel crosses that line: the runtime knows no fusion group or config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerjit/types.h"

namespace lj {

/// A 2-D view of a buffer's rows for TMA tile loads: `rows` rows of `cols` elements, `row_stride`
/// elements apart, starting `offset` elements into the buffer; loaded in boxes of box_rows x box_cols
/// elements with the 128-byte swizzle (`swizzle_bytes`: TMA's 16-byte chunks of each swizzle span
/// permuted by the row; 32 and 64 are encodable, no kernel emits them), or as dense box rows
/// (`swizzle_bytes` 0; 4-bit codes, whose map is over bytes). A box row is at most the swizzle span.
/// Emitted only where the host encoding is known to succeed (16-byte aligned start and stride).
struct TensorMapSpec {
  DimProduct rows;
  int64_t cols = 0, row_stride = 0, offset = 0;
  int box_rows = 0, box_cols = 0;
  int swizzle_bytes = 128;  ///< 0 (none), 32, 64 or 128
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

/// What launching a kernel needs to know about it.
struct KernelAbi {
  std::string name;  // the extern "C" entry point: lj_<graph>_g<id>_<kind>
  std::vector<KernelParam> params;
  LaunchRule launch;
};

/// Bytes of the kernel's scratch buffer for the symbol values in `b` (0: it has none).
int64_t scratch_bytes(const KernelAbi& k, const Bindings& b);

}  // namespace lj
