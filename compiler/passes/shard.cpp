// The sharding pass (layerjit/shard.h): one forward walk decides, for every value, whether each
// rank holds it whole or a tp-th of one axis (and, along that axis, which pieces), from the rules
// of each op; a second walk rebuilds the graph with the rank's extents and an all_reduce after
// every row-parallel matmul. The rules (docs/tp.md):
//   - matmul with x held whole: column-parallel, W's rows split (the result split on its last
//     axis); with x split on its last axis: row-parallel, W's columns split the same way, the
//     partial sums all-reduced;
//   - split along the split axis: each piece split (tp divides every size), and the producing
//     matmul's W rows cut piece by piece; reshape: the split axis must map onto one output axis
//     whose extent tp divides (whole heads per rank);
//   - rope, kv_cache_write, attention, pointwise ops and row reductions keep the split when it is
//     not the axis they reduce or rotate over; a KV cache input takes the heads' split;
//   - anything else that would see a split value is refused, naming the op and why.
#include "layerjit/shard.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layerjit/builder.h"
#include "layerjit/error.h"
#include "layerjit/check.h"
#include "layerjit/op_attrs.h"

namespace lj {

std::string ShardSpec::str() const {
  if (!split()) return "replicated";
  return pieces.size() > 1 ? fmt::format("split on axis {} in pieces [{}]", axis, fmt::join(pieces, ", ")) : fmt::format("split on axis {}", axis);
}

namespace {

struct Split {
  int axis = -1;
  std::vector<int64_t> pieces;  // along axis, full extents
};

// The pointwise ops the sharding rules let a split (or a per-rank scale) pass through: the
// elementwise class but the quantize and dequantize ops, which have rules of their own.
bool is_pointwise(OpKind k) { return op_class(k) == OpClass::Elementwise && k != OpKind::Quantize && k != OpKind::Dequantize; }

class Sharder {
 public:
  Sharder(const Graph& g, int tp, const ShardOptions& o) : g_(g), tp_(tp), opts_(o), split_(g.values().size()), local_(g.values().size()) {}

  ShardedGraph run() {
    for (NodeId n = 0; n < static_cast<NodeId>(g_.nodes().size()); ++n) decide(n);
    for (ValueId o : g_.outputs())
      if (is_local(o))
        throw UserError(fmt::format("shard @{} over {} ranks: the output %{} would differ per rank (it comes from a rank's own "
                                    "quantization scale)", g_.name(), tp_, name(o)), g_.value(o).loc);
    sink_reduces();
    if (opts_.fold_residuals) find_folds();
    ShardedGraph out = rebuild(true);
    out.others = folds_.empty() ? out.graph : rebuild(false).graph;
    return out;
  }

 private:
  [[noreturn]] void refuse(NodeId n, const std::string& why) const {
    const Node& node = g_.node(n);
    throw UserError(fmt::format("shard @{} over {} ranks: %{} = {}: {}", g_.name(), tp_, g_.value(node.results.at(0)).name,
                                op_name(node.kind), why),
                    node.loc);
  }
  const std::string& name(ValueId v) const { return g_.value(v).name; }
  int rank_of(ValueId v) const { return static_cast<int>(g_.value(v).type.shape.size()); }
  bool is_split(ValueId v) const { return split_[static_cast<size_t>(v)].axis >= 0; }
  // A value each rank computes whole but differently: a per-token quantization scale of a row each
  // rank holds a part of (its own amax). Only the row-parallel matmul's row scale may use one.
  bool is_local(ValueId v) const { return local_[static_cast<size_t>(v)] != 0; }
  const Split& of(ValueId v) const { return split_[static_cast<size_t>(v)]; }
  int64_t extent(NodeId n, ValueId v, int axis) const {
    const Dim& d = g_.value(v).type.shape.at(static_cast<size_t>(axis));
    if (!d.is_const()) refuse(n, fmt::format("%{} would be split along its axis {} of symbolic extent {}", name(v), axis, d.str()));
    return d.value();
  }
  void divisible(NodeId n, int64_t extent, const std::string& what) const {
    if (extent % tp_ != 0) refuse(n, fmt::format("{} ({}) is not divisible by {} ranks", what, extent, tp_));
  }
  // A param input split like `s` (its own axis `axis`).
  void split_param(NodeId n, ValueId p, int axis, std::vector<int64_t> pieces) {
    const ValueInfo& v = g_.value(p);
    if (!v.is_param || v.producer >= 0)
      refuse(n, fmt::format("%{} would have to be split on its axis {}, but it is not a param (only weights are cut when bound)", v.name, axis));
    ShardSpec& spec = params_[p];
    if (spec.split() && (spec.axis != axis || spec.pieces != pieces))
      refuse(n, fmt::format("%{} is needed {} by one op and split on axis {} by another", v.name, spec.str(), axis));
    spec.axis = axis, spec.pieces = std::move(pieces);
  }
  void set(ValueId v, Split s) { split_[static_cast<size_t>(v)] = std::move(s); }

