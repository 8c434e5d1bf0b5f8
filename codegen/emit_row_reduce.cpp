// Row-reduction groups: rms_norm, layer_norm or softmax over the last axis (or rms_scale, which
// stores only the factor rms_norm would apply: one float per row, for a folded norm), with an elementwise
// prologue (the residual add) and epilogue (cast, quantize), and optionally a per-row dynamic
// quantize of the result (or a dynamic quantize alone, with its prologue). One CTA per row: the row
// is loaded once into registers (prologue applied, escaping prologue values stored), reduced with
// block-wide sums, then normalised, passed through the epilogue and stored. One read and one write
// per element.
//
// A dynamic quantize keeps the row it quantizes in the same registers, reduces it to its amax (one
// more block reduction), computes the scale there and stores the codes and, from one thread, the
// row's scale: the row it quantizes reaches device memory only if another kernel reads it.
#include <algorithm>
#include <functional>

#include "codegen/emit_row_reduce.h"
#include "codegen/emit_argmax.h"
#include "codegen/emitters.h"
#include "compiler/fusion/legality.h"
#include "layerjit/text.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"

namespace lj {

namespace {
bool contains(const std::vector<ValueId>& vs, ValueId v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); }

// KernelContext::group_vector_width, less the values that are not indexed by the row's elements
// (a dynamic quantize's scale: one per row), which neither limit nor widen the row's accesses.
int row_vector_width(const KernelContext& ctx, const FusionGroup& grp, const Shape& space, const std::vector<ValueId>& per_row) {
  const Graph& g = ctx.graph();
  std::vector<ValueId> accessed;
  for (const auto* list : {&grp.inputs, &grp.outputs})
    for (ValueId v : *list)
      if (!contains(per_row, v)) accessed.push_back(v);
  int widest = 1;
  for (ValueId v : accessed) widest = std::max(widest, dtype_bytes(g.value(v).type.dtype));
  return ctx.vector_width(accessed, space, 16 / widest);
}
}  // namespace

RowReducePlan plan_row_reduce(const Graph& g, const FusionGroup& grp) {
  RowReducePlan p;
  const std::string name = kernel_name(g, grp);
  for (NodeId n : grp.nodes) {
    if (is_row_reduction(g.node(n).kind)) p.red = n;
    if (is_dynamic_quantize(g.node(n))) p.dq = n;
  }
  if (p.red < 0 && p.dq < 0) {
    p.reject = fmt::format("{}: a row_reduce group without rms_norm, layer_norm, softmax or a dynamic quantize has no kernel yet", name);
    return p;
  }
  LJ_ASSERT(p.dq < 0 || (is_row_quantize(g, g.node(p.dq)) && p.dq == grp.nodes.back()),
            "{}: the planner gives a row kernel only a per-row dynamic quantize, as its last node", name);
  p.first = p.red >= 0 ? p.red : p.dq;
  const Node& first_node = g.node(p.first);
  p.space = g.value(first_node.operands[0]).type.shape;
  if (p.red >= 0 && g.node(p.red).kind == OpKind::Softmax) {
    const Node& rn = g.node(p.red);
    int64_t axis = attr::axis(rn.attrs);
    if (axis < 0) axis += static_cast<int64_t>(p.space.size());
    if (axis + 1 != static_cast<int64_t>(p.space.size())) {
      p.reject = fmt::format("{}: softmax over axis {} of {}: the row kernel reduces the last axis only (transpose first)", name, axis,
                             g.value(rn.operands[0]).type.str());
      p.loc = rn.loc;
      return p;
    }
  }
  if (!p.space.back().is_const()) {
    p.reject = fmt::format("{}: the reduced axis of {} must be a constant", name, g.value(first_node.operands[0]).type.str());
    p.loc = first_node.loc;
  }
  return p;
}

// Threads: enough to cover the row in one pass of V-wide accesses, 32..256.
RowGeometry row_geometry(const KernelContext& ctx, const FusionGroup& grp, const RowReducePlan& plan) {
  const Graph& g = ctx.graph();
  std::vector<ValueId> per_row;  // the dynamic quantize's scale, rms_scale's factor: one per row
  if (plan.dq >= 0) per_row.push_back(g.node(plan.dq).results[1]);
  if (plan.red >= 0 && g.node(plan.red).kind == OpKind::RmsScale) per_row.push_back(g.node(plan.red).results[0]);
  RowGeometry r;
  r.vec = row_vector_width(ctx, grp, plan.space, per_row);
  const int64_t D = plan.space.back().value();
  r.threads = static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, (D / r.vec + 31) / 32 * 32)));
  return r;
}

