// The schema table (operands, results, attributes) of every op, and attribute checking.
#include "ops/op_schema.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

#include "layerjit/error.h"

namespace lj {

namespace {

constexpr std::array kOpNames = {
#define LJ_OP(id, name, cls) std::string_view(name),
#include "layerjit/op_kinds.def"
#include "layerjit/check.h"
#undef LJ_OP
};

constexpr size_t kNumOps = kOpNames.size();

using A = AttrSpec;
AttrValue none() { return Name{"none"}; }

// Schema per op, in enum order. The static_assert below and the check in op_schema() keep this table
// and op_kinds.def in step.
std::vector<OpSchema> make_schemas() {
  std::vector<OpSchema> s = {
      {OpKind::Matmul, "matmul", {"x", "w", "row_scale"}, 2, 3, 1, {A{"out_dtype", AttrKind::DTypeName}}},
      {OpKind::Add, "add", {"a", "b"}, 2, 2, 1, {}},
      {OpKind::Sub, "sub", {"a", "b"}, 2, 2, 1, {}},
      {OpKind::Mul, "mul", {"a", "b"}, 2, 2, 1, {}},
      {OpKind::Div, "div", {"a", "b"}, 2, 2, 1, {}},
      {OpKind::Silu, "silu", {"x"}, 1, 1, 1, {}},
      {OpKind::Gelu, "gelu", {"x"}, 1, 1, 1, {A{"approx", AttrKind::String, false, AttrValue("tanh"), {"tanh", "none"}}}},
      {OpKind::Relu, "relu", {"x"}, 1, 1, 1, {}},
      {OpKind::Exp, "exp", {"x"}, 1, 1, 1, {}},
      {OpKind::Rsqrt, "rsqrt", {"x"}, 1, 1, 1, {}},
      {OpKind::Cast, "cast", {"x"}, 1, 1, 1, {A{"dtype", AttrKind::DTypeName, true}}},
      {OpKind::RmsNorm, "rms_norm", {"x", "w"}, 2, 2, 1, {A{"eps", AttrKind::Float, false, AttrValue(1e-5)}}},
      {OpKind::RmsScale, "rms_scale", {"x"}, 1, 1, 1, {A{"eps", AttrKind::Float, false, AttrValue(1e-5)}}},
      {OpKind::LayerNorm, "layer_norm", {"x", "w", "b"}, 3, 3, 1, {A{"eps", AttrKind::Float, false, AttrValue(1e-5)}}},
      // scaling and its parameters are absent for plain RoPE (the printed form of an unscaled table
      // stays as it was); "linear" takes factor, "llama3" factor, low_freq_factor, high_freq_factor
      // and original_max_pos (Llama-3.1's frequency bands, ops/rope_frequencies.h).
      {OpKind::RopeTable, "rope_table", {"pos"}, 1, 1, 2,
       {A{"dim", AttrKind::Int, true}, A{"theta", AttrKind::Float, false, AttrValue(10000.0)},
        A{"scaling", AttrKind::String, false, std::nullopt, {"linear", "llama3"}}, A{"factor", AttrKind::Float},
        A{"low_freq_factor", AttrKind::Float}, A{"high_freq_factor", AttrKind::Float}, A{"original_max_pos", AttrKind::Int}}},
      {OpKind::Rope, "rope", {"x", "cos", "sin"}, 3, 3, 1,
       {A{"style", AttrKind::String, false, AttrValue("half"), {"half", "interleaved"}}}},
      {OpKind::Softmax, "softmax", {"x"}, 1, 1, 1, {A{"axis", AttrKind::Int, false, AttrValue(-1)}}},
      {OpKind::Attention, "attention", {"q", "k", "v", "cache_pos", "block_table"}, 3, 5, -1,
       {A{"causal", AttrKind::Bool, false, AttrValue(false)}, A{"scale", AttrKind::Float},
        A{"lse", AttrKind::Bool, false, AttrValue(false)}, A{"window", AttrKind::Int}}},
      {OpKind::KvCacheWrite, "kv_cache_write", {"cache", "new", "pos", "block_table"}, 3, 4, 1, {}},
      {OpKind::Reshape, "reshape", {"x"}, 1, 1, 1, {A{"shape", AttrKind::ShapeList, true}}},
      {OpKind::Transpose, "transpose", {"x"}, 1, 1, 1, {A{"perm", AttrKind::IntList, true}}},
      {OpKind::Split, "split", {"x"}, 1, 1, -1, {A{"axis", AttrKind::Int, true}, A{"sizes", AttrKind::IntList, true}}},
      {OpKind::Concat, "concat", {"inputs"}, 1, -1, 1, {A{"axis", AttrKind::Int, true}}},
      {OpKind::ReduceSum, "reduce_sum", {"x"}, 1, 1, 1,
       {A{"axis", AttrKind::Int, true}, A{"keepdim", AttrKind::Bool, false, AttrValue(false)}}},
      {OpKind::ReduceMax, "reduce_max", {"x"}, 1, 1, 1,
       {A{"axis", AttrKind::Int, true}, A{"keepdim", AttrKind::Bool, false, AttrValue(false)}}},
      {OpKind::ReduceMean, "reduce_mean", {"x"}, 1, 1, 1,
       {A{"axis", AttrKind::Int, true}, A{"keepdim", AttrKind::Bool, false, AttrValue(false)}}},
      {OpKind::Quantize, "quantize", {"x", "scale"}, 1, 2, -1,
       {A{"dtype", AttrKind::DTypeName, true, std::nullopt, {"f8e4m3", "f8e5m2", "i8"}},
        A{"axis", AttrKind::AxisOrNone, false, none()}}},
      {OpKind::Dequantize, "dequantize", {"x", "scale", "zero"}, 2, 3, 1,
       {A{"dtype", AttrKind::DTypeName, true, std::nullopt, {"f32", "f16", "bf16"}},
        A{"axis", AttrKind::AxisOrNone, false, none()}, A{"group", AttrKind::Int}}},
      {OpKind::Embedding, "embedding", {"table", "ids"}, 2, 2, 1, {}},
      {OpKind::Argmax, "argmax", {"x"}, 1, 1, 1, {}},
      // The sum of x over the `ranks` ranks of a tensor-parallel group (the sharding pass inserts it
      // after each row-parallel matmul: compiler/passes/shard.cpp).
      {OpKind::AllReduce, "all_reduce", {"x"}, 1, 1, 1,
       {A{"op", AttrKind::String, false, AttrValue("sum"), {"sum"}}, A{"ranks", AttrKind::Int, true}}},
  };
  return s;
}

const std::vector<OpSchema>& schemas() {
  static const std::vector<OpSchema> table = [] {
    auto s = make_schemas();
    LJ_ASSERT(s.size() == kNumOps, "schema table has {} entries but op_kinds.def lists {}", s.size(), kNumOps);
    for (size_t i = 0; i < s.size(); ++i) {
      LJ_ASSERT(static_cast<size_t>(s[i].kind) == i && s[i].name == kOpNames[i],
                "schema {} ({}) is out of step with op_kinds.def ({})", i, s[i].name, kOpNames[i]);
    }
    return s;
  }();
  return table;
}

bool kind_matches(AttrKind k, const AttrValue& v) {
  switch (k) {
    case AttrKind::Int: return std::holds_alternative<int64_t>(v.v);
    case AttrKind::Float: return std::holds_alternative<double>(v.v) || std::holds_alternative<int64_t>(v.v);
    case AttrKind::Bool: return std::holds_alternative<bool>(v.v);
    case AttrKind::String: return std::holds_alternative<std::string>(v.v);
    case AttrKind::DTypeName: return std::holds_alternative<DType>(v.v);
    case AttrKind::IntList: {
      const auto* l = std::get_if<AttrList>(&v.v);
      if (!l) return false;
      for (const auto& e : *l)
        if (!std::holds_alternative<int64_t>(e.v)) return false;
      return true;
    }
    case AttrKind::ShapeList: {
      const auto* l = std::get_if<AttrList>(&v.v);
      if (!l) return false;
      for (const auto& e : *l) {
        const auto* n = std::get_if<Name>(&e.v);
        if (!std::holds_alternative<int64_t>(e.v) && !(n && is_valid_symbol(n->text))) return false;
      }
      return true;
    }
    case AttrKind::AxisOrNone: {
      if (std::holds_alternative<int64_t>(v.v)) return true;
      const auto* n = std::get_if<Name>(&v.v);
      return n && n->text == "none";
    }
  }
  LJ_ASSERT(false, "unhandled attribute kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

}  // namespace

std::string_view op_name(OpKind k) {
  auto i = static_cast<size_t>(k);
  LJ_ASSERT(i < kNumOps, "op kind {} out of range", i);
  return kOpNames[i];
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (size_t i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

const std::vector<OpKind>& all_op_kinds() {
  static const std::vector<OpKind> kinds = [] {
    std::vector<OpKind> v;
    for (size_t i = 0; i < kNumOps; ++i) v.push_back(static_cast<OpKind>(i));
    return v;
  }();
  return kinds;
}

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "an integer";
    case AttrKind::Float: return "a float";
    case AttrKind::Bool: return "a bool (true or false)";
    case AttrKind::String: return "a string";
    case AttrKind::DTypeName: return "a dtype";
    case AttrKind::IntList: return "a list of integers";
    case AttrKind::ShapeList: return "a shape: a list of integers and symbol names";
    case AttrKind::AxisOrNone: return "an integer axis or none";
  }
  LJ_ASSERT(false, "unhandled attribute kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

const OpSchema& op_schema(OpKind k) {
  const auto& s = schemas();
  auto i = static_cast<size_t>(k);
  LJ_ASSERT(i < s.size(), "op kind {} out of range", i);
  return s[i];
}

std::string operand_name(OpKind k, int i) {
  const OpSchema& s = op_schema(k);
  if (s.max_operands < 0) return fmt::format("{}[{}]", s.operand_names.at(0), i);
  if (i >= 0 && static_cast<size_t>(i) < s.operand_names.size()) return std::string(s.operand_names[static_cast<size_t>(i)]);
  return fmt::format("operand {}", i);
}

Attrs check_attrs(OpKind k, const Attrs& given) {
  const OpSchema& s = op_schema(k);
  for (const auto& [name, value] : given.items()) {
    const AttrSpec* spec = nullptr;
    for (const auto& a : s.attrs)
      if (a.name == name) spec = &a;
    if (!spec) {
      std::string expected;
      for (const auto& a : s.attrs) expected += (expected.empty() ? "" : ", ") + std::string(a.name);
      throw UserError(s.attrs.empty()
                          ? fmt::format("{}: unknown attribute '{}' ({} takes no attributes)", s.name, name, s.name)
                          : fmt::format("{}: unknown attribute '{}' (expected one of: {})", s.name, name, expected));
    }
    if (!kind_matches(spec->kind, value)) {
      throw UserError(fmt::format("{}: attribute '{}' must be {}, got {} {}", s.name, name,
                                  attr_kind_name(spec->kind), value.kind_name(), value.str()));
    }
    if (!spec->choices.empty()) {
      std::string text = value.str();
      if (const auto* str = std::get_if<std::string>(&value.v)) text = *str;
      bool ok = false;
      std::string all;
      for (auto c : spec->choices) {
        ok = ok || c == text;
        all += (all.empty() ? "\"" : ", \"") + std::string(c) + "\"";
      }
      if (!ok) throw UserError(fmt::format("{}: attribute '{}' must be one of {}, got {}", s.name, name, all, value.str()));
    }
    if (spec->kind == AttrKind::Float) {
      double d = std::holds_alternative<int64_t>(value.v) ? static_cast<double>(std::get<int64_t>(value.v))
                                                          : std::get<double>(value.v);
      if (!std::isfinite(d)) throw UserError(fmt::format("{}: attribute '{}' must be finite, got {}", s.name, name, value.str()));
    }
  }
  Attrs out;
  for (const auto& a : s.attrs) {
    const AttrValue* v = given.find(a.name);
    if (v) {
      // Store floats as floats, so `eps = 1` prints back as `eps = 1.0`.
      if (a.kind == AttrKind::Float && std::holds_alternative<int64_t>(v->v))
        out.set(std::string(a.name), AttrValue(static_cast<double>(std::get<int64_t>(v->v))));
      else
        out.set(std::string(a.name), *v);
    } else if (a.required) {
      throw UserError(fmt::format("{}: missing required attribute '{}' ({})", s.name, a.name, attr_kind_name(a.kind)));
    } else if (a.default_value) {
      out.set(std::string(a.name), *a.default_value);
    }
  }
  return out;
}

}  // namespace lj