  // A matmul's W split on `axis` (0: its rows, N; 1: its columns, K) in `pieces`: a param, or a
  // group-wise dequantize of params (4-bit or i8 codes with their scales and zero points), whose
  // codes split alike and whose [N, K / group] scales and zero points split by rows, or by whole
  // groups along K. Records the params behind W (weight_params_) for the piece-by-piece cut of a
  // column-parallel projection.
  void split_weight(NodeId n, ValueId w, int axis, const std::vector<int64_t>& pieces) {
    const ValueInfo& v = g_.value(w);
    if (v.producer < 0 || g_.node(v.producer).kind != OpKind::Dequantize) {
      split_param(n, w, axis, pieces);
      weight_params_[w] = {w};
      return;
    }
    const Node& dq = g_.node(v.producer);
    const std::optional<int64_t> group = attr::group(dq.attrs);
    if (!group)
      refuse(n, fmt::format("%{} is a per-channel dequantize: only group-wise ones (group = ...) are sharded yet", name(w)));
    std::vector<ValueId> params;
    for (size_t i = 0; i < dq.operands.size(); ++i) {
      const ValueId p = dq.operands[i];
      std::vector<int64_t> ps = pieces;
      if (i > 0 && axis == 1) {  // scales and zero points: one per group of K
        for (int64_t& piece : ps) {
          if (piece % (*group * tp_) != 0)
            refuse(n, fmt::format("the {} columns of %{} do not split over {} ranks into whole groups of {} (its scales' groups)", piece,
                                  name(w), tp_, *group));
          piece /= *group;
        }
      }
      split_param(n, p, axis, ps);
      set(p, {axis, ps});
      params.push_back(p);
    }
    set(w, {axis, pieces});
    weight_params_[w] = params;
  }

