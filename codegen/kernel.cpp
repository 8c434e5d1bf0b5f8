#include "codegen/kernel.h"

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj {

int64_t LaunchRule::blocks(const Bindings& b) const {
  int64_t work_value = work.constant;
  for (const std::string& s : work.symbols) {
    const std::optional<int64_t> v = b.get(s);
    if (!v) throw UserError(fmt::format("launch needs a value for symbol {} (grid = {})", s, str()));
    work_value *= *v;
  }
  return (work_value + per_block - 1) / per_block * tiles_per_unit;
}

std::string LaunchRule::str() const {
  std::string out = fmt::format("ceil({} / {})", work.str(), per_block);
  if (tiles_per_unit != 1) out += fmt::format(" * {}", tiles_per_unit);
  return out;
}

}  // namespace lj
