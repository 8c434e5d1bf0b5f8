// plan_fusion: covers a graph with fusion groups by pattern, largest first:
//   0. RoPE in a projection's epilogue: a matmul whose output is cut into heads (the QKV projection)
//      rotates the heads a rope reads and writes them, and the KV-cache entries at the table's
//      positions, straight from its accumulators; the projection itself never reaches memory;
//   1. RoPE: a rope_table, every rope using its tables, and every kv_cache_write at the same
//      positions (one kernel computes the angles, rotates q and k, writes the caches);
//   2. matmuls with their epilogue: SwiGLU of the two halves of a gate/up projection, then pointwise
//      nodes each reading the previous value (bias, residual add, activation, cast/quantize). A
//      residual add goes to the matmul before the row reduction after it can take it as a prologue:
//      the sum is then written once by the matmul instead of the product being written and read back.
//      Prologues join a matmul too: the pointwise product making its row scale (any size) and, where
//      the plan's sizes give it one row, the rms_scale of its x and the rope_table its epilogue reads;
//   3. row reductions (rms_norm, layer_norm, softmax) with an elementwise prologue of the same shape
//      (the residual add), an elementwise/cast epilogue, and a per-row dynamic quantize of the
//      result (the row's amax, scale and codes in the same kernel: the normalised row never reaches
//      device memory unless something else reads it);
//   4. per-row dynamic quantizes not taken by a reduction, with an elementwise prologue;
//   5. maximal elementwise chains over one iteration space (SwiGLU: silu(gate) * up);
//   6. every other op alone (attention gets its own kernel; a later issue fuses into it).
// Then returned views of larger buffers are copied out by a kernel that reads the buffer anyway
// (output_views.cpp), so the buffer need not outlive its readers.
// Views (reshape, split) are aliases and get no kernel. Group order is a topological order of the
// group graph with ties broken by the first node, so plans are deterministic; weight-preparation groups
// (params only: a folded norm's W * w) come first, as the executable runs them before any call.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "compiler/fusion/fusion_group.h"
#include "compiler/fusion/legality.h"
#include "compiler/fusion/output_views.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"

namespace lj {

namespace {

// A quantize's axis as the text format spells it.
std::string axis_text(std::optional<int64_t> axis) { return axis ? std::to_string(*axis) : "none"; }

constexpr int kUnassigned = -1;

class Partitioner {
 public:
  Partitioner(const Graph& g, const FusionOptions& o)
      : g_(g), opts_(o), uses_(g), owner_(g.nodes().size(), kUnassigned), constant_(g.values().size(), false) {
    // Values computed from params alone (a folded norm's W * w): their nodes are weight preparation,
    // grouped only with each other.
    for (ValueId v : g.inputs()) constant_[static_cast<size_t>(v)] = g.value(v).is_param;
    for (const Node& n : g.nodes()) {
      const bool c = !n.operands.empty() &&
                     std::all_of(n.operands.begin(), n.operands.end(), [&](ValueId v) { return constant_[static_cast<size_t>(v)]; });
      for (ValueId r : n.results) constant_[static_cast<size_t>(r)] = c;
    }
  }

  FusionPlan run() {
    FusionPlan plan;
    plan.fused = opts_.fuse;
    for (NodeId n = 0; n < num_nodes(); ++n)
      if (is_view(kind(n))) plan.views.push_back(n);
    if (opts_.fuse) {
      for (NodeId n = 0; n < num_nodes() && opts_.matmul_epilogues; ++n)
        if (kind(n) == OpKind::Matmul) grow_rope_projection(n);
      for (NodeId n = 0; n < num_nodes(); ++n)
        if (kind(n) == OpKind::RopeTable && owner(n) == kUnassigned) grow_rope(n);
      for (NodeId n = 0; n < num_nodes() && opts_.matmul_epilogues; ++n)
        if (kind(n) == OpKind::Matmul && owner(n) == kUnassigned) grow_matmul(n);
      for (NodeId n = 0; n < num_nodes(); ++n)
        if (is_row_reduction(kind(n)) && owner(n) == kUnassigned) grow_row_reduction(n);
      for (NodeId n = 0; n < num_nodes(); ++n)
        if (is_row_quantize(g_, g_.node(n)) && owner(n) == kUnassigned) grow_row_quantize(n);
      for (NodeId n = 0; n < num_nodes(); ++n)
        if (is_pointwise(g_.node(n)) && owner(n) == kUnassigned) grow_elementwise(n);
    }
    for (NodeId n = 0; n < num_nodes(); ++n)
      if (!is_view(kind(n)) && owner(n) == kUnassigned) single(n);
    plan.dense_views = dense_;
    plan.groups = order_and_finish();
    plan_output_view_copies(g_, plan, opts_);
    if (opts_.cache_prefetch) mark_cache_prefetch(plan.groups);
    return plan;
  }

 private:
  NodeId num_nodes() const { return static_cast<NodeId>(g_.nodes().size()); }
  OpKind kind(NodeId n) const { return g_.node(n).kind; }
  int owner(NodeId n) const { return owner_[static_cast<size_t>(n)]; }
  NodeId producer(ValueId v) const { return g_.value(v).producer; }
  std::string vname(ValueId v) const { return "%" + g_.value(v).name; }
  std::string nname(NodeId n) const {
    std::string out;
    for (ValueId r : g_.node(n).results) out += (out.empty() ? "" : ", ") + vname(r);
    return out;
  }

  int new_group(GroupKind k, NodeId first) {
    FusionGroup grp;
    grp.id = static_cast<int>(groups_.size());
    grp.kind = k;
    groups_.push_back(std::move(grp));
    add(static_cast<int>(groups_.size()) - 1, first);
    return static_cast<int>(groups_.size()) - 1;
  }
  void add(int gid, NodeId n) {
    owner_[static_cast<size_t>(n)] = gid;
    groups_[static_cast<size_t>(gid)].nodes.push_back(n);
    if (static_cast<size_t>(gid) >= span_.size()) span_.resize(static_cast<size_t>(gid) + 1, {n, n});
    std::pair<NodeId, NodeId>& s = span_[static_cast<size_t>(gid)];
    s = {std::min(s.first, n), std::max(s.second, n)};
  }
  const std::vector<NodeId>& members(int gid) const { return groups_[static_cast<size_t>(gid)].nodes; }
  void note(int gid, std::string why) { groups_[static_cast<size_t>(gid)].why.push_back(std::move(why)); }