  void decide(NodeId n) {
    const Node& node = g_.node(n);
    const auto& ops = node.operands;
    const bool any = std::any_of(ops.begin(), ops.end(), [&](ValueId v) { return is_split(v); });
    const auto local = std::find_if(ops.begin(), ops.end(), [&](ValueId v) { return is_local(v); });
    if (local != ops.end() && node.kind != OpKind::Matmul && !is_pointwise(node.kind))
      refuse(n, fmt::format("%{} differs per rank (a rank's own quantization scale) and only a row-parallel matmul's row scale may use it",
                            name(*local)));
    switch (node.kind) {
      case OpKind::Matmul: {
        const ValueId x = ops[0], w = ops[1], y = node.results[0];
        if (ops.size() == 3 && is_split(ops[2])) refuse(n, "its row scale is split");
        if (ops.size() == 3 && is_local(ops[2]) && !is_split(x)) refuse(n, "its row scale differs per rank but x is held whole");
        const int k_axis = rank_of(x) - 1;
        if (!is_split(x)) {  // column-parallel
          const int64_t rows = extent(n, w, 0);
          divisible(n, rows, fmt::format("the rows of %{}", name(w)));
          split_weight(n, w, 0, {rows});
          set(y, {rank_of(y) - 1, {rows}});
          column_w_[y] = weight_params_.at(w);
          if (weight_params_.at(w).front() != w) column_w_[y].push_back(w);  // the dequantized W is cut in the same pieces
          notes_.push_back(fmt::format("%{} = matmul: column-parallel, %{} split by rows", name(y), name(w)));
        } else {
          if (of(x).axis != k_axis) refuse(n, fmt::format("x (%{}) is split on axis {}, not on the reduced one", name(x), of(x).axis));
          split_weight(n, w, 1, of(x).pieces);
          reduced_.push_back(n);
          notes_.push_back(fmt::format("%{} = matmul: row-parallel, %{} split by columns, then all_reduce of its partial sums", name(y),
                                       name(w)));
        }
        return;
      }
      case OpKind::Split: {
        const ValueId x = ops[0];
        if (!is_split(x)) return;
        const int axis = static_cast<int>(node.attrs.get_int("axis") < 0 ? node.attrs.get_int("axis") + rank_of(x) : node.attrs.get_int("axis"));
        const std::vector<int64_t> sizes = node.attrs.get_int_list("sizes");
        if (axis != of(x).axis) {
          for (ValueId r : node.results) set(r, of(x));
          return;
        }
        if (of(x).pieces.size() != 1) refuse(n, fmt::format("%{} is already in pieces", name(x)));
        for (size_t i = 0; i < sizes.size(); ++i) divisible(n, sizes[i], fmt::format("piece {} of the split", i));
        for (size_t i = 0; i < sizes.size(); ++i) set(node.results[i], {axis, {sizes[i]}});
        // The projection's W rows are cut piece by piece: each rank keeps its share of every piece.
        if (auto it = column_w_.find(x); it != column_w_.end()) {
          for (ValueId p : it->second) {
            if (auto pp = params_.find(p); pp != params_.end()) pp->second.pieces = sizes;
            split_[static_cast<size_t>(p)].pieces = sizes;
          }
        } else refuse(n, fmt::format("%{} is split but not the output of a column-parallel matmul", name(x)));
        return;
      }
      case OpKind::Reshape: {
        const ValueId x = ops[0], y = node.results[0];
        if (!is_split(x)) return;
        if (of(x).pieces.size() != 1) refuse(n, fmt::format("%{} is in pieces", name(x)));
        const Shape& in = g_.value(x).type.shape;
        const Shape& out = g_.value(y).type.shape;
        const int a = of(x).axis;
        // The output axis where the split axis starts: the same product of dims before it.
        const DimProduct before = dim_product(Shape(in.begin(), in.begin() + a));
        int b = -1;
        for (int j = 0; j < static_cast<int>(out.size()); ++j)
          if (dim_product(Shape(out.begin(), out.begin() + j)) == before && !(out[static_cast<size_t>(j)].is_const() && out[static_cast<size_t>(j)].value() == 1)) {
            b = j;
            break;
          }
        if (b < 0) refuse(n, fmt::format("the split axis {} of %{} does not start an axis of the result", a, name(x)));
        const int64_t ext = extent(n, y, b), whole = extent(n, x, a);
        if (ext % whole != 0 && whole % ext != 0)
          refuse(n, fmt::format("the split axis {} ({}) of %{} does not map onto axis {} ({}) of the result", a, whole, name(x), b, ext));
        divisible(n, ext, fmt::format("axis {} of the result (whole heads per rank)", b));
        set(y, {b, {ext}});
        reshaped_[y] = b;
        return;
      }
      case OpKind::Rope: {
        if (!is_split(ops[0])) {
          if (any) refuse(n, "its cos/sin tables are split");
          return;
        }
        if (is_split(ops[1]) || is_split(ops[2])) refuse(n, "its cos/sin tables are split");
        if (of(ops[0]).axis == rank_of(ops[0]) - 1) refuse(n, "x is split along the rotated axis");
        set(node.results[0], of(ops[0]));
        return;
      }
      case OpKind::KvCacheWrite: {
        const ValueId cache = ops[0], fresh = ops[1];
        if (!is_split(fresh)) {
          if (any) refuse(n, "the cache is split but the new entries are not");
          return;
        }
        const int axis = of(fresh).axis + rank_of(cache) - rank_of(fresh);
        if (axis != rank_of(cache) - 2) refuse(n, fmt::format("the new entries are split on axis {}, not their heads", of(fresh).axis));
        if (is_split(cache)) {
          if (of(cache).axis != axis) refuse(n, "the cache is split on another axis than the heads");
        } else {
          const ValueInfo& c = g_.value(cache);
          if (c.producer >= 0) refuse(n, fmt::format("the cache %{} is computed here, not an input the ranks can hold a slice of", c.name));
          const int64_t heads = extent(n, cache, axis);
          divisible(n, heads, fmt::format("the heads of %{}", c.name));
          inputs_[cache] = ShardSpec{axis, {heads}};
          set(cache, {axis, {heads}});
        }
        set(node.results[0], of(cache));
        return;
      }
      case OpKind::Attention: {
        if (!any) return;
        if (node.results.size() > 1) refuse(n, "its log-sum-exp output is not sharded yet");
        for (size_t i = 0; i < std::min<size_t>(3, ops.size()); ++i)
          if (!is_split(ops[i]) || of(ops[i]).axis != rank_of(ops[i]) - 2)
            refuse(n, fmt::format("%{} is not split by heads as q, k and v must all be", name(ops[i])));
        for (size_t i = 3; i < ops.size(); ++i)
          if (is_split(ops[i])) refuse(n, fmt::format("%{} is split", name(ops[i])));
        set(node.results[0], {rank_of(node.results[0]) - 2, {extent(n, node.results[0], rank_of(node.results[0]) - 2)}});
        return;
      }
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Silu:
      case OpKind::Gelu:
      case OpKind::Relu:
      case OpKind::Exp:
      case OpKind::Rsqrt:
      case OpKind::Cast: {
        if (local != ops.end()) {
          if (any) refuse(n, fmt::format("it mixes a split value with %{}, which differs per rank", name(*local)));
          for (ValueId r : node.results) local_[static_cast<size_t>(r)] = 1;
          return;
        }
        if (!any) return;
        // Axes counted from the end (broadcasting aligns trailing dims).
        const int out_rank = rank_of(node.results[0]);
        std::optional<Split> s;
        std::vector<ValueId> cut_here;  // params split by this op
        int from_end = 0;
        for (ValueId v : ops)
          if (is_split(v)) {
            const int fe = rank_of(v) - of(v).axis;
            if (s && (fe != from_end || s->pieces != of(v).pieces))
              refuse(n, fmt::format("its operands are split differently (%{} on axis {})", name(v), of(v).axis));
            s = of(v), from_end = fe;
          }
        for (ValueId v : ops) {
          if (is_split(v) || rank_of(v) < from_end) continue;  // split already, or broadcast along the split axis
          if (g_.value(v).type.shape[static_cast<size_t>(rank_of(v) - from_end)] == Dim(1)) continue;
          split_param(n, v, rank_of(v) - from_end, s->pieces);  // a bias or scale along the split axis
          set(v, {rank_of(v) - from_end, s->pieces});
          cut_here.push_back(v);
        }
        set(node.results[0], {out_rank - from_end, s->pieces});
        // A column-parallel projection's output through its per-column scales and cast (W8A8): a
        // split after it cuts W and those scales piece by piece alike.
        for (ValueId v : ops)
          if (auto it = column_w_.find(v); it != column_w_.end()) {
            std::vector<ValueId> params = it->second;
            params.insert(params.end(), cut_here.begin(), cut_here.end());
            column_w_[node.results[0]] = std::move(params);
            break;
          }
        return;
      }
      case OpKind::Quantize: {
        const ValueId x = ops[0];
        if (!is_split(x)) {
          if (any) refuse(n, "its scale is split");
          return;
        }
        if (ops.size() > 1 && is_split(ops[1])) refuse(n, "its scale is split");
        set(node.results[0], of(x));
        if (node.results.size() < 2) return;  // a given scale: each rank quantizes its part with it
        const std::optional<int64_t> ax = attr::scale_axis(node.attrs);
        const int keep = ax ? static_cast<int>(*ax < 0 ? *ax + rank_of(x) : *ax) : -1;
        if (keep == of(x).axis) {  // one scale per index of the split axis: split alike
          set(node.results[1], {0, of(x).pieces});
        } else {  // each scale is a max over a row each rank holds a part of: every rank computes its own
          local_[static_cast<size_t>(node.results[1])] = 1;
          notes_.push_back(fmt::format("%{} = quantize: each rank takes its scales from its own part of each row of %{} (a finer "
                                       "quantization than the whole row's, not bit-equal to one GPU)",
                                       name(node.results[0]), name(x)));
        }
        return;
      }
      case OpKind::RmsNorm:
      case OpKind::RmsScale:
      case OpKind::LayerNorm: {
        if (!is_split(ops[0])) {
          if (any) refuse(n, "its weight is split");
          return;
        }
        if (of(ops[0]).axis == rank_of(ops[0]) - 1)
          refuse(n, fmt::format("it reduces over %{}'s last axis, which is split: each rank holds a part of every row", name(ops[0])));
        for (size_t i = 1; i < ops.size(); ++i)
          if (is_split(ops[i])) refuse(n, "its weight is split");
        for (ValueId r : node.results) set(r, of(ops[0]));
        return;
      }
      case OpKind::RopeTable:
        if (any) refuse(n, "its positions are split");
        return;
      case OpKind::AllReduce: refuse(n, "the graph is sharded already");
      default:
        if (any)
          refuse(n, fmt::format("a split operand (%{}) reaches an op the sharding rules do not cover: it would need every rank's part",
                                name(*std::find_if(ops.begin(), ops.end(), [&](ValueId v) { return is_split(v); }))));
        return;
    }
  }

