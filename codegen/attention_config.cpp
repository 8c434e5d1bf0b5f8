#include "codegen/attention_config.h"

#include <charconv>
#include <cstdio>

#include <fmt/format.h>

namespace lj {

std::string AttentionConfig::str() const {
  if (decode)
    return fmt::format("decode bn={} warps={} stages={}{}", bn, warps, stages, chunk > 0 ? fmt::format(" chunk={}", chunk) : "");
  return wgmma ? fmt::format("wgmma bn={} stages={}", bn, stages) : fmt::format("{}x{}x{}x{}", bm, mt, bn, stages);
}

std::optional<AttentionConfig> parse_attention_config(std::string_view text, std::string* error) {
  if (text.substr(0, 7) == "decode ") {
    AttentionConfig c = AttentionConfig::decode_default();
    int bn = 0, warps = 0, stages = 0, chunk = 0, n = 0;
    const std::string t(text);
    const int got = std::sscanf(t.c_str(), "decode bn=%d warps=%d stages=%d%n chunk=%d%n", &bn, &warps, &stages, &n, &chunk, &n);
    if (got < 3 || static_cast<size_t>(n) != t.size() || bn <= 0 || warps <= 0 || stages <= 0 || (got == 4 && chunk <= 0)) {
      if (error) *error = fmt::format("attention config '{}': expected 'decode bn=N warps=W stages=S' (and ' chunk=C'), positive", text);
      return std::nullopt;
    }
    c.bn = bn, c.warps = warps, c.stages = stages, c.chunk = got == 4 ? chunk : 0;
    return c;
  }
  if (text.substr(0, 6) == "wgmma ") {
    AttentionConfig c = AttentionConfig::hopper();
    int bn = 0, stages = 0;
    char tail = 0;
    const std::string t(text);
    if (std::sscanf(t.c_str(), "wgmma bn=%d stages=%d%c", &bn, &stages, &tail) != 2 || bn <= 0 || stages <= 0) {
      if (error) *error = fmt::format("attention config '{}': expected 'wgmma bn=N stages=S' with positive N and S", text);
      return std::nullopt;
    }
    c.bn = bn, c.stages = stages;
    return c;
  }
  int values[4] = {0, 0, 0, 0};
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t end = i < 3 ? text.find('x', at) : text.size();
    const std::string_view part = end == std::string_view::npos ? std::string_view{} : text.substr(at, end - at);
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), values[i]);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || values[i] <= 0) {
      if (error)
        *error = fmt::format("attention config '{}': expected BMxMTxBNxSTAGES, four positive integers such as 128x2x64x2", text);
      return std::nullopt;
    }
    at = end + 1;
  }
  return AttentionConfig{values[0], values[1], values[2], values[3]};
}

}  // namespace lj
