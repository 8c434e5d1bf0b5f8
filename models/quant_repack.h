// The 4-bit checkpoint layouts people download, repacked once at bind time into the IR's: codes
// u4 [N, K] (two per byte, element 2j in the low nibble), scales [N, K / G] in the checkpoint's
// dtype, zero points u4 [N, K / G] (i8 where a row has an odd number of groups). Both source
// layouts store W transposed ([K, N] in nn.Linear's in/out terms) in int32 words of eight nibbles:
//   AutoAWQ (GEMM):  qweight [K, N / 8], word (k, c) holds columns 8c + (0, 2, 4, 6, 1, 3, 5, 7) in
//                    nibbles 0..7; qzeros [K / G, N / 8] the same way; scales [K / G, N].
//   GPTQ:            qweight [K / 8, N], word (r, n) holds rows 8r + 0..7 in nibbles 0..7; qzeros
//                    [K / G, N / 8] with columns 8c + 0..7 in nibbles 0..7, each stored minus one
//                    in the v1 format; scales [K / G, N]; g_idx [K] (k / G unless act-order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "layerjit/types.h"

namespace lj::models {

enum class QuantLayout { Awq, Gptq };

/// One projection's tensors as the checkpoint holds them (raw little-endian bytes) and its sizes.
struct QuantTensors {
  std::string name;                      ///< the projection's prefix ("model.layers.0.self_attn.q_proj"), for errors
  int64_t n = 0, k = 0, group = 0;       ///< output and input features; group 0: one per row
  /// The checkpoint's bytes (mapped, not copied); g_idx: GPTQ only, may be empty.
  std::span<const unsigned char> qweight, qzeros, scales, g_idx;
  DType scale_dtype = DType::F16;
  bool zeros_minus_one = false;          ///< GPTQ v1
};

struct RepackedWeight {
  std::vector<unsigned char> codes;   ///< u4 [n, k]
  std::vector<unsigned char> scales;  ///< [n, k / group] of scale_dtype
  std::vector<unsigned char> zeros;   ///< u4 [n, groups], or i8 when groups is odd
};

/// Throws UserError naming the projection when a zero point does not fit (GPTQ v1's stored 15 is a
/// zero point of 16) or g_idx is not k / group (act-order).
RepackedWeight repack(QuantLayout layout, const QuantTensors& t);

}  // namespace lj::models