  bool prepares(NodeId n) const { return constant_[static_cast<size_t>(g_.node(n).results[0])]; }
  // A group runs once per weights when the node it is built around does (a matmul's weight
  // prologue reads params only, the matmul does not).
  bool prepares_group(int gid) const { return prepares(anchor_node(g_, groups_[static_cast<size_t>(gid)])); }

  // Adds n to group gid if it is free and no cycle results; records the decision either way.
  bool try_absorb(int gid, NodeId n, const std::string& what) {
    if (owner(n) != kUnassigned) return false;
    if (prepares(n) != prepares_group(gid)) return false;  // once per weights, or per call: never both
    const auto [lo, hi] = span_[static_cast<size_t>(gid)];
    if (creates_cycle(g_, uses_, [&](NodeId m) { return owner(m) == gid; }, lo, hi, n)) {
      note(gid, fmt::format("not absorbed {} = {} ({}): would create a cycle between kernels", nname(n), op_name(kind(n)), what));
      return false;
    }
    add(gid, n);
    note(gid, fmt::format("absorbed {} = {} ({})", nname(n), op_name(kind(n)), what));
    return true;
  }

  // RoPE in the epilogue of a projection cut into heads (head_pieces: the QKV projection's q, k and v).
  // Every rope of a piece's heads must use the tables of one rope_table and a half or interleaved
  // pairing within heads of the table's dim D, and every piece must be whole heads of D: then each
  // CTA's tile (or each GEMV warp's pair of columns) holds both values of every pair it rotates. The
  // tables stay a kernel of their own (2 x rows x D/2 floats, read back from L2 by the epilogue); a
  // cosine per element computed in double in the epilogue would cost more than the RoPE kernel
  // this saves, except at one row (below). Cache writes at the table's positions of a rotated or
  // plain piece join too.
  void grow_rope_projection(NodeId mm) {
    const std::optional<ColumnScale> cs = column_scale(mm);
    const ValueId y = cs ? cs->out : g_.node(mm).results[0];
    const std::vector<HeadPiece> pieces = head_pieces(g_, uses_, y);
    if (pieces.empty()) return;
    NodeId table = -1;
    std::optional<attr::RopeStyle> style;
    std::vector<NodeId> ropes, writes;
    auto refuse = [&](std::string why) { rope_refusals_[mm] = std::move(why); };
    for (const HeadPiece& p : pieces) {
      for (NodeId u : uses_.users(p.heads)) {
        const Node& n = g_.node(u);
        if (n.kind != OpKind::Rope || n.operands[0] != p.heads) continue;
        const NodeId t = producer(n.operands[1]);
        if (t < 0 || kind(t) != OpKind::RopeTable || producer(n.operands[2]) != t)
          return refuse(fmt::format("{} reads tables that no rope_table computes", nname(u)));
        if (table >= 0 && t != table) return refuse("its ropes use the tables of different rope_table nodes");
        if (style && attr::rope_style(n.attrs) != *style) return refuse("its ropes pair elements differently");
        if (!ropes.empty() && (n.operands[1] != g_.node(ropes[0]).operands[1] || n.operands[2] != g_.node(ropes[0]).operands[2]))
          return refuse("its ropes read the tables as different operands");
        table = t, style = attr::rope_style(n.attrs);
        ropes.push_back(u);
      }
    }
    if (ropes.empty()) return;
    const int64_t dim = attr::rope_dim(g_.node(table).attrs);
    // The tensor-core epilogues rotate runs of 8 columns that must lie in one half of a head.
    if (style == attr::RopeStyle::Half && dim / 2 % 8 != 0)
      return refuse(fmt::format("half of its head_dim {} is not a multiple of 8, the epilogue's run of columns", dim));
    const ValueId pos = g_.node(table).operands[0];
    if (g_.value(pos).type.shape[0] != g_.value(y).type.shape[0])
      return refuse(fmt::format("its rows are not the positions {} of the tables", vname(pos)));
    for (const HeadPiece& p : pieces)
      if ((p.c1 - p.c0) % dim != 0)
        return refuse(fmt::format("{} is not whole heads of {} (the rotation's head_dim)", vname(p.piece), dim));
    // Cache writes at the table's positions of what the epilogue holds: a rotated piece or a plain one.
    for (const HeadPiece& p : pieces) {
      std::vector<ValueId> held = {p.heads};
      for (NodeId r : ropes)
        if (g_.node(r).operands[0] == p.heads) held.push_back(g_.node(r).results[0]);
      for (ValueId v : held)
        for (NodeId u : uses_.users(v)) {
          const Node& n = g_.node(u);
          if (n.kind == OpKind::KvCacheWrite && n.operands[1] == v && n.operands.size() == 3 && n.operands[2] == pos) writes.push_back(u);
        }
    }
    const int gid = new_group(GroupKind::Matmul, mm);
    if (cs && !absorb_column_scale(gid, *cs)) return;
    for (NodeId r : ropes)
      try_absorb(gid, r, fmt::format("RoPE in the epilogue: {} never reaches memory; each tile holds both halves of the pairs it rotates, "
                                     "with cos/sin read from {} and {}",
                                     vname(y), vname(g_.node(table).results[0]), vname(g_.node(table).results[1])));
    for (NodeId wn : writes) try_absorb(gid, wn, fmt::format("cache write at {} from the epilogue's registers", vname(pos)));
    // What the emitters implement: each piece, its rope and its cache writes, as absorbed. (Should
    // no rope join, the writes that did leave a group no matmul kernel implements: the emitter says so.)
    if (std::none_of(ropes.begin(), ropes.end(), [&](NodeId r) { return owner(r) == gid; })) return;
    MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
    const Node& rope0 = g_.node(ropes[0]);
    ep.cos = rope0.operands[1], ep.sin = rope0.operands[2];
    ep.rope_dim = dim, ep.rope_interleaved = style == attr::RopeStyle::Interleaved;
    for (const HeadPiece& p : pieces) {
      MatmulEpilogue::RopePiece rp;
      rp.c0 = p.c0, rp.c1 = p.c1, rp.d = p.d, rp.heads = p.heads;
      for (NodeId r : ropes)
        if (owner(r) == gid && g_.node(r).operands[0] == p.heads) rp.rope = r;
      for (NodeId wn : writes) {
        if (owner(wn) != gid) continue;
        const ValueId v = g_.node(wn).operands[1];
        if (v == p.heads) rp.writes.push_back(wn);
        if (rp.rope >= 0 && v == g_.node(rp.rope).results[0]) rp.rotated_writes.push_back(wn);
      }
      std::sort(rp.writes.begin(), rp.writes.end());
      std::sort(rp.rotated_writes.begin(), rp.rotated_writes.end());
      ep.rope_pieces.push_back(std::move(rp));
    }
    // One row: the tables are one row of D/2 angles, and each warp of the GEMV computes the angle
    // of the pair it rotates (one sincos in double, as the table kernel does) at less cost than a
    // kernel of one CTA between the projection and the kernel before it.
    const bool tables_inside = std::all_of(g_.node(table).results.begin(), g_.node(table).results.end(), [&](ValueId r) {
      const auto& users = uses_.users(r);
      return !uses_.is_output(r) && std::all_of(users.begin(), users.end(), [&](NodeId u) { return owner(u) == gid; });
    });
    if (one_row(mm) && tables_inside &&
        try_absorb(gid, table, fmt::format("one row: the epilogue computes each pair's angle from {}, so no kernel stores the tables",
                                           vname(pos)))) {
      groups_[static_cast<size_t>(gid)].matmul.table = table;
      const std::string read = fmt::format("with cos/sin read from {} and {}", vname(g_.node(table).results[0]), vname(g_.node(table).results[1]));
      for (std::string& why : groups_[static_cast<size_t>(gid)].why)
        if (size_t at = why.find(read); at != std::string::npos) why.replace(at, read.size(), "with cos/sin computed in the epilogue");
    }
    absorb_row_rms(gid, mm);
    absorb_row_scale_product(gid, mm);
    absorb_x_quantize(gid, mm);
    absorb_weight_dequant(gid, mm);
    absorb_x_norm(gid, mm);
    // A piece read by another kernel or returned is stored whole, in a buffer of its own.
    for (const HeadPiece& p : pieces) {
      bool read_outside = uses_.is_output(p.heads);
      for (NodeId u : uses_.users(p.heads)) read_outside = read_outside || owner(u) != gid;
      if (!read_outside) continue;
      dense_.push_back(p.heads);
      note(gid, fmt::format("stores {} ({}) in a buffer of its own: {} is never stored, and {} is read {}", vname(p.heads),
                            g_.value(p.heads).type.str(), vname(y), vname(p.heads),
                            uses_.is_output(p.heads) ? "by the caller" : "by another kernel"));
    }
  }

