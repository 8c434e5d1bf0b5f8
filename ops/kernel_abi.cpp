#include "layerjit/kernel_abi.h"

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
  const int64_t blocks = value(outer) * ((work_value + per_block - 1) / per_block) * tiles_per_unit;
  return max_blocks > 0 && blocks > max_blocks ? max_blocks : blocks;
}

std::string LaunchRule::str() const {
  std::string out = fmt::format("ceil({} / {})", work.str(), per_block);
  if (!(outer.symbols.empty() && outer.constant == 1)) out = fmt::format("{} * {}", outer.str(), out);
  if (tiles_per_unit != 1) out += fmt::format(" * {}", tiles_per_unit);
  if (max_blocks > 0) out = fmt::format("min({}, {})", out, max_blocks);
  return out;
}

int64_t scratch_bytes(const KernelAbi& k, const Bindings& b) {
  for (const KernelParam& p : k.params)
    if (p.kind == KernelParam::Kind::Scratch) return k.launch.blocks(b) * p.scratch_per_block;
  return 0;
}

}  // namespace lj
