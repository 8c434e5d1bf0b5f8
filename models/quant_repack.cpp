// Repacking AutoAWQ and GPTQ tensors into the IR's layout (quant_repack.h has the layouts).
#include "models/quant_repack.h"

#include <cstring>

#include <fmt/format.h>

#include "layerjit/check.h"
#include "layerjit/error.h"

namespace lj::models {

namespace {

uint32_t word(std::span<const unsigned char> bytes, int64_t i) {
  uint32_t w = 0;
  std::memcpy(&w, bytes.data() + static_cast<size_t>(i) * 4, 4);  // little-endian, as the files are
  return w;
}

unsigned nibble(uint32_t w, int i) { return (w >> (4 * i)) & 0xFu; }

// AutoAWQ's GEMM packing puts column 8c + kAwqOrder[i] in nibble i; this is where column 8c + j is.
constexpr int kAwqNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};

void put_u4(std::vector<unsigned char>& out, int64_t i, unsigned v) {
  unsigned char& b = out[static_cast<size_t>(i / 2)];
  b = static_cast<unsigned char>(i % 2 ? (b & 0x0Fu) | (v << 4) : (b & 0xF0u) | v);
}

}  // namespace

RepackedWeight repack(QuantLayout layout, const QuantTensors& t) {
  const int64_t n = t.n, k = t.k, group = t.group ? t.group : t.k, groups = k / group;
  LJ_ASSERT(n % 8 == 0 && k % 8 == 0 && k % group == 0, "repack {}: sizes {} x {} / {} were checked", t.name, n, k, group);
  LJ_ASSERT(t.qweight.size() == static_cast<size_t>(n * k / 2) && t.qzeros.size() == static_cast<size_t>(groups * n / 2),
            "repack {}: tensor sizes were checked", t.name);
  RepackedWeight r;
  r.codes.assign(static_cast<size_t>(n * k / 2), 0);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t nn = 0; nn < n; ++nn) {
      const unsigned q = layout == QuantLayout::Awq ? nibble(word(t.qweight, kk * (n / 8) + nn / 8), kAwqNibbleOf[nn % 8])
                                                    : nibble(word(t.qweight, kk / 8 * n + nn), static_cast<int>(kk % 8));
      put_u4(r.codes, nn * k + kk, q);
    }
  const bool u4_zeros = groups % 2 == 0;
  r.zeros.assign(static_cast<size_t>(u4_zeros ? n * groups / 2 : n * groups), 0);
  for (int64_t gg = 0; gg < groups; ++gg)
    for (int64_t nn = 0; nn < n; ++nn) {
      const uint32_t w = word(t.qzeros, gg * (n / 8) + nn / 8);
      unsigned z = layout == QuantLayout::Awq ? nibble(w, kAwqNibbleOf[nn % 8]) : nibble(w, static_cast<int>(nn % 8));
      if (t.zeros_minus_one) {
        if (z == 15)
          throw UserError(fmt::format("{}.qzeros: group {} of output {} stores 15, a zero point of 16 in GPTQ's v1 format, which "
                                      "4-bit zero points cannot hold", t.name, gg, nn));
        ++z;
      }
      if (u4_zeros) put_u4(r.zeros, nn * groups + gg, z);
      else r.zeros[static_cast<size_t>(nn * groups + gg)] = static_cast<unsigned char>(z);
    }
  // Scales [groups, n] -> [n, groups].
  const size_t eb = static_cast<size_t>(dtype_bytes(t.scale_dtype));
  LJ_ASSERT(t.scales.size() == static_cast<size_t>(groups * n) * eb, "repack {}: scale size was checked", t.name);
  r.scales.resize(t.scales.size());
  for (int64_t gg = 0; gg < groups; ++gg)
    for (int64_t nn = 0; nn < n; ++nn)
      std::memcpy(r.scales.data() + static_cast<size_t>(nn * groups + gg) * eb, t.scales.data() + static_cast<size_t>(gg * n + nn) * eb, eb);
  if (!t.g_idx.empty())
    for (int64_t kk = 0; kk < k; ++kk)
      if (const auto gi = static_cast<int32_t>(word(t.g_idx, kk)); gi != kk / group)
        throw UserError(fmt::format("{}.g_idx: input {} is in group {}, not {} ({} / group size {}): act-order checkpoints are not "
                                    "supported", t.name, kk, gi, kk / group, kk, group));
  return r;
}

}  // namespace lj::models