  // A per-head RMSNorm of the rope's input (Qwen3's q_norm and k_norm: rms_norm over the head_dim of
  // [N, H, D] heads) joins the rope's kernel when the rope is its only reader: each CTA holds whole
  // heads of its row, so it adds up the squares of the heads it loads and normalises them before
  // rotating, and the normed heads never reach memory.
  void absorb_head_norm(int gid, NodeId rope, const Node& table) {
    const ValueId x = g_.node(rope).operands[0];
    const NodeId nn = producer(x);
    if (nn < 0 || kind(nn) != OpKind::RmsNorm) return;
    const TensorType& xt = g_.value(g_.node(nn).operands[0]).type;
    const int64_t dim = attr::rope_dim(table.attrs);
    if (xt.rank() != 3 || !xt.shape[2].is_const() || xt.shape[2].value() != dim) {
      note(gid, fmt::format("not absorbed {} = rms_norm: it normalises {}, not heads of the table's dim {}", nname(nn), xt.str(), dim));
      return;
    }
    if (uses_.is_output(x) || uses_.users(x).size() != 1) {
      note(gid, fmt::format("not absorbed {} = rms_norm: {} is read by more than the rope", nname(nn), vname(x)));
      return;
    }
    try_absorb(gid, nn, fmt::format("per-head RMSNorm of {}: the kernel holds whole heads of each row", vname(g_.node(nn).operands[0])));
  }

  void grow_rope(NodeId table) {
    int gid = new_group(GroupKind::RopeKvWrite, table);
    const Node& t = g_.node(table);
    ValueId pos = t.operands[0];
    bool rotates = false;
    for (ValueId r : t.results)
      for (NodeId u : uses_.users(r))
        if (kind(u) == OpKind::Rope && try_absorb(gid, u, "rotation")) {
          rotates = true;
          absorb_head_norm(gid, u, t);
        }
    for (NodeId u : uses_.users(pos))
      if (kind(u) == OpKind::KvCacheWrite && g_.node(u).operands[2] == pos) try_absorb(gid, u, "cache write at the same positions");
    const bool stored = std::any_of(t.results.begin(), t.results.end(), [&](ValueId r) {
      const auto& users = uses_.users(r);
      return uses_.is_output(r) || std::any_of(users.begin(), users.end(), [&](NodeId u) { return owner(u) != gid; });
    });
    // Nothing rotated or written here: the kernel computes the tables alone, and is named for it.
    if (groups_[static_cast<size_t>(gid)].nodes.size() == 1) groups_[static_cast<size_t>(gid)].kind = GroupKind::RopeTable;
    note(gid, stored ? fmt::format("cos/sin tables computed from {} and stored for the kernels that read them{}",
                                   vname(pos), rotates ? "" : " (a projection's RoPE epilogue)")
                     : fmt::format("cos/sin tables computed in-kernel from {}, never stored", vname(pos)));
  }

  // v's one reader, or -1 where it has none, several, or v is returned.
  NodeId sole_user(ValueId v) const {
    const auto& users = uses_.users(v);
    return users.size() == 1 && !uses_.is_output(v) ? users[0] : -1;
  }

