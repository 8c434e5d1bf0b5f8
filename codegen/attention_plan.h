// The attention family's decisions for one group, made before any source is written: which kernel
// (the split-KV decode kernel, or flash prefill on wgmma or mma.sync), its config, threads, shared
// memory and grid, and, where no kernel implements the group or a given config does not fit it, why.
// The emitter writes what the plan says; the tuner and the JIT ask it what is valid, so nobody learns
// validity by emitting and catching an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/attention_config.h"
#include "codegen/kernel.h"

namespace lj {

struct AttentionPlan {
  /// Non-empty: the group cannot be emitted with these options, and why (the emitter's UserError
  /// text: the kernel, the node, the reason). The fields below are then partly unset.
  std::string reject;
  ValueId q = -1, k = -1, v = -1, out = -1;
  ValueId lse = -1;          ///< the log-sum-exp result, where the graph asks for it and something reads it
  ValueId cache_pos = -1;    ///< positions of the new tokens in the cache
  ValueId block_table = -1;  ///< paged: k and v are page pools
  bool batched = false;      ///< q is [B, T, H, D]
  Dim tokens;                ///< query tokens per sequence (T)
  DimProduct keys;           ///< keys per sequence: S, or pages x page of a paged cache
  int64_t hq = 0, hkv = 0, d = 0, group = 0;
  int64_t dp = 0;  ///< the kernel tile's head_dim: d rounded up to 16, 32, 64 or 128
  bool causal = false;
  int64_t window = 0;  ///< a sliding window of this many keys (0: none); the mma.sync kernels only
  double scale = 0;
  /// Decode: one 16-row tile holds every query row of a KV head (tokens x query heads per KV head):
  /// the split-KV kernel. Otherwise prefill.
  bool decode = false;
  int64_t rows = 0;  ///< decode: query rows per KV head
  /// The config the kernel is emitted with (a decode config with its chunk resolved).
  AttentionConfig config;
  bool hopper = false;  ///< the wgmma prefill kernel (sm_90a)
  std::string no_wgmma;  ///< why the Hopper kernel cannot run here (prefill), or "" where it can
  std::optional<TensorMapSpec> tq, tk, tv;  ///< Hopper: TMA views of q's, k's and v's rows
  int threads = 0, smem = 0;
  int64_t per_block = 0;  ///< tokens per CTA (prefill) or keys per CTA (decode)
  std::string flash;      ///< the device template instance
};

/// The plan of attention group `grp` under `opts` (opts.attention: a given config, else the default).
AttentionPlan plan_attention(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);

/// The decode kernel's tile sets the tuner and bench_attention --sweep-decode try, the default first.
std::vector<AttentionConfig> decode_attention_candidates();

/// The configs the tuner measures for the group (this file is the home of the attention tile lists):
/// the default first, then the other tile sets of its kernel (decode: decode_attention_candidates();
/// prefill: the mma.sync sets and, on sm_90a, the wgmma ones), each once. Those the plan rejects are
/// left out and listed in `pruned` as "config: why".
std::vector<AttentionConfig> attention_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& opts,
                                                  std::vector<std::string>* pruned);

}  // namespace lj