  // The rank's extents: the split axis divided by tp.
  Shape rank_shape(ValueId v) const {
    Shape s = g_.value(v).type.shape;
    if (is_split(v)) s[static_cast<size_t>(of(v).axis)] = Dim(s[static_cast<size_t>(of(v).axis)].value() / tp_);
    return s;
  }

  // A row-parallel matmul's partial sums through linear per-column steps (a quantized projection's
  // f32 sums times its per-channel scales, then cast to bf16: W8A8): the all_reduce moves after
  // them, so each rank scales and rounds its own partial sums (as a bf16 projection's do) and the
  // ranks add bf16 rows instead of f32 ones, after which the residual fold applies as it does there.
  // The nodes reading v (once per operand), and whether v is returned.
  std::vector<NodeId> uses_of(ValueId v) const {
    std::vector<NodeId> uses;
    for (NodeId u = 0; u < static_cast<NodeId>(g_.nodes().size()); ++u)
      for (ValueId o : g_.node(u).operands)
        if (o == v) uses.push_back(u);
    return uses;
  }
  bool returned(ValueId v) const { return std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end(); }
  // The node computing v (-1 for an input).
  NodeId producer(ValueId v) const {
    for (NodeId n = 0; n < static_cast<NodeId>(g_.nodes().size()); ++n)
      for (ValueId r : g_.node(n).results)
        if (r == v) return n;
    return -1;
  }

