// View layout analysis: offsets and strides of reshape/split results into their source buffers.
#include "compiler/fusion/tensor_layout.h"

#include "compiler/ir/identifier.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"

#include <algorithm>

#include <fmt/format.h>

namespace lj {

namespace {
bool is_const_one(const Dim& d) { return d.is_const() && d.value() == 1; }
}  // namespace

DimProduct dim_as_product(const Dim& d) {
  DimProduct p;
  if (d.is_const()) p.constant = d.value();
  else p.symbols.push_back(d.symbol());
  return p;
}

DimProduct multiply(const DimProduct& a, const DimProduct& b) {
  DimProduct p;
  p.overflow = a.overflow || b.overflow || __builtin_mul_overflow(a.constant, b.constant, &p.constant);
  p.symbols = a.symbols;
  p.symbols.insert(p.symbols.end(), b.symbols.begin(), b.symbols.end());
  std::sort(p.symbols.begin(), p.symbols.end());
  return p;
}

// Offsets are sums of products in general; the views we support keep them single products, so an
// offset only ever adds a constant multiple of a stride with the same symbols (or to a zero offset).
DimProduct add_constant_multiple(const DimProduct& base, const DimProduct& term, int64_t times) {
  if (times == 0) return base;
  DimProduct t = term;
  t.constant *= times;
  if (base.constant == 0) return t;
  LJ_CHECK(base.symbols == term.symbols, SourceLoc{},
           "view offset {} + {} is not a single product: split a symbolic axis into a copy instead", base.str(), t.str());
  DimProduct out = base;
  out.constant += t.constant;
  return out;
}

std::vector<DimProduct> dense_strides(const Shape& s) {
  std::vector<DimProduct> st(s.size());
  DimProduct run;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = run;
    run = multiply(run, dim_as_product(s[i]));
  }
  return st;
}

std::string symbol_ident(std::string_view symbol) { return "s_" + cpp_identifier(symbol); }

std::string product_expr(const DimProduct& p) {
  if (p.symbols.empty()) return fmt::format("{}LL", p.constant);
  std::string out;
  if (p.constant != 1) out = fmt::format("{}LL", p.constant);
  for (const auto& s : p.symbols) out += (out.empty() ? "" : " * ") + symbol_ident(s);
  return p.symbols.size() + (p.constant != 1) > 1 ? "(" + out + ")" : out;
}

namespace {

// Reshape of a strided view: match groups of old and new dims with equal products (symbols must
// match one to one; size-1 dims attach anywhere); within a group the old dims must be contiguous
// with respect to each other, and the new dims get strides from the group's innermost stride.
std::vector<DimProduct> reshape_strides(const Shape& from, const std::vector<DimProduct>& from_strides, const Shape& to,
                                        const std::string& name) {
  std::vector<DimProduct> out(to.size());
  int i = static_cast<int>(from.size()) - 1;
  int j = static_cast<int>(to.size()) - 1;
  auto fail = [&] {
    throw UserError(fmt::format("reshape %{} of a strided view {} to {} needs a copy, which views cannot express", name,
                                shape_str(from), shape_str(to)));
  };
  while (j >= 0) {
    while (i >= 0 && is_const_one(from[static_cast<size_t>(i)]) && !(j >= 0 && is_const_one(to[static_cast<size_t>(j)]))) --i;
    if (is_const_one(to[static_cast<size_t>(j)])) {
      out[static_cast<size_t>(j)] = i >= 0 ? multiply(from_strides[static_cast<size_t>(i)], dim_as_product(from[static_cast<size_t>(i)]))
                                           : DimProduct{};
      if (i >= 0 && is_const_one(from[static_cast<size_t>(i)])) --i;
      --j;
      continue;
    }
    if (i < 0) fail();
    const Dim& f = from[static_cast<size_t>(i)];
    const Dim& t = to[static_cast<size_t>(j)];
    if (f.is_symbol() || t.is_symbol()) {
      if (!(f == t)) fail();
      out[static_cast<size_t>(j)] = from_strides[static_cast<size_t>(i)];
      --i;
      --j;
      continue;
    }
    // Constant group: grow whichever side has the smaller product until they match.
    int64_t pf = f.value(), pt = t.value();
    int i0 = i, j0 = j;
    while (pf != pt) {
      if (pf < pt) {
        --i;
        if (i < 0 || from[static_cast<size_t>(i)].is_symbol()) fail();
        const DimProduct want = multiply(from_strides[static_cast<size_t>(i + 1)], dim_as_product(from[static_cast<size_t>(i + 1)]));
        if (!(from_strides[static_cast<size_t>(i)] == want)) fail();  // not contiguous
        pf *= from[static_cast<size_t>(i)].value();
      } else {
        --j;
        if (j < 0 || to[static_cast<size_t>(j)].is_symbol()) fail();
        pt *= to[static_cast<size_t>(j)].value();
      }
    }
    DimProduct run = from_strides[static_cast<size_t>(i0)];
    for (int k = j0; k >= j; --k) {
      out[static_cast<size_t>(k)] = run;
      run = multiply(run, dim_as_product(to[static_cast<size_t>(k)]));
    }
    --i;
    --j;
  }
  while (i >= 0) {
    if (!is_const_one(from[static_cast<size_t>(i)])) fail();
    --i;
  }
  return out;
}

}  // namespace

