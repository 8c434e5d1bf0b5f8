#include "codegen/kernel.h"

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj {

int64_t LaunchRule::blocks(const Bindings& b) const {
  auto value = [&](const DimProduct& p) {
    int64_t v = p.constant;
    for (const std::string& s : p.symbols) {
      const std::optional<int64_t> x = b.get(s);
      if (!x) throw UserError(fmt::format("launch needs a value for symbol {} (grid = {})", s, str()));
      v *= *x;
    }
    return v;
  };
  const int64_t work_value = value(work);
  return value(outer) * ((work_value + per_block - 1) / per_block) * tiles_per_unit;
}

std::string LaunchRule::str() const {
  std::string out = fmt::format("ceil({} / {})", work.str(), per_block);
  if (!(outer.symbols.empty() && outer.constant == 1)) out = fmt::format("{} * {}", outer.str(), out);
  if (tiles_per_unit != 1) out += fmt::format(" * {}", tiles_per_unit);
  return out;
}

std::string AttentionConfig::str() const { return fmt::format("{}x{}x{}x{}", bm, mt, bn, stages); }

int64_t scratch_bytes(const GeneratedKernel& k, const Bindings& b) {
  for (const KernelParam& p : k.params)
    if (p.kind == KernelParam::Kind::Scratch) return k.launch.blocks(b) * p.scratch_per_block;
  return 0;
}

}  // namespace lj