void emit_row_body(SourceWriter& w, KernelContext& ctx, const FusionGroup& grp, const RowReducePlan& plan, int threads,
                   const std::function<void(SourceWriter&)>& row_lines, ValueId past_l1) {
  const Graph& g = ctx.graph();
  const NodeId red = plan.red, dq = plan.dq, first = plan.first;
  const Node& first_node = g.node(first);
  const Shape& space = plan.space;
  const int64_t D = space.back().value();
  const RowGeometry geo = row_geometry(ctx, grp, plan);
  const int vec = geo.vec;
  const bool scale_only = red >= 0 && g.node(red).kind == OpKind::RmsScale;
  const int64_t chunks = (D + static_cast<int64_t>(threads) * vec - 1) / (static_cast<int64_t>(threads) * vec);
  const bool ragged = D % (static_cast<int64_t>(threads) * vec) != 0;
  w.line("constexpr int V = {};        // elements per access", vec);
  w.line("constexpr int D = {};     // row length (reduced axis)", D);
  w.line("constexpr int CHUNKS = {};   // V-wide chunks per thread", chunks);
  row_lines(w);

  // Coordinates of a chunk: the row's leading coordinates and the column.
  auto coords_at = [&](SourceWriter& sw, const std::string& col) {
    Shape lead(space.begin(), space.end() - 1);
    std::vector<std::string> c = emit_coords(sw, lead, "row", "r");
    c.push_back(col);
    return c;
  };
  const int rank = static_cast<int>(space.size());
  // Loads every group input that `nodes` read (and `extra`), once per way of reading it.
  auto load_inputs = [&](SourceWriter& sw, const std::vector<NodeId>& nodes, const std::vector<ValueId>& extra,
                         const std::vector<std::string>& coords, std::map<OperandRead, std::string>& loaded) {
    std::vector<OperandRead> reads;
    for (NodeId n : nodes)
      for (int i = 0; i < static_cast<int>(g.node(n).operands.size()); ++i) reads.push_back(operand_read(g, g.node(n), i, rank));
    for (ValueId v : extra) reads.push_back(OperandRead{v, -1});
    for (const OperandRead& rd : reads) {
      const ValueId v = rd.value;
      if (!contains(grp.inputs, v) || loaded.count(rd)) continue;
      const std::string r = "v_" + ident(g.value(v).name) + (rd.axis >= 0 ? fmt::format("_axis{}", rd.axis) : "");
      if (ctx.varies_innermost(v, space, rd.axis)) {
        sw.line("float {}[V];  // %{}", r, g.value(v).name);
        sw.line("{}<{}, V>({} + {}, {});", v == past_l1 ? "lj_load_cg" : "lj_load", c_type(g.value(v).type.dtype),
                ctx.buffer_param(v, false), ctx.address(v, space, coords, rd.axis), r);
        loaded[rd] = r + "[j]";
      } else {
        sw.line("const float {} = lj_to_float({}[{}]);  // %{}", r, ctx.buffer_param(v, false),
                ctx.address(v, space, coords, rd.axis), g.value(v).name);
        loaded[rd] = r;
      }
    }
  };

  std::vector<NodeId> prologue, epilogue;
  for (NodeId n : grp.nodes) {
    if (n < first) prologue.push_back(n);
    if (red >= 0 && n > red && n != dq) epilogue.push_back(n);
  }
  const ValueId x = first_node.operands[0];
  const std::string chunk_guard = ragged ? "if (col < D) " : "";

  // Pass 1: load the row, apply the prologue, keep the reduced operand in registers.
  w.line("float xs[CHUNKS][V];");
  {
    w.line("#pragma unroll");
    auto loop = w.scope("for (int k = 0; k < CHUNKS; ++k)");
    w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
    if (ragged) w.line("if (col >= D) {{ for (int j = 0; j < V; ++j) xs[k][j] = 0.f; continue; }}");
    auto coords = coords_at(w, "col");
    std::map<OperandRead, std::string> loaded;
    std::map<ValueId, std::string> reg;
    load_inputs(w, prologue, {x}, coords, loaded);
    if (contains(grp.inputs, x)) reg[x] = loaded.at(OperandRead{x, -1});
    std::vector<ValueId> stored;
    for (NodeId n : prologue)
      if (contains(grp.outputs, g.node(n).results[0])) stored.push_back(g.node(n).results[0]);
    for (ValueId v : stored) w.line("float y_{}[V];", ident(g.value(v).name));
    {
      w.line("#pragma unroll");
      auto inner = w.scope("for (int j = 0; j < V; ++j)");
      for (NodeId n : prologue) emit_pointwise_node(w, g, n, rank, grp.inputs, loaded, reg, stored);
      w.line("xs[k][j] = {};", reg.at(x));
    }
    for (ValueId v : stored)
      w.line("lj_store<{}, V>({} + {}, y_{});", c_type(g.value(v).type.dtype), ctx.buffer_param(v, true),
             ctx.address(v, space, coords), ident(g.value(v).name));
  }

  if (red >= 0) {
    // The reduction.
    const Node& rn = g.node(red);
    w.comment(print_node(g, red));
    switch (rn.kind) {
      case OpKind::RmsNorm:
      case OpKind::RmsScale:
        w.line("float ss = 0.f;");
        w.line("for (int k = 0; k < CHUNKS; ++k) for (int j = 0; j < V; ++j) ss += xs[k][j] * xs[k][j];");
        w.line("const float scale = rsqrtf(lj_block_sum(ss) / (float)D + {}f);", attr::eps(rn.attrs));
        break;
      case OpKind::LayerNorm:
        w.line("float s1 = 0.f;");
        w.line("for (int k = 0; k < CHUNKS; ++k) for (int j = 0; j < V; ++j) s1 += xs[k][j];");
        w.line("const float mean = lj_block_sum(s1) / (float)D;");
        w.line("float s2 = 0.f;");
        {
          auto lk = w.scope("for (int k = 0; k < CHUNKS; ++k)");
          w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
          w.line("{}for (int j = 0; j < V; ++j) {{ const float d = xs[k][j] - mean; s2 += d * d; }}", chunk_guard);
        }
        w.line("const float scale = rsqrtf(lj_block_sum(s2) / (float)D + {}f);", attr::eps(rn.attrs));
        break;
      case OpKind::Softmax:
        w.line("float mx = -__int_as_float(0x7f800000);");
        {
          auto lk = w.scope("for (int k = 0; k < CHUNKS; ++k)");
          w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
          w.line("{}for (int j = 0; j < V; ++j) mx = fmaxf(mx, xs[k][j]);", chunk_guard);
        }
        w.line("mx = lj_block_max(mx);");
        w.line("float se = 0.f;");
        {
          auto lk = w.scope("for (int k = 0; k < CHUNKS; ++k)");
          w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
          w.line("{}for (int j = 0; j < V; ++j) {{ xs[k][j] = __expf(xs[k][j] - mx); se += xs[k][j]; }}", chunk_guard);
        }
        w.line("const float inv_sum = 1.f / lj_block_sum(se);");
        break;
      default: LJ_ASSERT(false, "not a row reduction: {}", op_name(rn.kind));
    }

    if (scale_only) {  // the factor is the result: no second pass over the row
      const ValueId s = rn.results[0];
      const Shape lead(space.begin(), space.end() - 1);
      const std::vector<std::string> rc = emit_coords(w, lead, "row", "s");
      w.line("if (threadIdx.x == 0) {}[{}] = scale;  // %{}", ctx.buffer_param(s, true), ctx.address(s, lead, rc), g.value(s).name);
    }

    // Pass 2: normalise, epilogue, store.
    if (!scale_only) {
      w.line("#pragma unroll");
      auto loop = w.scope("for (int k = 0; k < CHUNKS; ++k)");
      w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
      if (ragged) w.line("if (col >= D) continue;");
      auto coords = coords_at(w, "col");
      std::map<OperandRead, std::string> loaded;
      std::map<ValueId, std::string> reg;
      std::vector<ValueId> weights(rn.operands.begin() + 1, rn.operands.end());
      load_inputs(w, epilogue, weights, coords, loaded);
      for (ValueId v : weights) reg[v] = loaded.at(OperandRead{v, -1});
      std::vector<ValueId> stored;
      for (NodeId n : grp.nodes)
        if (n >= red && n != dq && contains(grp.outputs, g.node(n).results[0])) stored.push_back(g.node(n).results[0]);
      for (ValueId v : stored) w.line("float y_{}[V];", ident(g.value(v).name));
      {
        w.line("#pragma unroll");
        auto inner = w.scope("for (int j = 0; j < V; ++j)");
        const ValueId y = rn.results[0];
        const std::string ty = "t_" + ident(g.value(y).name);
        switch (rn.kind) {
          case OpKind::RmsNorm:
            w.line("const float {} = xs[k][j] * scale * {};  // {}", ty, reg.at(rn.operands[1]), print_node(g, red));
            break;
          case OpKind::LayerNorm:
            w.line("const float {} = (xs[k][j] - mean) * scale * {} + {};  // {}", ty, reg.at(rn.operands[1]),
                   reg.at(rn.operands[2]), print_node(g, red));
            break;
          case OpKind::Softmax: w.line("const float {} = xs[k][j] * inv_sum;  // {}", ty, print_node(g, red)); break;
          default: LJ_ASSERT(false, "not a row reduction: {}", op_name(rn.kind));
        }
        // The reduction's own result rounds to its dtype before the epilogue, as if it were stored.
        reg[y] = rounded_expr(g.value(y).type.dtype, ty);
        if (contains(stored, y)) w.line("y_{}[j] = {};", ident(g.value(y).name), ty);
        for (NodeId n : epilogue) emit_pointwise_node(w, g, n, rank, grp.inputs, loaded, reg, stored);
        // The row the dynamic quantize reads stays in registers (padding columns keep their 0).
        if (dq >= 0) w.line("xs[k][j] = {};", reg.at(g.node(dq).operands[0]));
      }
      for (ValueId v : stored)
        w.line("lj_store<{}, V>({} + {}, y_{});", c_type(g.value(v).type.dtype), ctx.buffer_param(v, true),
               ctx.address(v, space, coords), ident(g.value(v).name));
    }
  }

  if (dq >= 0) {
    // The row's amax (padding columns hold 0, which leaves it unchanged), its scale, then the codes.
    const Node& qn = g.node(dq);
    const ValueId q = qn.results[0];
    const ValueId qs = qn.results[1];
    const char* qtype = c_type(g.value(q).type.dtype);
    w.comment(print_node(g, dq));
    w.line("float amax = 0.f;");
    w.line("for (int k = 0; k < CHUNKS; ++k) for (int j = 0; j < V; ++j) amax = fmaxf(amax, fabsf(xs[k][j]));");
    w.line("const float qscale = lj_quant_scale<{}>(lj_block_max(amax));", qtype);
    w.line("if (threadIdx.x == 0) {}[{}] = qscale;", ctx.buffer_param(qs, true),
           ctx.address(qs, space, {"row", "0"}, 0));
    w.line("#pragma unroll");
    auto loop = w.scope("for (int k = 0; k < CHUNKS; ++k)");
    w.line("const int col = (k * {} + threadIdx.x) * V;", threads);
    if (ragged) w.line("if (col >= D) continue;");
    auto coords = coords_at(w, "col");
    const std::string yq = "y_" + ident(g.value(q).name);
    w.line("float {}[V];", yq);
    w.line("#pragma unroll");
    w.line("for (int j = 0; j < V; ++j) {}[j] = lj_quant_div(xs[k][j], qscale);", yq);
    w.line("lj_store<{}, V>({} + {}, {});", qtype, ctx.buffer_param(q, true), ctx.address(q, space, coords), yq);
  }
}

