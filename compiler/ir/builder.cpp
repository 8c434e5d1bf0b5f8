// GraphBuilder: creates inputs and nodes, verifying each op and inferring its types on the spot.
#include "layerjit/builder.h"

#include "compiler/ir/identifier.h"

#include <cctype>

#include "ops/op_schema.h"
#include "layerjit/check.h"

namespace lj {

namespace {

// A tensor of more than kMaxRank dimensions, or whose constant dimensions alone hold more bytes than
// int64 counts, is refused where it is declared, naming it (symbolic dimensions are checked when
// bound: resolve, tensor_bytes).
void check_constant_size(const TensorType& t, const std::string& what, const SourceLoc& loc) {
  if (t.shape.size() > kMaxRank)
    throw UserError(fmt::format("{}: {} dimensions, more than the {} layerjit's kernels index", what, t.shape.size(), kMaxRank), loc);
  std::vector<int64_t> dims;
  for (const Dim& d : t.shape) dims.push_back(d.is_const() ? d.value() : 1);
  try {
    (void)tensor_bytes(t.dtype, dims);
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: {}", what, e.what()), loc);
  }
}

bool valid_name(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}
}  // namespace

TensorType Value::type() const {
  LJ_CHECK(builder_ != nullptr, SourceLoc{}, "use of an empty Value handle");
  return builder_->info(id_).type;
}

std::string Value::name() const {
  LJ_CHECK(builder_ != nullptr, SourceLoc{}, "use of an empty Value handle");
  return builder_->info(id_).name;
}

Value Value::named(std::string name) const {
  LJ_CHECK(builder_ != nullptr, SourceLoc{}, "use of an empty Value handle");
  builder_->rename(id_, std::move(name));
  return *this;
}

GraphBuilder::GraphBuilder(std::string graph_name, SourceLoc loc) : graph_(std::make_unique<Graph>()) {
  LJ_CHECK(valid_name(graph_name), loc, "invalid graph name '{}': use letters, digits, '_' and '.'", graph_name);
  graph_->name_ = std::move(graph_name);
  graph_->loc_ = std::move(loc);
}

const ValueInfo& GraphBuilder::info(ValueId id) const {
  LJ_CHECK(graph_ != nullptr, SourceLoc{}, "graph builder used after finish()");
  return graph_->value(id);
}

void GraphBuilder::rename(ValueId id, std::string name) {
  LJ_CHECK(graph_ != nullptr, SourceLoc{}, "graph builder used after finish()");
  LJ_CHECK(valid_name(name), SourceLoc{}, "invalid value name '{}': use letters, digits, '_' and '.'", name);
  ValueInfo& v = graph_->values_.at(static_cast<size_t>(id));
  if (v.name == name) return;
  LJ_CHECK(!names_.count(name), SourceLoc{}, "redefinition of value '%{}' in @{}", name, graph_->name_);
  const std::string old_ident = cpp_identifier(v.name);
  value_idents_.erase(old_ident);
  try {
    check_ident(value_idents_, name, "values", SourceLoc{});
  } catch (const UserError&) {
    value_idents_.emplace(old_ident, v.name);
    throw;
  }
  value_idents_.emplace(cpp_identifier(name), name);
  names_.erase(v.name);
  names_.emplace(name, id);
  v.name = std::move(name);
}

std::optional<Value> GraphBuilder::lookup(std::string_view name) {
  LJ_CHECK(graph_ != nullptr, SourceLoc{}, "graph builder used after finish()");
  auto it = names_.find(std::string(name));
  if (it == names_.end()) return std::nullopt;
  return Value(this, it->second);
}

std::string GraphBuilder::fresh_name() {
  for (;;) {
    std::string n = std::to_string(next_temp_++);
    if (!lookup(n) && !value_idents_.count(n)) return n;
  }
}

void GraphBuilder::check_ident(const std::unordered_map<std::string, std::string>& idents, const std::string& name, const char* what,
                               const SourceLoc& loc) const {
  const auto it = idents.find(cpp_identifier(name));
  if (it == idents.end() || it->second == name) return;
  const std::string sigil = &idents == &value_idents_ ? "%" : "";
  throw UserError(identifier_collision(what, sigil + it->second, sigil + name, it->first,
                                       "in the kernels layerjit generates for @" + graph_->name_),
                  loc);
}

Value GraphBuilder::add_input(std::string name, DType dtype, Shape shape, bool is_param, SourceLoc loc) {
  LJ_CHECK(graph_ != nullptr, loc, "graph builder used after finish()");
  LJ_CHECK(valid_name(name), loc, "invalid input name '{}': use letters, digits, '_' and '.'", name);
  LJ_CHECK(!lookup(name), loc, "redefinition of value '%{}' in @{}", name, graph_->name_);
  for (const Dim& d : shape) {
    LJ_CHECK(d.is_symbol() || d.value() > 0, loc, "bad dimension {} in {}: dimensions must be positive", d.value(),
             shape_str(shape));
    LJ_CHECK(d.is_const() || is_valid_symbol(d.symbol()), loc,
             "bad dimension '{}': a symbol is a name starting with a letter or '_', other than a dtype, true or false",
             d.symbol());
  }
  // Rows of a packed tensor are whole bytes, and a kernel's row stride is a compile-time constant.
  LJ_CHECK(!is_packed(dtype) || (!shape.empty() && shape.back().is_const() && shape.back().value() % 2 == 0), loc,
           "%{}: a {} tensor packs two elements per byte, so its last dimension must be a constant even number, got {}", name,
           dtype_name(dtype), shape_str(shape));
  check_constant_size({dtype, shape}, "%" + name, loc);
  check_ident(value_idents_, name, "values", loc);
  for (const Dim& d : shape)
    if (d.is_symbol()) check_ident(symbol_idents_, d.symbol(), "symbols", loc);
  value_idents_.emplace(cpp_identifier(name), name);
  for (const Dim& d : shape)
    if (d.is_symbol()) symbol_idents_.emplace(cpp_identifier(d.symbol()), d.symbol());
  ValueInfo v;
  v.name = std::move(name);
  v.type = {dtype, std::move(shape)};
  v.is_param = is_param;
  v.loc = std::move(loc);
  names_.emplace(v.name, static_cast<ValueId>(graph_->values_.size()));
  graph_->values_.push_back(std::move(v));
  auto id = static_cast<ValueId>(graph_->values_.size() - 1);
  graph_->inputs_.push_back(id);
  return Value(this, id);
}

Value GraphBuilder::input(std::string name, DType dtype, Shape shape, SourceLoc loc) {
  return add_input(std::move(name), dtype, std::move(shape), false, std::move(loc));
}

Value GraphBuilder::param(std::string name, DType dtype, Shape shape, SourceLoc loc) {
  return add_input(std::move(name), dtype, std::move(shape), true, std::move(loc));
}

ValueId GraphBuilder::check_operand(const Value& v, std::string_view op, int index) const {
  LJ_CHECK(v.builder_ != nullptr, SourceLoc{}, "{}: operand {} is an empty Value handle", op, index);
  LJ_CHECK(v.builder_ == this, SourceLoc{}, "{}: operand {} (%{}) belongs to another graph", op, index,
           v.builder_->info(v.id_).name);
  return v.id_;
}

std::vector<Value> GraphBuilder::op(OpKind kind, const std::vector<Value>& operands, Attrs attrs, SourceLoc loc,
                                    const std::vector<std::string>& result_names) {
  LJ_CHECK(graph_ != nullptr, loc, "graph builder used after finish()");
  Node n;
  n.kind = kind;
  n.loc = loc;
  std::vector<TensorType> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    ValueId id = check_operand(operands[i], op_name(kind), static_cast<int>(i));
    n.operands.push_back(id);
    types.push_back(graph_->value(id).type);
  }
  // A cache write updates its cache in place, per call: into a param (a weight, constant across calls,
  // which the planner may even treat as weight preparation) it would be wrong every call after the first.
  if (kind == OpKind::KvCacheWrite && !n.operands.empty()) {
    ValueId root = n.operands[0];
    while (graph_->value(root).producer >= 0 && op_class(graph_->node(graph_->value(root).producer).kind) == OpClass::View)
      root = graph_->node(graph_->value(root).producer).operands[0];
    const ValueInfo& c = graph_->value(root);
    LJ_CHECK(!c.is_param, loc, "kv_cache_write: the cache {}%{} is a param (a weight, constant across calls); a cache it "
             "writes must be an input (declare %{} without `param`)",
             root == n.operands[0] ? "" : fmt::format("%{}, a view of ", graph_->value(n.operands[0]).name), c.name, c.name);
  }
  std::vector<TensorType> results;
  try {
    n.attrs = check_attrs(kind, attrs);
    results = infer_types(kind, types, n.attrs);
    for (size_t i = 0; i < results.size(); ++i)
      check_constant_size(results[i], i < result_names.size() ? "%" + result_names[i] : fmt::format("{}'s result", op_name(kind)), loc);
  } catch (const UserError& e) {
    if (e.loc().known()) throw;
    throw UserError(e.what(), loc);
  }
  const OpSchema& s = op_schema(kind);
  LJ_ASSERT(s.num_results < 0 || static_cast<int>(results.size()) == s.num_results,
            "{} inferred {} results, schema says {}", s.name, results.size(), s.num_results);
  if (!result_names.empty()) {
    // Quantize's result count follows its operands and attention's its lse attribute, so say how to
    // write the other form.
    std::string hint;
    if (kind == OpKind::Quantize)
      hint = operands.size() == 1 ? " (without a scale operand quantize computes the scale and returns it too: "
                                    "%q, %scale = quantize(%x) {...})"
                                  : " (quantize with a scale operand returns only the codes)";
    if (kind == OpKind::Attention)
      hint = results.size() == 2 ? " (with lse = true attention returns the output and each row's log-sum-exp: "
                                   "%o, %lse = attention(...) {lse = true})"
                                 : " (attention returns each row's log-sum-exp as a second result only with lse = true)";
    LJ_CHECK(result_names.size() == results.size(), loc, "{}: produces {} result{} but {} name{} given{}", s.name,
             results.size(), results.size() == 1 ? "" : "s", result_names.size(), result_names.size() == 1 ? " is" : "s are",
             hint);
    for (size_t i = 0; i < result_names.size(); ++i) {
      LJ_CHECK(valid_name(result_names[i]), loc, "invalid value name '{}': use letters, digits, '_' and '.'", result_names[i]);
      LJ_CHECK(!lookup(result_names[i]), loc, "redefinition of value '%{}' in @{}", result_names[i], graph_->name_);
      check_ident(value_idents_, result_names[i], "values", loc);
      for (size_t j = 0; j < i; ++j) {
        LJ_CHECK(result_names[j] != result_names[i], loc, "redefinition of value '%{}' in @{}", result_names[i], graph_->name_);
        if (cpp_identifier(result_names[j]) == cpp_identifier(result_names[i]))
          throw UserError(identifier_collision("values", "%" + result_names[j], "%" + result_names[i], cpp_identifier(result_names[i]),
                                               "in the kernels layerjit generates for @" + graph_->name_),
                          loc);
      }
    }
  }
  auto node_id = static_cast<NodeId>(graph_->nodes_.size());
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    ValueInfo v;
    v.name = result_names.empty() ? fresh_name() : result_names[i];
    value_idents_.emplace(cpp_identifier(v.name), v.name);
    v.type = results[i];
    v.producer = node_id;
    v.result_index = static_cast<int>(i);
    v.loc = loc;
    names_.emplace(v.name, static_cast<ValueId>(graph_->values_.size()));
    graph_->values_.push_back(std::move(v));
    auto id = static_cast<ValueId>(graph_->values_.size() - 1);
    n.results.push_back(id);
    out.push_back(Value(this, id));
  }
  graph_->nodes_.push_back(std::move(n));
  return out;
}

