// OpKind: the enum generated from op_kinds.def, and name lookup both ways.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace lj {

enum class OpKind : uint8_t {
#define LJ_OP(id, name, cls) id,
#include "layerjit/op_kinds.def"
#undef LJ_OP
};

/// What the fusion planner asks of an op (op_kinds.def says which class each op is in, and why).
enum class OpClass : uint8_t { Elementwise, RowReduction, View, Matmul, Attention, RopeKv, Reduction, Movement, Communication };

constexpr OpClass op_class(OpKind k) {
  constexpr OpClass classes[] = {
#define LJ_OP(id, name, cls) OpClass::cls,
#include "layerjit/op_kinds.def"
#undef LJ_OP
  };
  return classes[static_cast<size_t>(k)];
}

std::string_view op_name(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view name);
const std::vector<OpKind>& all_op_kinds();

}  // namespace lj