  // A per-column scale between a matmul and the split its SwiGLU or RoPE epilogue cuts: mul(y, s)
  // with s one factor per output column (the per-channel weight scale of a W8A8 projection, whose
  // matmul returns f32 sums), then a cast to the dtype the split's pieces have. The kernel scales
  // each sum by its column's factor and rounds once to the cast's dtype where the halves or heads
  // are formed (MatmulEpilogue::col_scale). Only before a split: elsewhere the two nodes are plain
  // pointwise epilogue nodes.
  struct ColumnScale {
    NodeId mul = -1, cast = -1;
    ValueId out = -1;  ///< the cast's result, which the split reads
  };
  std::optional<ColumnScale> column_scale(NodeId mm) const {
    const ValueId y = g_.node(mm).results[0];
    const Shape& ys = g_.value(y).type.shape;
    const NodeId m = sole_user(y);
    if (m < 0 || kind(m) != OpKind::Mul || ys.empty() || !ys.back().is_const()) return std::nullopt;
    const Node& mul = g_.node(m);
    const ValueId s = mul.operands[0] == y ? mul.operands[1] : mul.operands[0];
    const TensorType& st = g_.value(s).type;
    if (s == y || !is_float(st.dtype) || st.shape != Shape{ys.back()} || g_.value(mul.results[0]).type.shape != ys) return std::nullopt;
    const NodeId c = sole_user(mul.results[0]);
    if (c < 0 || kind(c) != OpKind::Cast || !is_float(g_.value(g_.node(c).results[0]).type.dtype)) return std::nullopt;
    const ValueId out = g_.node(c).results[0];
    const NodeId split = sole_user(out);
    if (split < 0 || kind(split) != OpKind::Split) return std::nullopt;
    return ColumnScale{m, c, out};
  }
  // Whether v's one reader splits it into the two halves of a SwiGLU: silu(first) * second, each
  // half read by that node alone (the pattern grow_matmul fuses).
  bool swiglu_split(ValueId v) const {
    const NodeId s = sole_user(v);
    if (s < 0 || kind(s) != OpKind::Split || g_.node(s).results.size() != 2) return false;
    const Node& split = g_.node(s);
    const ValueId gate = split.results[0], up = split.results[1];
    const NodeId act = sole_user(gate), mul = sole_user(up);
    const Shape& shape = g_.value(v).type.shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t axis = attr::axis(split.attrs) < 0 ? attr::axis(split.attrs) + rank : attr::axis(split.attrs);
    return g_.value(gate).type.shape == g_.value(up).type.shape && axis == rank - 1 && act >= 0 && mul >= 0 &&
           kind(act) == OpKind::Silu && kind(mul) == OpKind::Mul && sole_user(g_.node(act).results[0]) == mul;
  }
  bool absorb_column_scale(int gid, const ColumnScale& cs) {
    if (!try_absorb(gid, cs.mul, "per-column scale: each sum times its column's factor before the split") ||
        !try_absorb(gid, cs.cast, "the one rounding of the scaled sums, where the split's pieces are formed"))
      return false;
    MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
    ep.col_scale = cs.mul, ep.col_cast = cs.cast;
    return true;
  }

  // Epilogue of a matmul: SwiGLU of its two halves (split -> silu(first) * second), then a chain of
  // pointwise nodes each reading the previous value (bias, residual add, activation, cast/quantize).
  // Every step's input must have no other reader: the kernel keeps it in registers only.
  void grow_matmul(NodeId mm) {
    int gid = new_group(GroupKind::Matmul, mm);
    if (auto it = rope_refusals_.find(mm); it != rope_refusals_.end()) note(gid, "RoPE not fused into the epilogue: " + it->second);
    ValueId cur = g_.node(mm).results[0];
    // A column scale only where SwiGLU follows it (else the pointwise chain below takes both nodes).
    if (const std::optional<ColumnScale> cs = column_scale(mm); cs && swiglu_split(cs->out) && absorb_column_scale(gid, *cs)) cur = cs->out;
    if (swiglu_split(cur)) {
      const Node& split = g_.node(sole_user(cur));
      const ValueId gate = split.results[0], up = split.results[1];
      const NodeId act = sole_user(gate), mul = sole_user(up);
      if (try_absorb(gid, act, "SwiGLU gate, computed from the accumulators") &&
          try_absorb(gid, mul, fmt::format("SwiGLU: silu({}) * {} in the epilogue; {} never reaches memory, the output is half as wide",
                                            vname(gate), vname(up), vname(cur)))) {
        MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
        ep.silu = act, ep.mul = mul, ep.gate = gate, ep.up = up;
        cur = g_.node(mul).results[0];
      }
    }
    absorb_row_rms(gid, mm);
    absorb_row_scale_product(gid, mm);
    absorb_x_quantize(gid, mm);
    absorb_weight_dequant(gid, mm);
    absorb_x_norm(gid, mm);
    for (NodeId u = sole_user(cur); u >= 0 && is_pointwise(g_.node(u)) &&
                                    g_.value(g_.node(u).results[0]).type.shape == g_.value(cur).type.shape;
         u = sole_user(cur)) {
      if (!try_absorb(gid, u, fmt::format("epilogue on each output element of {} before its one store", vname(cur)))) break;
      groups_[static_cast<size_t>(gid)].matmul.pointwise.push_back(u);
      cur = g_.node(u).results[0];
    }
    absorb_row_tail(gid, mm, cur);
  }