ValueId aliased_operand(const Graph& g, ValueId v, const std::vector<ValueId>& dense) {
  const NodeId p = g.value(v).producer;
  if (p < 0 || std::find(dense.begin(), dense.end(), v) != dense.end()) return -1;
  const OpKind k = g.node(p).kind;
  return op_class(k) == OpClass::View || k == OpKind::KvCacheWrite ? g.node(p).operands[0] : -1;
}

ValueId memory_owner(const Graph& g, ValueId v, const std::vector<ValueId>& dense) {
  for (ValueId a = aliased_operand(g, v, dense); a >= 0; a = aliased_operand(g, v, dense)) v = a;
  return v;
}

std::vector<TensorLayout> compute_layouts(const Graph& g, const std::vector<ValueId>& dense) {
  std::vector<TensorLayout> out(g.values().size());
  for (ValueId id = 0; id < static_cast<ValueId>(g.values().size()); ++id) {
    const ValueInfo& v = g.value(id);
    TensorLayout& l = out[static_cast<size_t>(id)];
    l.offset = DimProduct{0, {}, false};
    l.strides = dense_strides(v.type.shape);
    l.buffer = id;
    if (aliased_operand(g, id, dense) < 0) continue;
    const Node& n = g.node(v.producer);
    if (n.kind == OpKind::Split) {
      const TensorLayout& src = out[static_cast<size_t>(n.operands[0])];
      const int rank = g.value(n.operands[0]).type.rank();
      int64_t axis = attr::axis(n.attrs);
      if (axis < 0) axis += rank;
      auto sizes = attr::sizes(n.attrs);
      int64_t start = 0;
      for (int r = 0; r < v.result_index; ++r) start += sizes[static_cast<size_t>(r)];
      l.buffer = src.buffer;
      l.strides = src.strides;
      l.offset = add_constant_multiple(src.offset, src.strides[static_cast<size_t>(axis)], start);
    } else if (n.kind == OpKind::KvCacheWrite) {
      l = out[static_cast<size_t>(n.operands[0])];
    } else if (n.kind == OpKind::Reshape) {
      const TensorLayout& src = out[static_cast<size_t>(n.operands[0])];
      l.buffer = src.buffer;
      l.offset = src.offset;
      l.strides = reshape_strides(g.value(n.operands[0]).type.shape, src.strides, v.type.shape, v.name);
    }
  }
  return out;
}

std::vector<TensorLayout> plan_layouts(const Graph& g, const FusionPlan& plan) {
  std::vector<TensorLayout> out = compute_layouts(g, plan.dense_views);
  for (const OutputView& ov : plan.output_views) {
    if (ov.copied_by < 0) continue;
    TensorLayout& l = out[static_cast<size_t>(ov.value)];
    l.buffer = ov.value;
    l.offset = DimProduct{0, {}, false};
    l.strides = dense_strides(g.value(ov.value).type.shape);
  }
  return out;
}

}  // namespace lj
