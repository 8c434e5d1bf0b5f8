// reference_op: the per-op reference semantics behind one switch over every OpKind.
//
// Before dispatching it re-checks the node as the builder does: attributes against the schema
// (defaults filled, symbols in shape attributes bound) and operand dtypes and shapes through the
// shape rules, now with the concrete shapes of the host tensors. The results of those rules must
// equal the caller's result types resolved with the bindings. So a test that calls reference_op
// directly with an inconsistent tensor gets the same UserError a graph would, and the family
// functions can rely on every shape they index.
#include <fmt/format.h>

#include "layerjit/error.h"
#include "ops/op_schema.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"
#include "ops/rope_frequencies.h"

namespace lj {

namespace {

// Shape-valued attributes (reshape's target) may name symbols; give them their bound values.
Attrs bind_list_attrs(const Attrs& given, const Bindings& bindings) {
  Attrs out;
  for (const auto& [name, value] : given.items()) {
    const auto* list = std::get_if<AttrList>(&value.v);
    if (!list) {
      out.set(name, value);
      continue;
    }
    AttrList bound;
    for (const AttrValue& e : *list) {
      const auto* sym = std::get_if<Name>(&e.v);
      bound.push_back(sym ? AttrValue(resolve(Dim::sym(sym->text), bindings)) : e);
    }
    out.set(name, AttrValue(std::move(bound)));
  }
  return out;
}

TensorType concrete_type(const HostTensor& t) {
  TensorType tt{t.dtype, {}};
  for (int64_t d : t.shape) tt.shape.emplace_back(d);
  return tt;
}

TensorType resolved_type(const TensorType& t, const Bindings& bindings) {
  TensorType out{t.dtype, {}};
  for (const Dim& d : t.shape) out.shape.emplace_back(resolve(d, bindings));
  return out;
}

ref::RopeStyle rope_style(const Attrs& attrs) {
  return attr::rope_style(attrs) == attr::RopeStyle::Half ? ref::RopeStyle::Half : ref::RopeStyle::Interleaved;
}

ref::UnaryOp gelu_kind(const Attrs& attrs) {
  return attr::gelu_approx(attrs) == attr::GeluApprox::Tanh ? ref::UnaryOp::GeluTanh : ref::UnaryOp::GeluErf;
}

}  // namespace

std::vector<HostTensor> reference_op(OpKind kind, const std::vector<const HostTensor*>& operands,
                                     const Attrs& given_attrs, const std::vector<TensorType>& result_types,
                                     const Bindings& bindings) {
  const Attrs attrs = check_attrs(kind, bind_list_attrs(given_attrs, bindings));
  std::vector<TensorType> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    const HostTensor* t = operands[i];
    LJ_ASSERT(t != nullptr, "{}: operand {} is null", op_name(kind), i);
    LJ_CHECK(t->numel() == lj::numel(t->shape), SourceLoc{}, "{}: {} holds {} values but its shape {} needs {}",
             op_name(kind), operand_name(kind, static_cast<int>(i)), t->numel(), concrete_type(*t).str(),
             lj::numel(t->shape));
    types.push_back(concrete_type(*t));
  }
  const std::vector<TensorType> out = infer_types(kind, types, attrs);
  LJ_CHECK(result_types.size() == out.size(), SourceLoc{}, "{}: given {} result types but the op has {} results",
           op_name(kind), result_types.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const TensorType want = resolved_type(result_types[i], bindings);
    LJ_CHECK(want == out[i], SourceLoc{}, "{}: result {} should be {} (given {}), but the operands give {}",
             op_name(kind), i, want.str(), result_types[i].str(), out[i].str());
  }

