// GraphBuilder: the only way to make IR nodes. Each op is verified (arity, dtypes, shapes,
// attributes) and its result types inferred when it is created; misuse throws a UserError that
// names the op and the operand.
//
//   lj::GraphBuilder b("mlp");
//   auto x = b.input("x", lj::DType::BF16, {lj::Dim::sym("T"), 4096});
//   auto w = b.param("w", lj::DType::BF16, {14336, 4096});
//   auto y = b.silu(b.matmul(x, w)).named("y");
//   lj::Graph g = b.finish({y});
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/op_attrs.h"

namespace lj {

class GraphBuilder;

/// Handle to a value under construction. Cheap to copy.
class Value {
 public:
  Value() = default;
  ValueId id() const { return id_; }
  // By value: the graph's value table grows as ops are added, so references would dangle.
  TensorType type() const;
  std::string name() const;
  /// Renames the value (names are labels; they must be unique in the graph). Returns *this.
  Value named(std::string name) const;
  bool valid() const { return builder_ != nullptr; }

 private:
  friend class GraphBuilder;
  Value(GraphBuilder* b, ValueId id) : builder_(b), id_(id) {}
  GraphBuilder* builder_ = nullptr;
  ValueId id_ = -1;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name, SourceLoc loc = {});
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  // Graph inputs. `param` marks weights (constant across calls).
  Value input(std::string name, DType dtype, Shape shape, SourceLoc loc = {});
  Value param(std::string name, DType dtype, Shape shape, SourceLoc loc = {});

  /// Generic op creation (the parser uses this): verifies operand count, attributes (filling
  /// defaults), dtypes and shapes, and infers result types. Results get `result_names` when given
  /// (their count must match the op's results), else fresh names.
  std::vector<Value> op(OpKind kind, const std::vector<Value>& operands, Attrs attrs = {},
                        SourceLoc loc = {}, const std::vector<std::string>& result_names = {});