namespace {
Attrs attrs_of(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}
AttrList int_list(const std::vector<int64_t>& v) {
  AttrList l;
  for (int64_t i : v) l.emplace_back(i);
  return l;
}
AttrList shape_list(const Shape& s) {
  AttrList l;
  for (const Dim& d : s) l.push_back(d.is_const() ? AttrValue(d.value()) : AttrValue(Name{d.symbol()}));
  return l;
}
AttrValue axis_or_none(std::optional<int64_t> axis) { return axis ? AttrValue(*axis) : AttrValue(Name{"none"}); }
}  // namespace

Value GraphBuilder::matmul(Value x, Value w, std::optional<DType> out_dtype, std::optional<Value> row_scale) {
  Attrs a;
  if (out_dtype) a.set("out_dtype", *out_dtype);
  std::vector<Value> operands = {x, w};
  if (row_scale) operands.push_back(*row_scale);
  return op(OpKind::Matmul, operands, a)[0];
}
Value GraphBuilder::add(Value a, Value b) { return op(OpKind::Add, {a, b})[0]; }
Value GraphBuilder::sub(Value a, Value b) { return op(OpKind::Sub, {a, b})[0]; }
Value GraphBuilder::mul(Value a, Value b) { return op(OpKind::Mul, {a, b})[0]; }
Value GraphBuilder::div(Value a, Value b) { return op(OpKind::Div, {a, b})[0]; }
Value GraphBuilder::silu(Value x) { return op(OpKind::Silu, {x})[0]; }
Value GraphBuilder::gelu(Value x, std::string approx) { return op(OpKind::Gelu, {x}, attrs_of({{"approx", approx}}))[0]; }
Value GraphBuilder::relu(Value x) { return op(OpKind::Relu, {x})[0]; }
Value GraphBuilder::exp(Value x) { return op(OpKind::Exp, {x})[0]; }
Value GraphBuilder::rsqrt(Value x) { return op(OpKind::Rsqrt, {x})[0]; }
Value GraphBuilder::cast(Value x, DType dtype) { return op(OpKind::Cast, {x}, attrs_of({{"dtype", dtype}}))[0]; }
Value GraphBuilder::rms_norm(Value x, Value w, double eps) {
  return op(OpKind::RmsNorm, {x, w}, attrs_of({{"eps", eps}}))[0];
}
Value GraphBuilder::rms_scale(Value x, double eps) { return op(OpKind::RmsScale, {x}, attrs_of({{"eps", eps}}))[0]; }
Value GraphBuilder::layer_norm(Value x, Value w, Value b, double eps) {
  return op(OpKind::LayerNorm, {x, w, b}, attrs_of({{"eps", eps}}))[0];
}
std::pair<Value, Value> GraphBuilder::rope_table(Value pos, int64_t dim, double theta) {
  auto r = op(OpKind::RopeTable, {pos}, attrs_of({{"dim", dim}, {"theta", theta}}));
  return {r[0], r[1]};
}
std::pair<Value, Value> GraphBuilder::rope_table(Value pos, int64_t dim, double theta, const attr::RopeScaling& scaling) {
  using K = attr::RopeScaling::Kind;
  Attrs a = attrs_of({{"dim", dim}, {"theta", theta}});
  switch (scaling.kind) {
    case K::None: break;
    case K::Linear:
      a.set("scaling", std::string("linear"));
      a.set("factor", scaling.factor);
      break;
    case K::Llama3:
      a.set("scaling", std::string("llama3"));
      a.set("factor", scaling.factor);
      a.set("low_freq_factor", scaling.low_freq_factor);
      a.set("high_freq_factor", scaling.high_freq_factor);
      a.set("original_max_pos", scaling.original_max_pos);
      break;
  }
  auto r = op(OpKind::RopeTable, {pos}, a);
  return {r[0], r[1]};
}
Value GraphBuilder::rope(Value x, Value cos, Value sin, std::string style) {
  return op(OpKind::Rope, {x, cos, sin}, attrs_of({{"style", style}}))[0];
}
Value GraphBuilder::softmax(Value x, int64_t axis) { return op(OpKind::Softmax, {x}, attrs_of({{"axis", axis}}))[0]; }
namespace {
std::vector<Value> attention_operands(Value q, Value k, Value v, std::optional<Value> cache_pos, std::optional<Value> block_table) {
  LJ_CHECK(!block_table || cache_pos, SourceLoc{}, "attention: a block_table needs cache_pos (the paged cache's positions)");
  std::vector<Value> operands = {q, k, v};
  if (cache_pos) operands.push_back(*cache_pos);
  if (block_table) operands.push_back(*block_table);
  return operands;
}
}  // namespace

