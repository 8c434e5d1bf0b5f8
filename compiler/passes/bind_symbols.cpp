// bind_symbols: specialise a graph to concrete symbol values (`layerjit print --bind T=7`). The graph
// is rebuilt through the builder, so every op is verified again at the bound shapes.
#include "layerjit/builder.h"
#include "layerjit/passes.h"
#include "layerjit/check.h"

namespace lj {

namespace {
Dim bind_dim(const Dim& d, const Bindings& b) {
  if (d.is_const()) return d;
  if (auto v = b.get(d.symbol())) return Dim(*v);
  return d;
}

Shape bind_shape(const Shape& s, const Bindings& b) {
  Shape out;
  for (const Dim& d : s) out.push_back(bind_dim(d, b));
  return out;
}

// Shape-valued attributes (reshape's target shape) name symbols too.
Attrs bind_attrs(const Attrs& a, const Bindings& b) {
  Attrs out;
  for (const auto& [k, v] : a.items()) {
    const auto* list = std::get_if<AttrList>(&v.v);
    if (!list) {
      out.set(k, v);
      continue;
    }
    AttrList bound;
    for (const AttrValue& e : *list) {
      const auto* n = std::get_if<Name>(&e.v);
      auto val = n ? b.get(n->text) : std::nullopt;
      bound.push_back(val ? AttrValue(*val) : e);
    }
    out.set(k, AttrValue(std::move(bound)));
  }
  return out;
}
}  // namespace

Graph bind_symbols(const Graph& g, const Bindings& b) {
  for (const auto& [sym, val] : b.values)
    LJ_CHECK(val > 0, SourceLoc{}, "symbol {} bound to {}: symbol values must be positive", sym, val);
  GraphBuilder builder(g.name(), g.loc());
  std::vector<Value> map(g.values().size());
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    Shape s = bind_shape(v.type.shape, b);
    map[static_cast<size_t>(id)] = v.is_param ? builder.param(v.name, v.type.dtype, s, v.loc)
                                              : builder.input(v.name, v.type.dtype, s, v.loc);
  }
  for (const Node& n : g.nodes()) {
    std::vector<Value> operands;
    for (ValueId id : n.operands) operands.push_back(map[static_cast<size_t>(id)]);
    std::vector<std::string> names;
    for (ValueId id : n.results) names.push_back(g.value(id).name);
    auto results = builder.op(n.kind, operands, bind_attrs(n.attrs, b), n.loc, names);
    for (size_t i = 0; i < results.size(); ++i) map[static_cast<size_t>(n.results[i])] = results[i];
  }
  std::vector<Value> outs;
  for (ValueId id : g.outputs()) outs.push_back(map[static_cast<size_t>(id)]);
  return builder.finish(outs, g.loc());
}

}  // namespace lj