  void sink_reduces() {
    for (NodeId& at : reduced_) {
      const NodeId matmul = at;
      for (;;) {
        const ValueId v = g_.node(at).results.at(0);
        if (returned(v)) break;
        const std::vector<NodeId> uses = uses_of(v);
        if (uses.size() != 1) break;
        const Node& u = g_.node(uses[0]);
        bool linear = false;
        if (u.kind == OpKind::Mul && u.operands.size() == 2) {
          const ValueId other = u.operands[0] == v ? u.operands[1] : u.operands[0];
          linear = other != v && !is_split(other) && !is_local(other) && producer(other) < matmul;
        } else if (u.kind == OpKind::Cast) {
          linear = is_float(g_.value(u.results[0]).type.dtype) && !is_fp8(g_.value(u.results[0]).type.dtype);
        }
        if (!linear) break;
        at = uses[0];
      }
      if (at != matmul)
        notes_.push_back(fmt::format("%{}: the all_reduce of %{} moves after its per-column scale and cast (linear): each rank "
                                     "scales and rounds its partial sums, the ranks add %{}'s rows",
                                     name(g_.node(at).results[0]), name(g_.node(matmul).results[0]), name(g_.node(at).results[0])));
    }
  }

  // The residual adds after the all_reduces (`%h1 = add(%x, all_reduce(%o_partial))`) that can move
  // before them: the reduced value has that add as its one use and is not returned, and the other
  // operand is held whole on every rank and exists before the matmul. Rank 0 then adds it to its
  // partial sums (the matmul's epilogue does) and the all_reduce yields the add's result: one kernel
  // fewer per all_reduce, as one-shot fused all-reduce + residual kernels do.
  void find_folds() {
    for (NodeId n : reduced_) {
      const ValueId red = g_.node(n).results.at(0);
      if (returned(red)) continue;
      const std::vector<NodeId> uses = uses_of(red);
      if (uses.size() != 1 || g_.node(uses[0]).kind != OpKind::Add) continue;
      const Node& add = g_.node(uses[0]);
      const ValueId other = add.operands[0] == red ? add.operands[1] : add.operands[0];
      if (other == red || is_split(other) || is_local(other) || producer(other) > n) continue;
      if (g_.value(other).type.shape != g_.value(red).type.shape || g_.value(other).type.dtype != g_.value(red).type.dtype) continue;
      folds_[n] = uses[0];
      notes_.push_back(fmt::format("%{} = add(...) folded before the all_reduce: rank 0 adds %{} to its partial sums of %{}, so the "
                                   "all_reduce yields %{} (no add kernel after it)",
                                   name(add.results[0]), name(other), name(red), name(add.results[0])));
    }
  }