Value GraphBuilder::attention(Value q, Value k, Value v, bool causal, std::optional<double> scale,
                              std::optional<Value> cache_pos, std::optional<Value> block_table,
                              std::optional<int64_t> window) {
  Attrs a = attrs_of({{"causal", causal}});
  if (scale) a.set("scale", *scale);
  if (window) a.set("window", *window);
  return op(OpKind::Attention, attention_operands(q, k, v, cache_pos, block_table), a)[0];
}
std::pair<Value, Value> GraphBuilder::attention_with_lse(Value q, Value k, Value v, bool causal, std::optional<double> scale,
                                                         std::optional<Value> cache_pos, std::optional<Value> block_table) {
  Attrs a = attrs_of({{"causal", causal}, {"lse", true}});
  if (scale) a.set("scale", *scale);
  const std::vector<Value> r = op(OpKind::Attention, attention_operands(q, k, v, cache_pos, block_table), a);
  return {r[0], r[1]};
}
Value GraphBuilder::kv_cache_write(Value cache, Value new_entries, Value pos, std::optional<Value> block_table) {
  std::vector<Value> operands = {cache, new_entries, pos};
  if (block_table) operands.push_back(*block_table);
  return op(OpKind::KvCacheWrite, operands)[0];
}
Value GraphBuilder::reshape(Value x, Shape shape) {
  return op(OpKind::Reshape, {x}, attrs_of({{"shape", shape_list(shape)}}))[0];
}
Value GraphBuilder::transpose(Value x, std::vector<int64_t> perm) {
  return op(OpKind::Transpose, {x}, attrs_of({{"perm", int_list(perm)}}))[0];
}
std::vector<Value> GraphBuilder::split(Value x, int64_t axis, std::vector<int64_t> sizes) {
  return op(OpKind::Split, {x}, attrs_of({{"axis", axis}, {"sizes", int_list(sizes)}}));
}
Value GraphBuilder::concat(const std::vector<Value>& xs, int64_t axis) {
  return op(OpKind::Concat, xs, attrs_of({{"axis", axis}}))[0];
}
Value GraphBuilder::reduce_sum(Value x, int64_t axis) { return op(OpKind::ReduceSum, {x}, attrs_of({{"axis", axis}}))[0]; }
Value GraphBuilder::embedding(Value table, Value ids) { return op(OpKind::Embedding, {table, ids})[0]; }
Value GraphBuilder::argmax(Value x) { return op(OpKind::Argmax, {x})[0]; }
Value GraphBuilder::reduce_max(Value x, int64_t axis) { return op(OpKind::ReduceMax, {x}, attrs_of({{"axis", axis}}))[0]; }
Value GraphBuilder::reduce_mean(Value x, int64_t axis) { return op(OpKind::ReduceMean, {x}, attrs_of({{"axis", axis}}))[0]; }
Value GraphBuilder::quantize(Value x, Value scale, DType dtype, std::optional<int64_t> axis) {
  return op(OpKind::Quantize, {x, scale}, attrs_of({{"dtype", dtype}, {"axis", axis_or_none(axis)}}))[0];
}
std::pair<Value, Value> GraphBuilder::dynamic_quantize(Value x, DType dtype, std::optional<int64_t> axis) {
  auto r = op(OpKind::Quantize, {x}, attrs_of({{"dtype", dtype}, {"axis", axis_or_none(axis)}}));
  return {r[0], r[1]};
}
Value GraphBuilder::dequantize(Value x, Value scale, DType dtype, std::optional<int64_t> axis) {
  return op(OpKind::Dequantize, {x, scale}, attrs_of({{"dtype", dtype}, {"axis", axis_or_none(axis)}}))[0];
}

