// Fusion legality predicates: op classes, use maps, cycle checks, iteration spaces.
#include "compiler/fusion/legality.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace lj {

bool is_view(OpKind k) { return op_class(k) == OpClass::View; }

bool is_elementwise(OpKind k) { return op_class(k) == OpClass::Elementwise; }

bool is_row_reduction(OpKind k) { return op_class(k) == OpClass::RowReduction; }

bool is_dynamic_quantize(const Node& n) { return n.kind == OpKind::Quantize && n.operands.size() == 1; }

bool is_group_dequantize(const Node& n) { return n.kind == OpKind::Dequantize && n.attrs.has("group"); }

bool is_pointwise(const Node& n) { return is_elementwise(n.kind) && !is_dynamic_quantize(n) && !is_group_dequantize(n); }

std::string weight_dequant_refusal(const Graph& g, const Node& n) {
  if (!is_group_dequantize(n)) return "not a group-wise dequantize";
  for (ValueId v : n.operands)
    if (!g.value(v).is_param || g.value(v).producer >= 0) return fmt::format("%{} is not a param (the kernel reads it as stored)", g.value(v).name);
  const TensorType& q = g.value(n.operands[0]).type;
  if (!is_packed(q.dtype)) return fmt::format("its codes are {}, not packed 4-bit", dtype_name(q.dtype));
  if (q.rank() != 2 || !q.shape[0].is_const() || !q.shape[1].is_const()) return fmt::format("its codes are {}, not a constant [N, K]", q.str());
  const int64_t k = q.shape[1].value(), group = *attr::group(n.attrs);
  if (k % 32 != 0 || group % 32 != 0)
    return fmt::format("K = {} and groups of {} must be multiples of 32 (one 16-byte load of codes per group)", k, group);
  const DType out = g.value(n.results[0]).type.dtype;
  if (out != DType::BF16 && out != DType::F16) return fmt::format("it makes {}, not bf16 or f16 (the tensor cores' operand)", dtype_name(out));
  return "";
}

bool is_row_quantize(const Graph& g, const Node& n) {
  if (!is_dynamic_quantize(n) || g.value(n.operands[0]).type.rank() != 2) return false;
  const std::optional<int64_t> axis = attr::scale_axis(n.attrs);
  return axis && (*axis == 0 || *axis == -2);
}

bool is_decode_attention(const Graph& g, const Node& n) {
  if (n.kind != OpKind::Attention) return false;
  const TensorType& qt = g.value(n.operands[0]).type;
  const TensorType& kt = g.value(n.operands[1]).type;
  const Dim& tok = qt.shape[static_cast<size_t>(qt.rank() - 3)];
  const int64_t group = qt.shape[static_cast<size_t>(qt.rank() - 2)].value() / kt.shape[static_cast<size_t>(kt.rank() - 2)].value();
  return tok.is_const() && tok.value() * group <= 16;
}

std::string cache_prefetch_refusal(const Graph& g, const UseMap& uses, const Node& n) {
  if (!is_decode_attention(g, n)) return "not decode attention";
  if (n.operands.size() < 4) return "no cache positions: the keys are not a cache";
  if (n.operands.size() > 4) return "the cache is paged (another sequence's write may land in a page this one reads)";
  const ValueId pos = n.operands[3];
  if (g.value(pos).producer >= 0) return fmt::format("its positions %{} are computed in the graph", g.value(pos).name);
  for (ValueId kv : {n.operands[1], n.operands[2]}) {
    const NodeId w = g.value(kv).producer;
    if (w < 0) {  // a cache no kernel of the graph writes, unless in place through another value
      for (NodeId u : uses.users(kv))
        if (g.node(u).kind == OpKind::KvCacheWrite && g.node(u).operands[0] == kv)
          return fmt::format("%{} is also written in place by a cache write", g.value(kv).name);
      continue;
    }
    const Node& wn = g.node(w);
    if (wn.kind != OpKind::KvCacheWrite) return fmt::format("%{} is not a cache or a cache write", g.value(kv).name);
    if (wn.operands.size() > 3) return fmt::format("%{} is a paged cache write", g.value(kv).name);
    if (wn.operands[2] != pos) return fmt::format("%{} is written at positions other than the attention's", g.value(kv).name);
    const ValueId cache = wn.operands[0];
    if (g.value(cache).producer >= 0) return fmt::format("the cache %{} is computed in the graph", g.value(cache).name);
    if (uses.users(cache).size() != 1) return fmt::format("the cache %{} has other readers or writers", g.value(cache).name);
  }
  return "";
}

UseMap::UseMap(const Graph& g) : users_(g.values().size()), is_output_(g.values().size(), false) {
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes().size()); ++n) {
    for (ValueId v : g.node(n).operands) {
      auto& u = users_[static_cast<size_t>(v)];
      if (u.empty() || u.back() != n) u.push_back(n);
    }
  }
  for (ValueId v : g.outputs()) is_output_[static_cast<size_t>(v)] = true;
}