namespace {

GeneratedKernel emit_row_reduce(const Graph& g, const FusionGroup& grp) {
  const RowReducePlan plan = plan_row_reduce(g, grp);
  if (!plan.reject.empty()) throw UserError(plan.reject, plan.loc);
  KernelContext ctx(g, grp);
  const Shape& space = plan.space;
  const int threads = row_geometry(ctx, grp, plan).threads;

  ctx.add_group_params();

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.line("#include \"layerjit/math.cuh\"");
  w.line("#include \"layerjit/reduce.cuh\"");
  if (plan.dq >= 0) w.line("#include \"layerjit/quant.cuh\"");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(threads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    w.line("lj_pdl_launch_dependents();  // the next kernel may launch while the row is reduced");
    emit_row_body(w, ctx, grp, plan, threads, [&](SourceWriter& sw) {
      sw.line("const lj_i64 rows = {};", product_expr(dim_product(Shape(space.begin(), space.end() - 1))));
      sw.line("const lj_i64 row = blockIdx.x;");
      sw.line("if (row >= rows) return;");
    }, -1);
  }
  GeneratedKernel k;
  k.group = grp.id;
  k.name = ctx.kernel_name();
  k.params = ctx.params();
  k.launch.work = dim_product(Shape(space.begin(), space.end() - 1));
  k.launch.per_block = 1;
  k.launch.threads = threads;
  k.launch.early = true;  // one small CTA per row: where the CTAs land does not matter
  k.source = w.str();
  return k;
}

}  // namespace

const KernelFamily& row_reduce_family() {
  // An argmax takes its own kernel (emit_argmax.cpp): its result is an index, not a row.
  static const UntunedFamily family(
      GroupKind::RowReduce,
      [](const Graph& g, const FusionGroup& grp) { return is_argmax_group(g, grp) ? argmax_reject(g, grp) : plan_row_reduce(g, grp).reject; },
      [](const Graph& g, const FusionGroup& grp) { return is_argmax_group(g, grp) ? emit_argmax(g, grp) : emit_row_reduce(g, grp); });
  return family;
}

}  // namespace lj
