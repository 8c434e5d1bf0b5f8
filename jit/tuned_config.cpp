#include "jit/tuned_config.h"

#include <fmt/format.h>

#include "codegen/kernel_family.h"
#include "compiler/fusion/tensor_layout.h"
#include "layerjit/error.h"

namespace lj::jit {

Bindings bucket(const Bindings& b) {
  Bindings out;
  for (const auto& [name, value] : b.values) {
    int64_t top = 1;
    while (top < value) top *= 2;
    out.set(name, top);
  }
  return out;
}

std::string bucket_text(const Graph& g, const Bindings& bucketed) {
  std::string out;
  for (const std::string& s : g.symbols())
    if (auto v = bucketed.get(s)) out += fmt::format("{}{}<={}", out.empty() ? "" : ",", s, *v);
  return out;
}

std::string group_signature(const Graph& g, const FusionGroup& grp) {
  const std::vector<TensorLayout> layouts = compute_layouts(g, grp.dense_views);
  std::string out = fmt::format("{}:", group_kind_name(grp.kind));
  for (NodeId id : grp.nodes) {
    const Node& n = g.node(id);
    std::string ops, res;
    for (ValueId v : n.operands) ops += (ops.empty() ? "" : ", ") + g.value(v).type.str();
    for (ValueId v : n.results) res += (res.empty() ? "" : ", ") + g.value(v).type.str();
    out += fmt::format(" {}({}) -> {};", op_name(n.kind), ops, res);
  }
  // Views change how a kernel loads (alignment, strides): part of the problem.
  for (ValueId v : grp.inputs) {
    const TensorLayout& l = layouts[static_cast<size_t>(v)];
    std::string strides;
    for (const DimProduct& s : l.strides) strides += (strides.empty() ? "" : ",") + s.str();
    out += fmt::format(" in@{}[{}]", l.offset.str(), strides);
  }
  return out;
}

cache::TuningKey tuning_key(const JitTarget& target, const Graph& g, const FusionGroup& grp, const Bindings& bucketed) {
  cache::TuningKey key;
  key.group_signature = group_signature(g, grp);
  key.symbol_bucket = bucket_text(g, bucketed);
  key.arch = target.target.name();
  key.driver_version = target.driver_version;
  return key;
}

std::string apply_config(const Graph& g, const FusionGroup& grp, const std::string& config, EmitOptions& eo) {
  const KernelFamily* family = kernel_family(grp.kind);
  if (!family) return fmt::format("{} groups have no kernel generator", group_kind_name(grp.kind));
  std::string why;
  std::optional<KernelConfig> c = family->parse_config(config, &why);
  if (!c) return why;
  EmitOptions trial = eo;
  c->apply(trial);
  why = family->reject_reason(g, grp, trial);
  if (!why.empty()) return why;
  eo = trial;
  return "";
}

}  // namespace lj::jit