  // The rank graph of rank 0 (`first`: it adds the folded residuals) or of the other ranks.
  ShardedGraph rebuild(bool first) {
    ShardedGraph out;
    out.tp = tp_;
    for (auto& [p, spec] : params_) {
      set(p, {spec.axis, spec.pieces});
      for (int64_t piece : spec.pieces) LJ_ASSERT(piece % tp_ == 0, "piece {} of %{} not divisible", piece, name(p));
    }
    GraphBuilder b(g_.name());
    std::vector<Value> map(g_.values().size());
    for (ValueId in : g_.inputs()) {
      const ValueInfo& v = g_.value(in);
      map[static_cast<size_t>(in)] = v.is_param ? b.param(v.name, v.type.dtype, rank_shape(in), v.loc) : b.input(v.name, v.type.dtype, rank_shape(in), v.loc);
      ShardSpec spec;
      if (is_split(in)) spec = ShardSpec{of(in).axis, of(in).pieces};
      out.inputs[v.name] = spec;
    }
    for (NodeId n = 0; n < static_cast<NodeId>(g_.nodes().size()); ++n) {
      const Node& node = g_.node(n);
      std::vector<Value> ops;
      for (ValueId v : node.operands) ops.push_back(map[static_cast<size_t>(v)]);
      Attrs attrs = node.attrs;
      if (node.kind == OpKind::Split && is_split(node.operands[0])) {
        const int axis = of(node.operands[0]).axis;
        int64_t a = attrs.get_int("axis");
        if (a < 0) a += rank_of(node.operands[0]);
        if (a == axis) {
          std::vector<int64_t> sizes = attrs.get_int_list("sizes");
          for (int64_t& s : sizes) s /= tp_;
          std::vector<Value> rs = b.split(ops[0], a, sizes);
          for (size_t i = 0; i < rs.size(); ++i) map[static_cast<size_t>(node.results[i])] = rs[i].named(name(node.results[i]));
          continue;
        }
      }
      if (node.kind == OpKind::Reshape && reshaped_.count(node.results[0])) {
        Shape s = attrs.get_shape("shape");
        const int bax = reshaped_.at(node.results[0]);
        s[static_cast<size_t>(bax)] = Dim(s[static_cast<size_t>(bax)].value() / tp_);
        map[static_cast<size_t>(node.results[0])] = b.reshape(ops[0], s).named(name(node.results[0]));
        continue;
      }
      if (std::any_of(folds_.begin(), folds_.end(), [n](const auto& f) { return f.second == n; })) continue;  // made with its all_reduce
      std::vector<std::string> names;
      for (ValueId r : node.results) names.push_back(name(r));
      const bool reduce = std::find(reduced_.begin(), reduced_.end(), n) != reduced_.end();
      if (reduce) names[0] += "_partial";
      std::vector<Value> rs = b.op(node.kind, ops, attrs, node.loc, names);
      if (reduce && folds_.count(n)) {
        const Node& add = g_.node(folds_.at(n));
        const ValueId sum = add.results[0];
        Value partial = rs[0];
        if (first) {
          std::vector<Value> add_ops;
          for (ValueId v : add.operands) add_ops.push_back(v == node.results[0] ? partial : map[static_cast<size_t>(v)]);
          partial = b.op(OpKind::Add, add_ops, add.attrs, add.loc, {name(sum) + "_partial"})[0];
        }
        Attrs ar;
        ar.set("ranks", int64_t{tp_});
        rs[0] = b.op(OpKind::AllReduce, {partial}, ar, add.loc, {name(sum)})[0];
        map[static_cast<size_t>(sum)] = rs[0];
      } else if (reduce) {
        Attrs ar;
        ar.set("ranks", int64_t{tp_});
        rs[0] = b.op(OpKind::AllReduce, {rs[0]}, ar, node.loc, {name(node.results[0])})[0];
      }
      for (size_t i = 0; i < rs.size(); ++i) map[static_cast<size_t>(node.results[i])] = rs[i];
    }
    std::vector<Value> outs;
    for (ValueId o : g_.outputs()) {
      outs.push_back(map[static_cast<size_t>(o)]);
      out.outputs.push_back(is_split(o) ? ShardSpec{of(o).axis, of(o).pieces} : ShardSpec{});
    }
    out.graph = b.finish(outs, g_.loc());
    out.notes = notes_;
    return out;
  }

