// RoPE inverse frequencies (rope_frequencies.h has the formulas).
#include "ops/rope_frequencies.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "layerjit/check.h"

namespace lj {

std::vector<double> rope_inv_freq(int64_t dim, double theta, const attr::RopeScaling& s) {
  using K = attr::RopeScaling::Kind;
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // Spelled as the reference always spelled it, so unscaled tables keep their exact doubles.
    const double base = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    double v = base;
    switch (s.kind) {
      case K::None: break;
      case K::Linear: v = base / s.factor; break;
      case K::Llama3: {
        const double wavelen = 2.0 * std::numbers::pi / base;
        const double l = static_cast<double>(s.original_max_pos);
        if (wavelen > l / s.low_freq_factor) {
          v = base / s.factor;
        } else if (wavelen >= l / s.high_freq_factor) {
          const double w = (l / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          v = (1.0 - w) * base / s.factor + w * base;
        }
        break;
      }
    }
    f[static_cast<size_t>(i)] = v;
  }
  return f;
}

std::string rope_scaling_problem(const attr::RopeScaling& s) {
  using K = attr::RopeScaling::Kind;
  switch (s.kind) {
    case K::None: return "";
    case K::Linear: return s.factor > 0 ? "" : fmt::format("factor must be positive, got {}", s.factor);
    case K::Llama3:
      if (!(s.factor > 0)) return fmt::format("factor must be positive, got {}", s.factor);
      if (!(s.low_freq_factor > 0)) return fmt::format("low_freq_factor must be positive, got {}", s.low_freq_factor);
      if (!(s.high_freq_factor > s.low_freq_factor))
        return fmt::format("high_freq_factor ({}) must be greater than low_freq_factor ({})", s.high_freq_factor, s.low_freq_factor);
      if (s.original_max_pos <= 0) return fmt::format("original_max_pos must be positive, got {}", s.original_max_pos);
      return "";
  }
  LJ_ASSERT(false, "unhandled rope scaling {}", static_cast<int>(s.kind));
  __builtin_unreachable();
}

std::string rope_inv_freq_formula(const attr::RopeScaling& s) {
  using K = attr::RopeScaling::Kind;
  switch (s.kind) {
    case K::None: return "theta^(-2i/dim)";
    case K::Linear: return fmt::format("theta^(-2i/dim) / {} (linear scaling)", s.factor);
    case K::Llama3:
      return fmt::format("theta^(-2i/dim) in Llama-3.1's bands (factor {}, low_freq_factor {}, high_freq_factor {}, original_max_pos {})",
                         s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_pos);
  }
  LJ_ASSERT(false, "unhandled rope scaling {}", static_cast<int>(s.kind));
  __builtin_unreachable();
}

}  // namespace lj