  // One row: the per-row dynamic quantize of what the GEMV stores (`out`), and the rms_norm before
  // it, join the group as its row tail (MatmulEpilogue::tail_quantize). The CTA that finishes the
  // GEMV last reads the row back from L2 and runs the row kernel's body on it, where a kernel of one
  // CTA ran after the GEMV: the fp8 decode layer's norm + quantize after the o projection and its
  // quantize after gate/up. `out` is still stored (the tail reads it; the residual may too).
  void absorb_row_tail(int gid, NodeId mm, ValueId out) {
    if (!opts_.row_tails || !one_row(mm) || prepares_group(gid)) return;
    const Shape& s = g_.value(out).type.shape;
    if (s.empty() || !s.back().is_const()) return;
    auto row_quantize_of = [&](ValueId v) -> NodeId {
      for (NodeId u : uses_.users(v))
        if (owner(u) == kUnassigned && is_row_quantize(g_, g_.node(u)) && g_.node(u).operands[0] == v) return u;
      return -1;
    };
    NodeId norm = -1, q = row_quantize_of(out);
    for (NodeId u : uses_.users(out)) {
      if (q >= 0) break;
      const Node& un = g_.node(u);
      if (owner(u) != kUnassigned || un.kind != OpKind::RmsNorm || un.operands[0] != out) continue;
      const ValueId h = un.results[0];
      if (uses_.is_output(h) || uses_.users(h).size() != 1) continue;  // the normed row is stored: its row kernel stays
      if (const NodeId hq = row_quantize_of(h); hq >= 0) norm = u, q = hq;
    }
    if (q < 0) return;
    if (s.back().value() > kMaxRowTail) {
      note(gid, fmt::format("not absorbed {} = quantize as a row tail: rows of {} elements (the tail keeps a row in registers: at most {})",
                            nname(q), s.back().value(), kMaxRowTail));
      return;
    }
    const std::string what = norm >= 0 ? fmt::format("{} normalised and ", vname(out)) : "";
    if (norm >= 0 && !try_absorb(gid, norm, fmt::format("row tail: the last CTA to finish normalises the row it stored; {} never reaches memory",
                                                        vname(g_.node(norm).results[0]))))
      return;
    const bool quantized = try_absorb(gid, q, fmt::format("row tail: the last CTA to finish reads back the row of {}, {}quantized (amax, "
                                                          "scale, codes) by all its threads, where a row kernel ran after this one",
                                                          vname(out), what));
    LJ_ASSERT(quantized || norm < 0, "@{}: the row tail's rms_norm joined without its quantize", g_.name());
    if (!quantized) return;
    MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
    ep.tail_norm = norm, ep.tail_quantize = q, ep.tail_src = out;
  }

  // The rows of matmul mm's x at the sizes the plan is made for; nullopt where a symbol is unbound.
  std::optional<int64_t> rows(NodeId mm) const {
    const Shape& s = g_.value(g_.node(mm).operands[0]).type.shape;
    int64_t n = 1;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const std::optional<int64_t> v = s[i].is_const() ? std::optional<int64_t>(s[i].value()) : opts_.sizes.get(s[i].symbol());
      if (!v) return std::nullopt;
      n *= *v;
    }
    return n;
  }

  // Whether the sizes the plan is made for give matmul mm's x one row (FusionOptions::one_row_prologues).
  bool one_row(NodeId mm) const { return opts_.one_row_prologues && rows(mm) == std::optional<int64_t>(1); }

  // Decode sizes (at most 16 rows): the group-wise dequantize of 4-bit params that makes W joins the
  // matmul's group as its weight prologue. The kernel then streams the codes (a quarter of W's
  // bf16 bytes, plus a scale per group) where it would stream W; at more rows, or at sizes not
  // known, W is dequantized once (weight preparation) for the bf16 kernels, unless the options ask
  // for packed weights everywhere (FusionOptions::packed_weight_gemms: the GEMMs dequantize W's
  // tiles into shared memory).
  void absorb_weight_dequant(int gid, NodeId mm) {
    if (!opts_.weight_dequant_prologues) return;
    const ValueId w = g_.node(mm).operands[1];
    const NodeId d = producer(w);
    if (d < 0 || !is_group_dequantize(g_.node(d)) || owner(d) != kUnassigned) return;
    const std::optional<int64_t> m = rows(mm);
    if ((!m || *m > 16) && !opts_.packed_weight_gemms) {
      note(gid, fmt::format("not absorbed {} = dequantize: {}; the 4-bit GEMV takes at most 16 rows, so {} is dequantized once "
                            "(weight preparation) for the bf16 kernels (--packed-weights: the GEMMs read the codes)",
                            vname(w), m ? fmt::format("{} rows", *m) : std::string("rows not known at plan time"), vname(w)));
      return;
    }
    if (uses_.is_output(w) || uses_.users(w).size() != 1) {
      note(gid, fmt::format("not absorbed {} = dequantize: {} is read by more than this matmul", vname(w), vname(w)));
      return;
    }
    if (std::string why = weight_dequant_refusal(g_, g_.node(d)); !why.empty()) {
      note(gid, fmt::format("not absorbed {} = dequantize: {}", vname(w), why));
      return;
    }
    // A params-only node in a per-call group (try_absorb keeps those apart): W is made per call,
    // from the codes, in registers (the GEMV) or in shared memory (the GEMMs).
    add(gid, d);
    groups_[static_cast<size_t>(gid)].matmul.dequant = d;
    note(gid, fmt::format("absorbed {} = dequantize (weight prologue): the kernel reads the 4-bit codes {} and their scales, "
                          "dequantizing them in the kernel; {} never reaches memory",
                          vname(w), vname(g_.node(d).operands[0]), vname(w)));
  }

  // One row: the rms_scale of the matmul's own x (a folded norm's factor) joins its group. Each
  // GEMV warp reads the whole row of x for its dot product and adds up its squares on the way,
  // where a kernel of its own would run one CTA between the projection and the kernel before it.
  void absorb_row_rms(int gid, NodeId mm) {
    const Node& m = g_.node(mm);
    if (m.operands.size() != 3 || !one_row(mm)) return;
    const ValueId f = m.operands[2];
    const NodeId s = producer(f);
    if (s < 0 || kind(s) != OpKind::RmsScale || g_.node(s).operands[0] != m.operands[0]) return;
    if (uses_.is_output(f) || uses_.users(f).size() != 1) {
      note(gid, fmt::format("not absorbed {} = rms_scale: {} is read by more than this matmul", vname(f), vname(f)));
      return;
    }
    if (try_absorb(gid, s, fmt::format("one row: each warp adds up the squares of the row of {} it reads for its dot product",
                                       vname(m.operands[0]))))
      groups_[static_cast<size_t>(gid)].matmul.rms = s;
  }

