// The attention family's tunable choice: the tiles of the flash-attention prefill kernels and of the
// split-KV decode kernel, as the tuner, the tuning DB and `inspect --config` name them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lj {

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
  bool operator==(const AttentionConfig&) const = default;
};
/// Parses str()'s form; nullopt with `error` set (what, and the expected form) otherwise. Whether the
/// tiles fit a group is the emitter's check.
std::optional<AttentionConfig> parse_attention_config(std::string_view text, std::string* error);

}  // namespace lj