  auto x = [&](size_t i) -> const HostTensor& { return *operands[i]; };
  switch (kind) {
    case OpKind::Matmul: return {ref::matmul(x(0), x(1), operands.size() == 3 ? operands[2] : nullptr, out[0])};
    case OpKind::Add: return {ref::binary(ref::BinaryOp::Add, x(0), x(1), out[0])};
    case OpKind::Sub: return {ref::binary(ref::BinaryOp::Sub, x(0), x(1), out[0])};
    case OpKind::Mul: return {ref::binary(ref::BinaryOp::Mul, x(0), x(1), out[0])};
    case OpKind::Div: return {ref::binary(ref::BinaryOp::Div, x(0), x(1), out[0])};
    case OpKind::Silu: return {ref::unary(ref::UnaryOp::Silu, x(0), out[0])};
    case OpKind::Gelu: return {ref::unary(gelu_kind(attrs), x(0), out[0])};
    case OpKind::Relu: return {ref::unary(ref::UnaryOp::Relu, x(0), out[0])};
    case OpKind::Exp: return {ref::unary(ref::UnaryOp::Exp, x(0), out[0])};
    case OpKind::Rsqrt: return {ref::unary(ref::UnaryOp::Rsqrt, x(0), out[0])};
    case OpKind::Cast: return {ref::cast(x(0), out[0])};
    case OpKind::RmsNorm: return {ref::rms_norm(x(0), x(1), attr::eps(attrs), out[0])};
    case OpKind::RmsScale: return {ref::rms_scale(x(0), attr::eps(attrs), out[0])};
    case OpKind::LayerNorm: return {ref::layer_norm(x(0), x(1), x(2), attr::eps(attrs), out[0])};
    case OpKind::RopeTable:
      return ref::rope_table(x(0), rope_inv_freq(attr::rope_dim(attrs), attr::rope_theta(attrs), attr::rope_scaling(attrs)), out);
    case OpKind::Rope: return {ref::rope(x(0), x(1), x(2), rope_style(attrs), out[0])};
    case OpKind::Softmax: return {ref::softmax(x(0), attr::axis(attrs), out[0])};
    case OpKind::Attention:
      return ref::attention(x(0), x(1), x(2), operands.size() >= 4 ? operands[3] : nullptr, operands.size() == 5 ? operands[4] : nullptr,
                            attr::causal(attrs), attr::scale(attrs), attr::window(attrs), out);
    case OpKind::KvCacheWrite:
      return {ref::kv_cache_write(x(0), x(1), x(2), operands.size() == 4 ? operands[3] : nullptr, out[0])};
    case OpKind::Reshape: return {ref::reshape(x(0), out[0])};
    case OpKind::Transpose: return {ref::transpose(x(0), attr::perm(attrs), out[0])};
    case OpKind::Split: return ref::split(x(0), attr::axis(attrs), out);
    case OpKind::Concat: return {ref::concat(operands, attr::axis(attrs), out[0])};
    case OpKind::ReduceSum: return {ref::reduce(ref::ReduceOp::Sum, x(0), attr::axis(attrs), out[0])};
    case OpKind::ReduceMax: return {ref::reduce(ref::ReduceOp::Max, x(0), attr::axis(attrs), out[0])};
    case OpKind::ReduceMean: return {ref::reduce(ref::ReduceOp::Mean, x(0), attr::axis(attrs), out[0])};
    case OpKind::Quantize:
      if (operands.size() == 1) return ref::quantize_dynamic(x(0), attr::scale_axis(attrs), out);
      return {ref::quantize(x(0), x(1), attr::scale_axis(attrs), out[0])};
    case OpKind::Dequantize:
      if (const std::optional<int64_t> g = attr::group(attrs))
        return {ref::dequantize_groups(x(0), x(1), operands.size() == 3 ? operands[2] : nullptr, *g, out[0])};
      return {ref::dequantize(x(0), x(1), attr::scale_axis(attrs), out[0])};
    case OpKind::Embedding: return {ref::embedding(x(0), x(1), out[0])};
    case OpKind::Argmax: return {ref::argmax(x(0), out[0])};
    case OpKind::AllReduce: {
      // One rank alone: the sum is its own x. Over more, the other ranks' partials are needed:
      // run_reference_ranks runs the rank graphs together and sums them there.
      const int64_t ranks = attrs.has("ranks") ? attrs.get_int("ranks") : 1;
      LJ_CHECK(ranks == 1, SourceLoc{}, "all_reduce over {} ranks needs every rank's partial sum: run the rank graphs with "
               "run_reference_ranks (layerjit/reference.h)", ranks);
      return {ref::cast(x(0), out[0])};
    }
  }
  LJ_ASSERT(false, "reference_op: no reference for op kind {}", static_cast<int>(kind));
  __builtin_unreachable();
}

}  // namespace lj