  const Graph& g_;
  int tp_;
  ShardOptions opts_;
  std::map<NodeId, NodeId> folds_;       // row-parallel matmul -> the residual add folded before its all_reduce
  std::vector<Split> split_;
  std::map<ValueId, ShardSpec> params_, inputs_;
  std::vector<char> local_;               // per value: differs per rank (is_local)
  // A column-parallel matmul's result (and the pointwise results that keep its split) -> the values
  // cut along its columns (W's params, the dequantized W, per-column scales): re-pieced by a split.
  std::map<ValueId, std::vector<ValueId>> column_w_;
  std::map<ValueId, std::vector<ValueId>> weight_params_;  // a matmul's W -> the params it is made of (itself, or a dequantize's)
  std::map<ValueId, int> reshaped_;      // a reshape's result -> its split axis (extent divided)
  std::vector<NodeId> reduced_;          // row-parallel matmuls
  std::vector<std::string> notes_;
};

}  // namespace

ShardedGraph shard(const Graph& g, int tp, const ShardOptions& o) {
  LJ_CHECK(tp >= 1 && tp <= 64, SourceLoc{}, "shard @{}: tp = {}: a tensor-parallel group has 1 to 64 ranks", g.name(), tp);
  if (tp == 1) {
    ShardedGraph out{g, g, 1, {}, std::vector<ShardSpec>(g.outputs().size()), {}};
    for (ValueId in : g.inputs()) out.inputs[g.value(in).name] = ShardSpec{};
    return out;
  }
  return Sharder(g, tp, o).run();
}

namespace {
// Strides of a row-major shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}
// Index along `axis` of the full tensor for index j of rank r's share.
int64_t full_index(const ShardSpec& spec, int tp, int rank, int64_t j) {
  int64_t offset = 0;
  for (int64_t piece : spec.pieces) {
    const int64_t share = piece / tp;
    if (j < share) return offset + rank * share + j;
    j -= share, offset += piece;
  }
  LJ_ASSERT(false, "index past the pieces");
  __builtin_unreachable();
}
// f(i, j) for each element i of rank r's share (shape `part`) and its element j of the full tensor.
template <class F>
void for_each_share(const std::vector<int64_t>& full, const std::vector<int64_t>& part, const ShardSpec& spec, int tp, int rank, F f) {
  const auto axis = static_cast<size_t>(spec.axis);
  const std::vector<int64_t> fs = strides_of(full), ps = strides_of(part);
  const int64_t n = part.empty() ? 1 : ps[0] * part[0];
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, j = 0;
    for (size_t d = 0; d < part.size(); ++d) {
      const int64_t idx = rest / ps[d];
      rest %= ps[d];
      j += (d == axis ? full_index(spec, tp, rank, idx) : idx) * fs[d];
    }
    f(i, j);
  }
}
}  // namespace