  // The pointwise node making the matmul's row scale from per-row values and scalars (mul(%h_scale,
  // %s_qkv) in the fp8 layers) joins its group at any size: the kernel reads both where it read the
  // product, and a kernel of one element per row (launch-bound at any M) is gone.
  void absorb_row_scale_product(int gid, NodeId mm) {
    const Node& m = g_.node(mm);
    if (m.operands.size() != 3) return;
    const ValueId f = m.operands[2];
    const NodeId p = producer(f);
    if (p < 0 || !is_pointwise(g_.node(p)) || uses_.is_output(f) || uses_.users(f).size() != 1) return;
    const Shape& rows = g_.value(f).type.shape;
    for (ValueId v : g_.node(p).operands) {
      const Shape& s = g_.value(v).type.shape;
      const bool scalar = std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_const() && d.value() == 1; });
      if (s != rows && !scalar) return;
    }
    if (try_absorb(gid, p, fmt::format("row-scale prologue: the kernel computes {} per row from its operands where it reads it",
                                       vname(f))))
      groups_[static_cast<size_t>(gid)].matmul.row_scale_product = p;
  }

  // One row, fp8 or i8 x: the per-row dynamic quantize that makes x's codes (and the scale the row
  // scale reads), and the rms_norm before it when the quantize alone reads the normed row, join the
  // matmul's group. Each CTA of the GEMV then reads the row (8-28 KB, from L2), reduces it and
  // writes the codes into its shared memory, where a row kernel of one CTA ran between this
  // projection and the kernel before it (the FP8 decode layer's four quantize kernels).
  void absorb_x_quantize(int gid, NodeId mm) {
    if (!one_row(mm)) return;
    if (!opts_.quantize_prologues) {
      const Dim& n = g_.value(g_.node(mm).results[0]).type.shape.back();
      if (!n.is_const() || n.value() > opts_.quantize_prologue_rows) return;
    }
    const ValueId x = g_.node(mm).operands[0];
    const NodeId q = producer(x);
    if (q < 0 || !is_dynamic_quantize(g_.node(q)) || !is_row_quantize(g_, g_.node(q)) || owner(q) != kUnassigned) return;
    const Node& qn = g_.node(q);
    const DType codes = g_.value(x).type.dtype;
    if ((!is_fp8(codes) && codes != DType::I8) || qn.results[0] != x) return;
    const ValueId h = qn.operands[0], s = qn.results[1];
    auto refuse = [&](const std::string& why) { note(gid, fmt::format("not absorbed {} = quantize: {}", nname(q), why)); };
    if (uses_.is_output(x) || uses_.users(x).size() != 1) return refuse(fmt::format("{} is read by more than this matmul", vname(x)));
    const auto& readers = uses_.users(s);
    if (uses_.is_output(s) || !std::all_of(readers.begin(), readers.end(), [&](NodeId u) { return owner(u) == gid; }))
      return refuse(fmt::format("its scale {} is read outside this matmul's row scale", vname(s)));
    const Dim& k = g_.value(h).type.shape.back();
    if (!k.is_const() || k.value() > kMaxQuantizePrologueK || k.value() % 16 != 0)
      return refuse(fmt::format("the kernel keeps a row's codes in shared memory: rows of a constant multiple of 16 up to {} elements",
                                kMaxQuantizePrologueK));
    if (!try_absorb(gid, q, fmt::format("one row: each CTA quantizes the row of {} it reads into shared memory (amax, scale, codes); "
                                        "{} and {} never reach memory",
                                        vname(h), vname(x), vname(s))))
      return;
    MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
    ep.x_quantize = q;
    const NodeId n = producer(h);
    if (n < 0 || kind(n) != OpKind::RmsNorm || owner(n) != kUnassigned || uses_.is_output(h) || uses_.users(h).size() != 1) return;
    if (try_absorb(gid, n, fmt::format("one row: each CTA normalises the row it quantizes; {} never reaches memory", vname(h))))
      ep.x_norm = n;
  }

  // One row, W from 4-bit codes (a weight prologue): the rms_norm making x joins the group. Its
  // weight cannot fold into the codes as fold_norms folds it into a bf16 W, so the tensor-core GEMV
  // multiplies the x it loads by the weight and adds up x's squares on the tensor cores as it goes;
  // the row's factor scales the sums after the warps' partials meet, so no serial prologue holds the
  // codes back (what made the activation-quantize prologues slow), and a kernel of one CTA before
  // the projection is gone.
  void absorb_x_norm(int gid, NodeId mm) {
    const MatmulEpilogue& ep = groups_[static_cast<size_t>(gid)].matmul;
    if (!opts_.norm_prologues || !one_row(mm) || ep.dequant < 0 || ep.x_quantize >= 0) return;
    const ValueId h = g_.node(mm).operands[0];
    const NodeId n = producer(h);
    if (n < 0 || kind(n) != OpKind::RmsNorm || owner(n) != kUnassigned) return;
    auto refuse = [&](const std::string& why) { note(gid, fmt::format("not absorbed {} = rms_norm: {}", vname(h), why)); };
    if (uses_.is_output(h) || uses_.users(h).size() != 1) return refuse(fmt::format("{} is read by more than this matmul", vname(h)));
    const DType t = g_.value(h).type.dtype;
    for (ValueId v : g_.node(n).operands)
      if (g_.value(v).type.dtype != t)
        return refuse(fmt::format("the kernel multiplies x by the norm's weight in pairs of {}: {} is {}", dtype_name(t), vname(v),
                                  dtype_name(g_.value(v).type.dtype)));
    if (try_absorb(gid, n, fmt::format("one row: the 4-bit GEMV multiplies the {} it loads by {} and adds up its squares on the tensor "
                                       "cores, the row's factor applied to the sums; {} never reaches memory",
                                       vname(g_.node(n).operands[0]), vname(g_.node(n).operands[1]), vname(h))))
      groups_[static_cast<size_t>(gid)].matmul.x_norm = n;
  }

  // Prologue: an elementwise producer of the reduced operand with the same shape (residual add).
  void absorb_prologue(int gid, ValueId x) {
    NodeId p = producer(x);
    if (p >= 0 && is_pointwise(g_.node(p)) && g_.value(g_.node(p).results[0]).type.shape == g_.value(x).type.shape)
      try_absorb(gid, p, "prologue");
  }

  void grow_row_reduction(NodeId red) {
    int gid = new_group(GroupKind::RowReduce, red);
    absorb_prologue(gid, g_.node(red).operands[0]);
    // Epilogue: a single elementwise or cast consumer of the result over the same shape.
    ValueId y = g_.node(red).results[0];
    const auto& users = uses_.users(y);
    if (users.size() == 1 && !uses_.is_output(y)) {
      NodeId u = users[0];
      if (is_pointwise(g_.node(u)) && same_iteration_space(g_, red, u) && try_absorb(gid, u, "epilogue"))
        y = g_.node(u).results[0];
    }
    // A per-row dynamic quantize of the row: its amax is one more block reduction over values the
    // kernel holds in registers. It joins even when the row has other readers (then the row is
    // stored as well), because a kernel of its own would read the whole row back.
    bool quantized = false;
    for (NodeId u : uses_.users(y)) {
      if (!is_dynamic_quantize(g_.node(u))) continue;
      if (!quantized && is_row_quantize(g_, g_.node(u)) && same_iteration_space(g_, red, u)) {
        quantized = try_absorb(gid, u, fmt::format("epilogue: per-row dynamic quantization of {}, its amax and scale "
                                                   "reduced in the same kernel", vname(y)));
      } else if (!is_row_quantize(g_, g_.node(u))) {
        note(gid, fmt::format("not absorbed {} = quantize: its scale spans more than one row (axis = {}), so it needs "
                              "a reduction of its own", nname(u), axis_text(attr::scale_axis(g_.node(u).attrs))));
      }
    }
  }

  void grow_row_quantize(NodeId q) {
    int gid = new_group(GroupKind::RowReduce, q);
    note(gid, fmt::format("per-row dynamic quantization of {}: amax, scale and codes in one kernel",
                          vname(g_.node(q).operands[0])));
    absorb_prologue(gid, g_.node(q).operands[0]);
  }

  void grow_elementwise(NodeId seed) {
    int gid = new_group(GroupKind::Elementwise, seed);
    // Grow to a fixed point over producers and consumers in the same iteration space. A member whose
    // every such neighbour has a group already can absorb nothing more (owners never change), so
    // each pass visits only the others, in member order: a chain of n ops costs O(n), not O(n^2).
    auto eligible = [&](NodeId n) { return is_pointwise(g_.node(n)) && same_iteration_space(g_, n, seed); };
    auto open = [&](NodeId m) {
      for (ValueId v : g_.node(m).operands)
        if (NodeId p = producer(v); p >= 0 && owner(p) == kUnassigned && eligible(p)) return true;
      for (ValueId r : g_.node(m).results)
        for (NodeId u : uses_.users(r))
          if (owner(u) == kUnassigned && eligible(u)) return true;
      return false;
    };
    std::vector<NodeId> active{seed};
    for (bool changed = true; changed;) {
      changed = false;
      const size_t before = members(gid).size();
      for (NodeId m : active) {
        for (ValueId v : g_.node(m).operands) {
          NodeId p = producer(v);
          if (p >= 0 && eligible(p)) changed |= try_absorb(gid, p, "producer");
        }
        for (ValueId r : g_.node(m).results)
          for (NodeId u : uses_.users(r))
            if (eligible(u)) changed |= try_absorb(gid, u, "consumer");
      }
      // The next pass: this pass's members still open, then the ones it added, in member order.
      std::vector<NodeId> next;
      for (NodeId m : active)
        if (open(m)) next.push_back(m);
      for (size_t i = before; i < members(gid).size(); ++i)
        if (open(members(gid)[i])) next.push_back(members(gid)[i]);
      active = std::move(next);
    }
  }

  void single(NodeId n) {
    GroupKind k = GroupKind::Copy;
    switch (op_class(kind(n))) {
      case OpClass::Matmul: k = GroupKind::Matmul; break;
      case OpClass::Attention: k = GroupKind::Attention; break;
      case OpClass::RowReduction: k = GroupKind::RowReduce; break;
      case OpClass::RopeKv: k = kind(n) == OpKind::RopeTable ? GroupKind::RopeTable : GroupKind::RopeKvWrite; break;
      case OpClass::Reduction: k = GroupKind::Reduce; break;
      case OpClass::Elementwise:
        // A quantize without a scale operand finds its scale first: a row kernel for a per-row
        // scale, else a reduction (a per-tensor or per-column scale).
        // A group-wise dequantize reads scales by column group (and 4-bit codes by nibble): an
        // elementwise kernel of its own.
        k = is_pointwise(g_.node(n)) || is_group_dequantize(g_.node(n)) ? GroupKind::Elementwise
            : is_row_quantize(g_, g_.node(n))                           ? GroupKind::RowReduce
                                                                        : GroupKind::Reduce;
        break;
      case OpClass::Movement: k = kind(n) == OpKind::Embedding ? GroupKind::Gather : GroupKind::Copy; break;
      case OpClass::View: LJ_ASSERT(false, "views get no group"); break;
      case OpClass::Communication: k = GroupKind::AllReduce; break;
    }
    int gid = new_group(k, n);
    if (!opts_.fuse) note(gid, "--no-fuse: one kernel per op");
  }

  // Computes inputs/outputs/internals and orders groups topologically (ties: first node).
  std::vector<FusionGroup> order_and_finish() {
    // A value's home group: its producer's group, looking through views to what they alias.
    auto home = [&](ValueId v) -> int {
      for (;;) {
        NodeId p = producer(v);
        if (p < 0) return kUnassigned;
        if (!is_view(kind(p))) return owner(p);
        v = g_.node(p).operands[0];
      }
    };
    for (auto& grp : groups_) std::sort(grp.nodes.begin(), grp.nodes.end());
    // Dependencies between groups.
    std::vector<std::set<int>> deps(groups_.size());
    for (auto& grp : groups_)
      for (NodeId n : grp.nodes)
        for (ValueId v : g_.node(n).operands) {
          int h = home(v);
          if (h != kUnassigned && h != grp.id) deps[static_cast<size_t>(grp.id)].insert(h);
        }
    // Kahn's algorithm, the ready group of least rank first: weight preparation first (it runs
    // before any call), then by first node.
    std::vector<std::vector<int>> dependents(groups_.size());
    std::vector<size_t> waiting(groups_.size(), 0);
    for (const auto& grp : groups_) {
      waiting[static_cast<size_t>(grp.id)] = deps[static_cast<size_t>(grp.id)].size();
      for (int d : deps[static_cast<size_t>(grp.id)]) dependents[static_cast<size_t>(d)].push_back(grp.id);
    }
    using Rank = std::tuple<bool, NodeId, int>;
    auto rank = [&](int id) { return Rank(!prepares_group(id), members(id).front(), id); };
    std::priority_queue<Rank, std::vector<Rank>, std::greater<Rank>> ready;
    for (const auto& grp : groups_)
      if (waiting[static_cast<size_t>(grp.id)] == 0) ready.push(rank(grp.id));
    std::vector<int> order;
    while (!ready.empty()) {
      const int best = std::get<2>(ready.top());
      ready.pop();
      order.push_back(best);
      for (int u : dependents[static_cast<size_t>(best)])
        if (--waiting[static_cast<size_t>(u)] == 0) ready.push(rank(u));
    }
    LJ_ASSERT(order.size() == groups_.size(), "fusion groups of @{} form a cycle", g_.name());
    std::vector<FusionGroup> out;
    for (int old : order) {
      FusionGroup grp = groups_[static_cast<size_t>(old)];
      grp.id = static_cast<int>(out.size());
      fill_io(grp, old);
      out.push_back(std::move(grp));
    }
    return out;
  }

  void fill_io(FusionGroup& grp, int gid) {
    auto in_group = [&](NodeId n) { return n >= 0 && owner(n) == gid; };
    // A view of a value computed in the group is computed in the group (the two halves of a fused
    // SwiGLU projection); a value escapes when a reader outside the group sees it, through views too.
    auto made_inside = [&](ValueId v) {
      for (NodeId p = producer(v); p >= 0; p = producer(v)) {
        if (!is_view(kind(p))) return in_group(p);
        v = g_.node(p).operands[0];
      }
      return false;
    };
    // A dense view is stored by the group that makes it (below), not through the value it views.
    auto dense = [&](ValueId v) { return std::find(dense_.begin(), dense_.end(), v) != dense_.end(); };
    std::function<bool(ValueId)> escapes = [&](ValueId v) {
      if (uses_.is_output(v)) return true;
      for (NodeId u : uses_.users(v)) {
        if (!is_view(kind(u))) {
          if (!in_group(u)) return true;
          continue;
        }
        for (ValueId r : g_.node(u).results)
          if (!dense(r) && escapes(r)) return true;
      }
      return false;
    };
    for (NodeId n : grp.nodes) {
      for (ValueId v : g_.node(n).operands)
        if (!made_inside(v) && std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end()) grp.inputs.push_back(v);
      // (A row tail's source is stored for the tail to read back, whoever else reads it.)
      for (ValueId r : g_.node(n).results) (escapes(r) || r == grp.matmul.tail_src ? grp.outputs : grp.internal).push_back(r);
    }
    for (ValueId d : dense_)
      if (made_inside(d)) grp.outputs.push_back(d);
    grp.dense_views = dense_;
    grp.prepare = prepares(anchor_node(g_, grp));
    if (grp.prepare)
      grp.why.push_back("weight preparation: reads params only, so it runs once when the weights are bound, not per call");
  }


  // Decode attentions that may read their cache before the kernel before them has finished, and
  // that kernel (the one launched just before: weight preparation runs apart), which lets them
  // launch early.
  void mark_cache_prefetch(std::vector<FusionGroup>& groups) const {
    for (size_t i = 1; i < groups.size(); ++i) {
      FusionGroup& grp = groups[i];
      if (grp.kind != GroupKind::Attention || grp.prepare) continue;
      const std::string refusal = cache_prefetch_refusal(g_, uses_, g_.node(grp.nodes[0]));
      if (!refusal.empty()) continue;
      size_t prev = i;
      while (prev > 0 && groups[prev - 1].prepare) --prev;
      if (prev == 0 || groups[prev - 1].kind == GroupKind::AllReduce) continue;  // nothing to overlap, or NCCL's kernel
      grp.cache_before_wait = true;
      grp.why.push_back(fmt::format("cache before the wait: loads the cache's rows before %{}'s positions while group {} runs "
                                    "(no kernel of the graph writes them), then waits for its writes",
                                    g_.value(g_.node(grp.nodes[0]).operands[3]).name, groups[prev - 1].id));
      groups[prev - 1].trigger_dependents = true;
      groups[prev - 1].why.push_back(fmt::format("lets group {} (attention) launch once its CTAs have all started", grp.id));
    }
  }

  const Graph& g_;
  FusionOptions opts_;
  UseMap uses_;
  std::vector<int> owner_;
  std::vector<FusionGroup> groups_;
  std::vector<ValueId> dense_;                  // FusionPlan::dense_views
  std::map<NodeId, std::string> rope_refusals_;  // why a projection's ropes stayed out of its epilogue
  std::vector<bool> constant_;                  // per value: computed from params alone
  std::vector<std::pair<NodeId, NodeId>> span_;  // per group: its lowest and highest node ids
};

}  // namespace

std::string_view group_kind_name(GroupKind k) {
  switch (k) {
#define LJ_X(id, name) \
  case GroupKind::id: return name;
    LJ_GROUP_KINDS(LJ_X)
#undef LJ_X
  }
  LJ_ASSERT(false, "unhandled group kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

FusionPlan plan_fusion(const Graph& g, const FusionOptions& opts) { return Partitioner(g, opts).run(); }

NodeId anchor_node(const Graph& g, const FusionGroup& grp) {
  LJ_ASSERT(!grp.nodes.empty(), "group {} has no nodes", grp.id);
  if (grp.kind == GroupKind::Matmul)
    for (NodeId n : grp.nodes)
      if (g.node(n).kind == OpKind::Matmul) return n;
  return grp.nodes.front();
}

}  // namespace lj