bool creates_cycle(const Graph& g, const UseMap& uses, const std::function<bool(NodeId)>& member, NodeId lo, NodeId hi,
                   NodeId candidate) {
  lo = std::min(lo, candidate), hi = std::max(hi, candidate);
  // In the would-be group: a member, the candidate, or a view (through views) of what one of them makes.
  auto inside = [&](NodeId n) {
    for (;;) {
      if (n == candidate || member(n)) return true;
      const Node& node = g.node(n);
      if (!is_view(node.kind)) return false;
      n = g.value(node.operands[0]).producer;
      if (n < 0) return false;
    }
  };
  std::unordered_set<NodeId> seen;
  std::vector<NodeId> stack;
  // Forward: the outside nodes the candidate's results reach (through its views) ...
  std::vector<NodeId> from{candidate};
  while (!from.empty()) {
    const NodeId n = from.back();
    from.pop_back();
    for (ValueId r : g.node(n).results)
      for (NodeId u : uses.users(r)) {
        if (u > hi || !seen.insert(u).second) continue;  // past every member: cannot lead back
        if (!inside(u)) {
          stack.push_back(u);
        } else if (is_view(g.node(u).kind)) {
          from.push_back(u);  // an alias: its readers read the candidate's result
        }
      }
  }
  // ... and whether any path from them comes back in.
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId r : g.node(n).results)
      for (NodeId u : uses.users(r)) {
        if (u > hi) continue;
        if (inside(u)) return true;
        if (seen.insert(u).second) stack.push_back(u);
      }
  }
  // Backward: the outside producers of the candidate's operands, and whether a member made them.
  seen.clear();
  for (ValueId v : g.node(candidate).operands) {
    const NodeId p = g.value(v).producer;
    if (p >= 0 && p >= lo && !inside(p) && seen.insert(p).second) stack.push_back(p);
  }
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.node(n).operands) {
      const NodeId p = g.value(v).producer;
      if (p < 0 || p < lo) continue;  // before every member: no member reaches it
      if (inside(p)) return true;
      if (seen.insert(p).second) stack.push_back(p);
    }
  }
  return false;
}

bool creates_cycle(const Graph& g, const UseMap& uses, const std::vector<NodeId>& group, NodeId candidate) {
  if (group.empty()) return false;
  const std::unordered_set<NodeId> in(group.begin(), group.end());
  return creates_cycle(
      g, uses, [&](NodeId n) { return in.count(n) > 0; }, *std::min_element(group.begin(), group.end()),
      *std::max_element(group.begin(), group.end()), candidate);
}

bool same_iteration_space(const Graph& g, NodeId a, NodeId b) {
  const TensorType& ta = g.value(g.node(a).results[0]).type;
  const TensorType& tb = g.value(g.node(b).results[0]).type;
  return ta.shape == tb.shape;
}

bool smaller_at_every_size(const Graph& g, ValueId part, ValueId whole) {
  const DimProduct p = dim_product(g.value(part).type.shape), w = dim_product(g.value(whole).type.shape);
  if (p.overflow || w.overflow || p.constant >= w.constant) return false;
  // Both symbol lists are sorted (with repeats): `whole` must contain every symbol of `part`.
  return std::includes(w.symbols.begin(), w.symbols.end(), p.symbols.begin(), p.symbols.end());
}

bool copies_rows(GroupKind k) {
  switch (k) {
    case GroupKind::RopeKvWrite:
    case GroupKind::RopeTable: return true;
    case GroupKind::Elementwise:
    case GroupKind::RowReduce:
    case GroupKind::Matmul:
    case GroupKind::Attention:
    case GroupKind::Reduce:
    case GroupKind::Copy:
    case GroupKind::Gather:
    case GroupKind::AllReduce: return false;
  }
  LJ_ASSERT(false, "unhandled group kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

Dim rope_group_rows(const Graph& g, const FusionGroup& grp) {
  LJ_ASSERT((grp.kind == GroupKind::RopeKvWrite || grp.kind == GroupKind::RopeTable) && !grp.nodes.empty(), "rope_group_rows of a {} group",
            group_kind_name(grp.kind));
  // Every node of the group shares the rows (emit_rope_kv_write checks it), so the first one says.
  const Node& n = g.node(grp.nodes.front());
  if (n.kind == OpKind::RopeTable || n.kind == OpKind::Rope || n.kind == OpKind::RmsNorm)
    return g.value(n.operands[0]).type.shape[0];  // positions, x, a head norm's x
  LJ_ASSERT(n.kind == OpKind::KvCacheWrite, "a rope_kv_write group starting with {}", op_name(n.kind));
  return g.value(n.operands[2]).type.shape[0];  // positions [B]
}

bool fits_row_copy(const Graph& g, const FusionGroup& grp, ValueId v) {
  if (!copies_rows(grp.kind)) return false;
  const Shape& s = g.value(v).type.shape;
  if (s.size() != 2 && s.size() != 3) return false;
  for (size_t k = 1; k < s.size(); ++k)
    if (!s[k].is_const()) return false;
  return s[0] == rope_group_rows(g, grp);
}

std::vector<HeadPiece> head_pieces(const Graph& g, const UseMap& uses, ValueId y) {
  const TensorType& yt = g.value(y).type;
  if (yt.rank() != 2 || !yt.shape[1].is_const() || uses.is_output(y)) return {};
  const std::vector<NodeId>& users = uses.users(y);
  if (users.size() != 1 || g.node(users[0]).kind != OpKind::Split) return {};
  const Node& split = g.node(users[0]);
  if (attr::axis(split.attrs) != 1 && attr::axis(split.attrs) != -1) return {};
  std::vector<HeadPiece> out;
  int64_t c0 = 0;
  for (ValueId piece : split.results) {
    const std::vector<NodeId>& r = uses.users(piece);
    if (r.size() != 1 || g.node(r[0]).kind != OpKind::Reshape || uses.is_output(piece)) return {};
    const ValueId heads = g.node(r[0]).results[0];
    const Shape& hs = g.value(heads).type.shape;
    const int64_t width = g.value(piece).type.shape[1].value();
    if (hs.size() != 3 || hs[0] != yt.shape[0] || !hs[1].is_const() || !hs[2].is_const()) return {};
    HeadPiece p;
    p.c0 = c0, p.c1 = c0 + width, p.piece = piece, p.heads = heads, p.h = hs[1].value(), p.d = hs[2].value();
    out.push_back(p);
    c0 += width;
  }
  return out;
}

}  // namespace lj
