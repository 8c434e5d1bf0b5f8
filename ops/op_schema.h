// Op schemas: operand names, result count and the attribute table of every op kind, plus the
// checks that run when a node is made (attributes, then dtypes and shapes). Internal header.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "layerjit/attrs.h"
#include "layerjit/op_kind.h"
#include "layerjit/types.h"

namespace lj {

enum class AttrKind {
  Int,         // 5
  Float,       // 1e-05 (an integer literal is accepted and stored as float)
  Bool,        // true | false
  String,      // "half" (may be restricted to `choices`)
  DTypeName,   // bf16
  IntList,     // [1, 0, 2]
  ShapeList,   // [T, 32, 128]: integers and symbol names
  AxisOrNone,  // -1 | none
};
const char* attr_kind_name(AttrKind k);

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required = false;
  std::optional<AttrValue> default_value;      // filled in when absent
  std::vector<std::string_view> choices = {};  // for String (and DType: allowed dtypes by name)
};

struct OpSchema {
  OpKind kind;
  std::string_view name;
  std::vector<std::string_view> operand_names;  // for variadic ops, one name used for all
  int min_operands;
  int max_operands;  // -1: any number
  int num_results;   // -1: given by attributes (split, attention) or operands (quantize)
  std::vector<AttrSpec> attrs;
};

const OpSchema& op_schema(OpKind k);

/// Name of operand `i` of op `k` for diagnostics ("x", "w", "inputs[2]").
std::string operand_name(OpKind k, int i);

/// Checks attributes against the schema (unknown, missing, wrong kind, bad choice) and returns them
/// in schema order with defaults filled. Throws UserError without a location.
Attrs check_attrs(OpKind k, const Attrs& given);

/// Checks operand count, dtypes and shapes and returns the result types. `attrs` must come from
/// check_attrs. Throws UserError without a location; messages start with the op name.
std::vector<TensorType> infer_types(OpKind k, const std::vector<TensorType>& operands, const Attrs& attrs);

/// Arithmetic and memory traffic of one op for bound symbols, for roofline reporting. FLOPs count a
/// multiply-add as 2; minimum bytes read every operand once and write every result once (an
/// in-place cache write counts only the entries it writes).
struct OpCost {
  double flops = 0;
  double bytes = 0;
};
OpCost op_cost(OpKind k, const std::vector<TensorType>& operands, const std::vector<TensorType>& results,
               const Attrs& attrs, const Bindings& b);

}  // namespace lj
