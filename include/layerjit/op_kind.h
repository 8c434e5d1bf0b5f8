// OpKind: the enum generated from op_kinds.def, and name lookup both ways.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace lj {

enum class OpKind : uint8_t {
#define LJ_OP(id, name, min_ops, max_ops, results) id,
#include "layerjit/op_kinds.def"
#undef LJ_OP
};

std::string_view op_name(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view name);
const std::vector<OpKind>& all_op_kinds();

}  // namespace lj