Value GraphBuilder::dequantize_groups(Value x, Value scale, std::optional<Value> zero, DType dtype, int64_t group) {
  std::vector<Value> operands = {x, scale};
  if (zero) operands.push_back(*zero);
  return op(OpKind::Dequantize, operands, attrs_of({{"dtype", dtype}, {"axis", axis_or_none(std::nullopt)}, {"group", group}}))[0];
}

void GraphBuilder::declare_outputs(std::vector<TensorType> types, SourceLoc loc) {
  declared_outputs_ = std::move(types);
  declared_loc_ = std::move(loc);
}

Graph GraphBuilder::finish(const std::vector<Value>& outputs, SourceLoc loc) {
  LJ_CHECK(graph_ != nullptr, loc, "graph builder used after finish()");
  LJ_CHECK(!outputs.empty(), loc.known() ? loc : graph_->loc_, "graph @{} has no return: a graph must return at least one value",
           graph_->name_);
  for (size_t i = 0; i < outputs.size(); ++i) graph_->outputs_.push_back(check_operand(outputs[i], "return", static_cast<int>(i)));
  if (declared_outputs_) {
    const auto& want = *declared_outputs_;
    LJ_CHECK(want.size() == outputs.size(), loc, "@{} declares {} result type{} but returns {} value{}", graph_->name_,
             want.size(), want.size() == 1 ? "" : "s", outputs.size(), outputs.size() == 1 ? "" : "s");
    for (size_t i = 0; i < want.size(); ++i) {
      const TensorType& got = graph_->value(graph_->outputs_[i]).type;
      LJ_CHECK(got == want[i], loc, "@{} declares result {} of {} as {} but returns %{} of type {}", graph_->name_, i + 1,
               want.size(), want[i].str(), graph_->value(graph_->outputs_[i]).name, got.str());
    }
  }
  Graph g = std::move(*graph_);
  graph_.reset();
  return g;
}

}  // namespace lj