  // Typed helpers, one per op.
  /// y[..., n] = sum_k x[..., k] * w[n, k]; with `row_scale` (f32, x's shape without its last dim)
  /// each row's fp32 sums are multiplied by its factor before the one rounding to the output dtype.
  Value matmul(Value x, Value w, std::optional<DType> out_dtype = {}, std::optional<Value> row_scale = {});
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value silu(Value x);
  Value gelu(Value x, std::string approx = "tanh");
  Value relu(Value x);
  Value exp(Value x);
  Value rsqrt(Value x);
  Value cast(Value x, DType dtype);
  Value rms_norm(Value x, Value w, double eps = 1e-5);
  /// f32[x's shape without its last dim]: 1 / sqrt(mean(x^2) + eps) over the last dim, the factor
  /// rms_norm applies to each row (the norm folding pass makes it; see docs/ir.md).
  Value rms_scale(Value x, double eps = 1e-5);
  Value layer_norm(Value x, Value w, Value b, double eps = 1e-5);
  /// cos, sin tables [N, dim/2] (f32) for integer positions pos [N].
  std::pair<Value, Value> rope_table(Value pos, int64_t dim, double theta = 10000.0);
  /// The same with scaled frequencies (linear, or Llama-3.1's bands: ops/rope_frequencies.h).
  std::pair<Value, Value> rope_table(Value pos, int64_t dim, double theta, const attr::RopeScaling& scaling);
  Value rope(Value x, Value cos, Value sin, std::string style = "half");
  Value softmax(Value x, int64_t axis = -1);
  /// q [T, Hq, D], k/v [S, Hkv, D]; or batched q [B, T, Hq, D], k/v [B, S, Hkv, D] with an optional
  /// cache_pos i32[B]: query t of sequence b sits at position cache_pos[b] + t and sees keys at
  /// positions < cache_pos[b] + T (and, if causal, <= its own). With a block_table i32[B, pages], k/v
  /// are page pools [P, page, Hkv, D] (vLLM-style paged caches): key j of sequence b is row j % page
  /// of pool page block_table[b, j / page]; cache_pos is then required. A `window` W (causal only)
  /// limits each query to the keys at its own and the W - 1 previous positions (sliding-window
  /// attention).
  Value attention(Value q, Value k, Value v, bool causal, std::optional<double> scale = {},
                  std::optional<Value> cache_pos = {}, std::optional<Value> block_table = {},
                  std::optional<int64_t> window = {});
  /// attention {lse = true}: the output and the log-sum-exp of each query row's scaled scores
  /// (natural log, f32 [.., T, Hq]; -inf where a row sees no key), what split combinations merge by.
  std::pair<Value, Value> attention_with_lse(Value q, Value k, Value v, bool causal, std::optional<double> scale = {},
                                             std::optional<Value> cache_pos = {}, std::optional<Value> block_table = {});
  /// cache [B, C, H, D] (or a page pool [P, page, H, D] with block_table [B, pages]); new [B, H, D]
  /// or [B, T, H, D] written at positions pos[b] (+ t), in place.
  Value kv_cache_write(Value cache, Value new_entries, Value pos, std::optional<Value> block_table = {});
  Value reshape(Value x, Shape shape);
  Value transpose(Value x, std::vector<int64_t> perm);
  std::vector<Value> split(Value x, int64_t axis, std::vector<int64_t> sizes);
  Value concat(const std::vector<Value>& xs, int64_t axis);
  Value reduce_sum(Value x, int64_t axis);
  Value reduce_max(Value x, int64_t axis);
  Value reduce_mean(Value x, int64_t axis);
  /// scale: f32[] (per tensor) or f32[n] along `axis` (per channel / per token).
  Value quantize(Value x, Value scale, DType dtype, std::optional<int64_t> axis = {});
  /// Dynamic quantization: {codes, scale}, the f32 scale computed from the largest magnitude per
  /// index of `axis` (per token: axis 0 of [T, D]) or of the whole tensor (docs/ir.md).
  std::pair<Value, Value> dynamic_quantize(Value x, DType dtype, std::optional<int64_t> axis = {});
  Value dequantize(Value x, Value scale, DType dtype, std::optional<int64_t> axis = {});
  /// Group-wise (4-bit and i8 weights): `group` consecutive elements of the last axis share
  /// scale[.., k / group] and, where given, zero[.., k / group] (docs/ir.md).
  Value dequantize_groups(Value x, Value scale, std::optional<Value> zero, DType dtype, int64_t group);
  /// Rows of table [V, H] picked by ids (i32, any shape): ids.shape + [H] (token embeddings).
  Value embedding(Value table, Value ids);
  /// i32[x's shape without its last dim]: the index of each row's first largest element.
  Value argmax(Value x);

  /// Declares the result types (from a text file's `-> type, ...`); finish() checks them.
  void declare_outputs(std::vector<TensorType> types, SourceLoc loc = {});
  /// Completes the graph. Throws if there is no output. The builder is spent afterwards.
  Graph finish(const std::vector<Value>& outputs, SourceLoc loc = {});

  // Used by Value.
  const ValueInfo& info(ValueId id) const;
  void rename(ValueId id, std::string name);
  /// Looks a value up by name (the parser resolves %names through this).
  std::optional<Value> lookup(std::string_view name);

 private:
  Value add_input(std::string name, DType dtype, Shape shape, bool is_param, SourceLoc loc);
  ValueId check_operand(const Value& v, std::string_view op, int index) const;
  std::string fresh_name();

  std::unique_ptr<Graph> graph_;
  std::unordered_map<std::string, ValueId> names_;  // value name -> id: parsing stays linear
  /// The C++ identifier each value and each symbol name becomes in generated kernels -> that name
  /// (two names of one identifier are refused: claim_ident).
  std::unordered_map<std::string, std::string> value_idents_, symbol_idents_;
  void check_ident(const std::unordered_map<std::string, std::string>& idents, const std::string& name, const char* what,
                   const SourceLoc& loc) const;
  int next_temp_ = 0;
  std::optional<std::vector<TensorType>> declared_outputs_;
  SourceLoc declared_loc_;
};

}  // namespace lj