HostTensor shard_tensor(const HostTensor& full, const ShardSpec& spec, int tp, int rank) {
  if (!spec.split()) return full;
  const auto axis = static_cast<size_t>(spec.axis);
  std::vector<int64_t> shape = full.shape;
  LJ_CHECK(axis < shape.size(), SourceLoc{}, "shard_tensor: axis {} of a rank-{} tensor", axis, shape.size());
  int64_t total = 0;
  for (int64_t p : spec.pieces) total += p;
  LJ_CHECK(total == shape[axis], SourceLoc{}, "shard_tensor: pieces [{}] do not cover axis {} ({})", fmt::join(spec.pieces, ", "), axis, shape[axis]);
  for (int64_t p : spec.pieces)
    LJ_CHECK(p % tp == 0, SourceLoc{}, "shard_tensor: a piece of {} along axis {} is not divisible by {} ranks", p, axis, tp);
  shape[axis] /= tp;
  HostTensor part(full.dtype, shape);
  for_each_share(full.shape, shape, spec, tp, rank,
                 [&](int64_t i, int64_t j) { part.data[static_cast<size_t>(i)] = full.data[static_cast<size_t>(j)]; });
  return part;
}

std::vector<unsigned char> shard_bytes(std::span<const unsigned char> full, DType dtype, const std::vector<int64_t>& shape,
                                       const ShardSpec& spec, int tp, int rank) {
  const int64_t bits = dtype_bits(dtype);
  LJ_CHECK(static_cast<int64_t>(full.size()) * 8 == numel(shape) * bits, SourceLoc{}, "shard_bytes: {} bytes for a {} tensor of shape [{}]",
           full.size(), dtype_name(dtype), fmt::join(shape, ", "));
  if (!spec.split()) return {full.begin(), full.end()};
  const auto axis = static_cast<size_t>(spec.axis);
  LJ_CHECK(axis < shape.size(), SourceLoc{}, "shard_bytes: axis {} of a rank-{} tensor", axis, shape.size());
  int64_t total = 0;
  for (int64_t p : spec.pieces) total += p;
  LJ_CHECK(total == shape[axis], SourceLoc{}, "shard_bytes: pieces [{}] do not cover axis {} ({})", fmt::join(spec.pieces, ", "), axis, shape[axis]);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  // A run: the rank's r-th tp-th of one piece in one outer slice, contiguous; in bits, each must
  // start and end on a byte (4-bit codes split between two elements of a byte cannot be cut).
  const auto bytes_of = [&](int64_t index) {
    const int64_t b = index * inner * bits;
    LJ_CHECK(b % 8 == 0, SourceLoc{}, "shard_bytes: a rank's share of a {} tensor along axis {} starts inside a byte", dtype_name(dtype), axis);
    return static_cast<size_t>(b / 8);
  };
  std::vector<unsigned char> part;
  part.reserve(full.size() / static_cast<size_t>(tp));
  for (int64_t o = 0; o < outer; ++o) {
    int64_t start = 0;
    for (int64_t p : spec.pieces) {
      LJ_CHECK(p % tp == 0, SourceLoc{}, "shard_bytes: a piece of {} along axis {} is not divisible by {} ranks", p, axis, tp);
      const int64_t share = p / tp, first = o * shape[axis] + start + rank * share;
      const size_t from = bytes_of(first), to = bytes_of(first + share);
      part.insert(part.end(), full.begin() + static_cast<std::ptrdiff_t>(from), full.begin() + static_cast<std::ptrdiff_t>(to));
      start += p;
    }
  }
  return part;
}

HostTensor gather_tensor(const std::vector<HostTensor>& parts, const ShardSpec& spec, int tp) {
  LJ_CHECK(static_cast<int>(parts.size()) == tp, SourceLoc{}, "gather_tensor: {} parts for {} ranks", parts.size(), tp);
  if (!spec.split()) return parts.at(0);
  const auto axis = static_cast<size_t>(spec.axis);
  std::vector<int64_t> shape = parts[0].shape;
  shape[axis] *= tp;
  HostTensor full(parts[0].dtype, shape);
  for (int r = 0; r < tp; ++r)
    for_each_share(shape, parts[static_cast<size_t>(r)].shape, spec, tp, r, [&](int64_t i, int64_t j) {
      full.data[static_cast<size_t>(j)] = parts[static_cast<size_t>(r)].data[static_cast<size_t>(i)];
    });
  return full;
}

}  // namespace lj
