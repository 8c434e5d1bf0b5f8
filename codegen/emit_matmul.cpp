// Matmul groups: y[m, n] = sum_k x[m, k] * w[n, k]. Two kernel families share the group: the decode
// GEMV (emit_gemv.cpp; W streamed once per few rows of x, bound by HBM bandwidth when M is small) and
// the tensor-core GEMM (emit_gemm.cpp; W read once per BM-row tile, bound by the tensor cores when M is
// large). The config — the autotuner's choice, or the default for the expected M — picks one.
#include "codegen/emit_matmul.h"

#include <algorithm>
#include <map>

#include "codegen/emit_row_reduce.h"
#include "codegen/emitters.h"
#include "layerjit/op_attrs.h"
#include "layerjit/text.h"
#include "layerjit/check.h"

namespace lj {

namespace {

bool unit_inner_stride(const TensorLayout& l) {
  return !l.strides.empty() && l.strides.back().symbols.empty() && l.strides.back().constant == 1;
}

}  // namespace

std::string row_address(SourceWriter& w, const KernelContext& ctx, ValueId v, const std::string& row, const std::string& last,
                        const std::string& stem) {
  const Shape& s = ctx.graph().value(v).type.shape;
  const Shape lead(s.begin(), s.end() - 1);
  std::vector<std::string> coords = emit_coords(w, lead, row, stem);
  coords.push_back(last);
  std::string a = ctx.address(v, s, coords);
  // "row * 4096LL + 0" reads better without the zero term of the column coordinate.
  if (last == "0" && a.size() > 4 && a.compare(a.size() - 4, 4, " + 0") == 0) a.resize(a.size() - 4);
  return a;
}

namespace {

bool contains(const std::vector<ValueId>& xs, ValueId v) { return std::find(xs.begin(), xs.end(), v) != xs.end(); }

// The segments of a RoPE epilogue (MatmulOperands::segments) from the planner's record: each piece
// stored as heads where the group returns them or a cache write reads them, rotated or not.
void rope_segments(const KernelContext& ctx, MatmulOperands& op) {
  const Graph& g = ctx.graph();
  const FusionGroup& grp = ctx.group();
  const MatmulEpilogue& ep = grp.matmul;
  auto dests = [&](ValueId v, const std::vector<NodeId>& writes, std::vector<MatmulOperands::Dest>& out) {
    if (contains(grp.outputs, v)) out.push_back({v, -1});
    for (NodeId n : writes) {
      op.pos = g.node(n).operands[2];  // the planner took only writes at the tables' positions
      out.push_back({-1, n});
    }
  };
  for (const MatmulEpilogue::RopePiece& p : ep.rope_pieces) {
    MatmulOperands::Segment s;
    s.c0 = p.c0, s.c1 = p.c1, s.d = p.d, s.heads = p.heads, s.rope = p.rope;
    dests(p.heads, p.writes, s.plain);
    if (s.rope >= 0) dests(g.node(s.rope).results[0], p.rotated_writes, s.rotated);
    op.segments.push_back(s);
  }
  op.cos = ep.cos, op.sin = ep.sin, op.rope_interleaved = ep.rope_interleaved, op.rope_dim = ep.rope_dim;
  op.out = -1;
  if (ep.table >= 0) {
    op.table = ep.table;
    op.pos = g.node(ep.table).operands[0];  // the cache writes' positions too (the planner took only those)
  }
}

// Every node the planner's record accounts for: a group node outside it (a part of a pattern that
// could not join, say) is one no matmul kernel implements.
bool recorded(const MatmulEpilogue& ep, NodeId n) {
  if (n == ep.silu || n == ep.mul || n == ep.table || n == ep.rms || n == ep.row_scale_product || n == ep.dequant || n == ep.col_scale ||
      n == ep.col_cast || n == ep.x_quantize || n == ep.x_norm || n == ep.tail_norm || n == ep.tail_quantize ||
      std::count(ep.pointwise.begin(), ep.pointwise.end(), n))
    return true;
  for (const MatmulEpilogue::RopePiece& p : ep.rope_pieces)
    if (n == p.rope || std::count(p.writes.begin(), p.writes.end(), n) || std::count(p.rotated_writes.begin(), p.rotated_writes.end(), n))
      return true;
  return false;
}

}  // namespace

MatmulOperands matmul_operands(const KernelContext& ctx) {
  const Graph& g = ctx.graph();
  const FusionGroup& grp = ctx.group();
  MatmulOperands op;
  auto fail = [&](std::string message, SourceLoc loc) {
    op.reject = std::move(message);
    op.reject_loc = std::move(loc);
    return op;
  };
  auto refuse = [&](const std::string& why) {
    return fail(fmt::format("{}: the matmul kernels cannot implement this group: {}", ctx.kernel_name(), why), {});
  };
  if (grp.nodes.empty() || g.node(anchor_node(g, grp)).kind != OpKind::Matmul) return refuse("it has no matmul node");
  op.node = anchor_node(g, grp);
  const Node& mm = g.node(op.node);
  op.x = mm.operands[0], op.w = mm.operands[1], op.y = mm.results[0];
  if (mm.operands.size() == 3) op.row_scale = mm.operands[2];
  op.rms = grp.matmul.rms;
  op.row_scale_product = grp.matmul.row_scale_product;
  if (grp.matmul.x_quantize >= 0) {  // x quantized in the kernel from x_src
    const Node& q = g.node(grp.matmul.x_quantize);
    op.x_quantize = grp.matmul.x_quantize;
    op.x_scale = q.results[1];
    op.x_src = q.operands[0];
  }
  op.x_norm = grp.matmul.x_norm;
  if (op.x_norm >= 0) {  // the rms_norm making x (or the quantize's input) folded in: x_src is its input
    op.x_src = g.node(op.x_norm).operands[0];
    op.x_gamma = g.node(op.x_norm).operands[1];
  }
  const Shape& xs = g.value(op.x).type.shape;
  const Shape& ws = g.value(op.w).type.shape;
  if (!ws[0].is_const() || !ws[1].is_const())
    return fail(fmt::format("{}: the weight %{} must have constant dimensions, got {}", ctx.kernel_name(), g.value(op.w).name,
                            g.value(op.w).type.str()),
                mm.loc);
  op.n = ws[0].value(), op.k = ws[1].value();
  // A weight prologue: W is made in registers from its codes, scales and zero points, params the
  // planner checked (weight_dequant_refusal: dense [N, K] codes, K and the group multiples of 32).
  if (grp.matmul.dequant >= 0) {
    const Node& d = g.node(grp.matmul.dequant);
    op.dequant = grp.matmul.dequant;
    op.wq = d.operands[0], op.ws = d.operands[1], op.wz = d.operands.size() > 2 ? d.operands[2] : -1;
    op.group = *attr::group(d.attrs);
  }
  // Views of x are splits and reshapes, which keep the innermost stride 1; the loads rely on it (the
  // row an activation-quantize prologue reads too).
  if (!unit_inner_stride(ctx.layout(op.x)) || (op.dequant < 0 && !unit_inner_stride(ctx.layout(op.w))) ||
      (op.x_src >= 0 && !unit_inner_stride(ctx.layout(op.x_src))) || (op.x_gamma >= 0 && !unit_inner_stride(ctx.layout(op.x_gamma))))
    return fail(fmt::format("{}: matmul kernels read rows of %{} and %{} contiguously; a view with a strided last axis needs a copy first",
                            ctx.kernel_name(), g.value(op.x).name, g.value(op.w).name),
                mm.loc);
  op.rows = dim_product(Shape(xs.begin(), xs.end() - 1));
  op.xt = g.value(op.x).type.dtype, op.wt = g.value(op.w).type.dtype, op.yt = g.value(op.y).type.dtype;
  op.out = op.y;
  op.n_out = op.n;
  op.ct = op.yt;

  const MatmulEpilogue& ep = grp.matmul;
  if (ep.col_scale >= 0 && ep.mul < 0 && ep.rope_pieces.empty()) {
    // No SwiGLU or RoPE joined after the column scale (its split stayed outside): the scale and the
    // cast are then plain epilogue nodes before the one store.
    op.epilogue = {ep.col_scale, ep.col_cast};
    op.out = g.node(ep.col_cast).results[0];
  } else if (ep.col_scale >= 0) {
    const Node& mul = g.node(ep.col_scale);
    op.col_scale = mul.operands[0] == op.y ? mul.operands[1] : mul.operands[0];
    op.ct = g.value(g.node(ep.col_cast).results[0]).type.dtype;
  }
  for (NodeId n : grp.nodes)
    if (n != op.node && !recorded(ep, n)) return refuse(fmt::format("{} is not part of an epilogue the planner matched", print_node(g, n)));
  if (!ep.rope_pieces.empty()) {
    rope_segments(ctx, op);
    return op;
  }
  if (ep.mul >= 0) {  // SwiGLU: silu(gate) * up over the two halves of y
    op.glu = true;
    op.gate = ep.gate, op.up = ep.up;
    op.n_out = op.n / 2;
    op.epilogue = {ep.silu, ep.mul};
    op.out = g.node(ep.mul).results[0];
  }
  for (NodeId n : ep.pointwise) {
    op.epilogue.push_back(n);
    op.out = g.node(n).results[0];
  }
  // A row tail stores its quantize's codes and scale besides.
  op.tail_norm = ep.tail_norm, op.tail_quantize = ep.tail_quantize;
  std::vector<ValueId> stored = grp.outputs;
  if (op.tail_quantize >= 0) {
    if (ep.tail_src != op.out) return refuse(fmt::format("its row tail reads %{}, not the end of the epilogue", g.value(ep.tail_src).name));
    std::erase_if(stored, [&](ValueId v) { return contains(g.node(op.tail_quantize).results, v); });
  }
  if (stored.size() != 1 || stored[0] != op.out)
    return refuse(fmt::format("it must store exactly one value, the end of the epilogue %{}", g.value(op.out).name));
  return op;
}

std::string row_scale_expr(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m,
                           const std::string& stem) {
  if (op.row_scale < 0) return "";
  LJ_ASSERT(op.rms < 0, "{}: the row scale is computed in the kernel (a one-row prologue), not read", ctx.kernel_name());
  if (op.row_scale == op.x_scale) return "xq_scale";  // the activation-quantize prologue's (W8A8)
  const Graph& g = ctx.graph();
  const Shape& lead = g.value(op.row_scale).type.shape;
  const std::vector<std::string> coords = emit_coords(w, lead, m, stem);
  if (op.row_scale_product < 0)
    return fmt::format("{}[{}]", ctx.buffer_param(op.row_scale, false), ctx.address(op.row_scale, lead, coords));
  // The product's operands at the row (or at 0: a scalar), combined as its elementwise kernel would.
  const Node& p = g.node(op.row_scale_product);
  std::vector<std::string> ops;
  for (ValueId v : p.operands) {
    const Shape& s = g.value(v).type.shape;
    const bool row = s == lead;
    const std::string at = row ? ctx.address(v, s, coords) : ctx.address(v, s, std::vector<std::string>(s.size(), "0"));
    if (v == op.x_scale) {  // computed by the kernel's activation-quantize prologue
      ops.push_back("xq_scale");
      continue;
    }
    ops.push_back(fmt::format("lj_to_float({}[{}])", ctx.buffer_param(v, false), at));
  }
  return rounded_expr(g.value(op.row_scale).type.dtype, pointwise_expr(p, ops));
}

void emit_x_quantize_prologue(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, int threads, const std::string& row) {
  const Graph& g = ctx.graph();
  const Node& q = g.node(op.x_quantize);
  const Shape& space = g.value(op.x_src).type.shape;
  const int64_t K = op.k;
  std::vector<ValueId> read = {op.x_src};
  int widest = dtype_bytes(g.value(op.x_src).type.dtype);
  if (op.x_gamma >= 0) {
    read.push_back(op.x_gamma);
    widest = std::max(widest, dtype_bytes(g.value(op.x_gamma).type.dtype));
  }
  const int v = ctx.vector_width(read, space, 16 / widest);
  const char* ts = c_type(g.value(op.x_src).type.dtype);
  const char* tq = c_type(op.xt);
  const char* tg = op.x_gamma >= 0 ? c_type(g.value(op.x_gamma).type.dtype) : nullptr;
  const ValueId h = q.operands[0];
  // The row (and the norm's weight) read from L2 once, kept in shared memory beside the codes for
  // the later passes: one round trip instead of one per pass (each ~1 us while the weights stream),
  // where the copy fits the static shared memory beside the GEMV's own.
  const int64_t stash_bytes = K * (dtype_bytes(g.value(op.x_src).type.dtype) + (tg ? dtype_bytes(g.value(op.x_gamma).type.dtype) : 0));
  const bool stash = stash_bytes + K * dtype_bytes(op.xt) <= kQuantizePrologueSharedBytes;
  w.comment(fmt::format("Row {} of %{}, quantized by every thread of the CTA into shared memory (a one-row prologue{}):", row,
                        g.value(op.x).name, stash ? "; the row read from L2 once, each thread's elements kept in shared memory" : ""));
  if (op.x_norm >= 0) w.comment("  " + print_node(g, op.x_norm));
  w.comment("  " + print_node(g, op.x_quantize));
  w.line("__shared__ __align__(16) {} xq_s[{}];  // the row's codes", tq, K);
  if (stash) {
    w.line("__shared__ __align__(16) {} xq_x[{}];  // %{} as read", ts, K, g.value(op.x_src).name);
    if (tg) w.line("__shared__ __align__(16) {} xq_g[{}];  // %{}", tg, K, g.value(op.x_gamma).name);
  }
  w.line("const {}* __restrict__ xq_src = {} + {};  // %{}", ts, ctx.buffer_param(op.x_src, false), row_address(w, ctx, op.x_src, row, "0", "xq"),
         g.value(op.x_src).name);
  // One pass over the row, V elements a step: the quantize's input (%h) in float, as the row kernel
  // rounds it, then the pass's work on it. With the stash, the first pass reads L2 and keeps what it
  // read; a thread reads back only the elements it stored itself (no barrier).
  enum class Pass { sum_of_squares, amax, codes };
  bool first = true;
  auto pass = [&](Pass body) {
    const bool from_l2 = !stash || first;
    first = false;
    const int64_t iters = (K + threads * v - 1) / (threads * v);
    w.put(!from_l2       ? "#pragma unroll 4  // the thread's own elements, from shared memory"
          : stash && iters <= 8 ? "#pragma unroll  // every load in flight at once: the row comes from L2"
                                : "#pragma unroll 4  // a few loads in flight: the row comes from L2");
    auto loop = w.scope(fmt::format("for (int c = threadIdx.x * {}; c < {}; c += {})", v, K, threads * v));
    w.line("float hv[{}];", v);
    if (stash && from_l2) {
      w.line("const lj_pack<{0}, {1}> xp = lj_load_raw<{0}, {1}>(xq_src + c);", ts, v);
      w.line("lj_store_raw(xq_x + c, xp);");
      if (tg) {
        w.line("const lj_pack<{0}, {1}> gp = lj_load_raw<{0}, {1}>({2} + c);  // %{3}", tg, v, ctx.buffer_param(op.x_gamma, false),
               g.value(op.x_gamma).name);
        w.line("lj_store_raw(xq_g + c, gp);");
      }
      w.line("lj_unpack(xp, hv);");
    } else {
      w.line("lj_load<{}, {}>({} + c, hv);", ts, v, stash ? "xq_x" : "xq_src");
    }
    if (op.x_norm >= 0 && body != Pass::sum_of_squares) {
      w.line("float gv[{}];", v);
      if (stash)
        w.line("lj_load<{}, {}>(xq_g + c, gv);", tg, v);
      else
        w.line("lj_load<{}, {}>({} + c, gv);  // %{}", tg, v, ctx.buffer_param(op.x_gamma, false), g.value(op.x_gamma).name);
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) hv[j] = {};", v, rounded_expr(g.value(h).type.dtype, "hv[j] * xq_rms * gv[j]"));
    }
    if (body == Pass::sum_of_squares) {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) ss += hv[j] * hv[j];", v);
    } else if (body == Pass::amax) {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) amax = fmaxf(amax, fabsf(hv[j]));", v);
    } else {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) hv[j] = lj_quant_div(hv[j], xq_scale);", v);
      w.line("lj_store<{}, {}>(xq_s + c, hv);", tq, v);
    }
  };
  if (op.x_norm >= 0) {
    w.line("float ss = 0.f;");
    pass(Pass::sum_of_squares);
    w.line("const float xq_rms = rsqrtf(lj_block_sum(ss) / (float){} + {}f);  // %{}'s factor", K, attr::eps(g.node(op.x_norm).attrs),
           g.value(h).name);
  }
  w.line("float amax = 0.f;");
  pass(Pass::amax);
  w.line("const float xq_scale = lj_quant_scale<{}>(lj_block_max(amax));  // %{}", tq, g.value(op.x_scale).name);
  pass(Pass::codes);
  w.line("__syncthreads();  // the codes are in shared memory");
}

namespace {

// The row tail as a row_reduce group of its own nodes (the row kernel's body reads its inputs and
// stores its outputs through the GEMV's parameters).
FusionGroup tail_group(const KernelContext& ctx, const MatmulOperands& op) {
  const Graph& g = ctx.graph();
  FusionGroup t;
  t.id = ctx.group().id;
  t.kind = GroupKind::RowReduce;
  t.inputs = {op.out};
  if (op.tail_norm >= 0) {
    const Node& n = g.node(op.tail_norm);
    t.nodes.push_back(op.tail_norm);
    t.inputs.insert(t.inputs.end(), n.operands.begin() + 1, n.operands.end());
    t.internal = n.results;
  }
  t.nodes.push_back(op.tail_quantize);
  t.outputs = g.node(op.tail_quantize).results;
  return t;
}

}  // namespace

std::string row_tail_scratch(KernelContext& ctx, const MatmulOperands& op) { return op.tail_quantize >= 0 ? ctx.scratch_param(4) : ""; }

void emit_row_tail(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, int threads, const std::string& scratch) {
  if (op.tail_quantize < 0) return;
  const Graph& g = ctx.graph();
  const FusionGroup rows = tail_group(ctx, op);
  const RowReducePlan plan = plan_row_reduce(g, rows);
  LJ_ASSERT(plan.reject.empty(), "{}: the row tail: {}", ctx.kernel_name(), plan.reject);
  const std::string counter = fmt::format("reinterpret_cast<unsigned*>({})", scratch);
  w.comment("Row tail: the last CTA to finish reads the rows of %" + g.value(op.out).name +
            " back from L2 and runs the row kernel on them with its threads:");
  for (NodeId n : rows.nodes) w.comment("  " + print_node(g, n));
  w.line("if (!lj_arrive_last({}, gridDim.x, threadIdx.x, 0, {})) return;", counter, threads);
  w.line("const lj_i64 tail_rows = {};", product_expr(dim_product(Shape(plan.space.begin(), plan.space.end() - 1))));
  {
    auto loop = w.scope("for (lj_i64 row = 0; row < tail_rows; ++row)");
    emit_row_body(w, ctx, rows, plan, threads, [](SourceWriter&) {}, op.out);
  }
  w.line("if (threadIdx.x == 0) *{} = 0u;  // for the next launch", counter);
}

std::vector<OperandRead> epilogue_reads(const KernelContext& ctx, const MatmulOperands& op) {
  const Graph& g = ctx.graph();
  const FusionGroup& grp = ctx.group();
  const int rank = static_cast<int>(g.value(op.out).type.shape.size());
  std::vector<OperandRead> out;
  for (NodeId id : op.epilogue) {
    const Node& node = g.node(id);
    for (int k = 0; k < static_cast<int>(node.operands.size()); ++k) {
      const OperandRead rd = operand_read(g, node, k, rank);
      if (std::find(grp.inputs.begin(), grp.inputs.end(), rd.value) == grp.inputs.end()) continue;  // computed in the kernel
      if (rd.value == op.x || rd.value == op.w || rd.value == op.row_scale || rd.value == op.wq || rd.value == op.ws || rd.value == op.wz) continue;
      if (std::find(out.begin(), out.end(), rd) == out.end()) out.push_back(rd);
    }
  }
  return out;
}

std::string column_scaled(KernelContext& ctx, const MatmulOperands& op, const std::string& acc, const std::string& col) {
  if (op.col_scale < 0) return acc;
  const Shape& s = ctx.graph().value(op.col_scale).type.shape;
  return fmt::format("{} * lj_to_float({}[{}])", acc, ctx.buffer_param(op.col_scale, false), ctx.address(op.col_scale, s, {col}));
}

void emit_epilogue_element(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m,
                           const std::string& n, const std::vector<std::string>& acc, const std::string& result,
                           const std::string& stem, const std::map<OperandRead, std::string>& preloaded, bool acc_rounded) {
  const Graph& g = ctx.graph();
  const FusionGroup& grp = ctx.group();
  if (op.epilogue.empty()) {  // the store rounds the fp32 sum once
    w.line("const float {} = {};", result, acc.at(0));
    return;
  }
  std::map<ValueId, std::string> reg;
  const std::string base = "t" + stem + "_";
  w.line("float {};", result);
  // Sums staged in y's dtype are rounded already: rounding them again is an identity the compiler
  // keeps (three instructions an element, a quarter of a SwiGLU epilogue's).
  auto def = [&](ValueId v, const std::string& expr) {
    const std::string t = base + ident(g.value(v).name);
    const bool exact = acc_rounded && op.col_scale < 0 && g.value(v).type.dtype == op.yt;
    w.line("const float {} = {};  // %{}{}", t, exact ? expr : rounded_expr(g.value(v).type.dtype, expr), g.value(v).name,
           exact ? fmt::format(" (staged as {})", dtype_name(op.yt)) : "");
    reg[v] = t;
  };
  if (op.glu) {  // (a column scale: gate column n, up column n + n_out)
    def(op.gate, column_scaled(ctx, op, acc.at(0), n));
    def(op.up, column_scaled(ctx, op, acc.at(1), fmt::format("({} + {})", n, op.n_out)));
  } else {
    LJ_ASSERT(op.col_scale < 0, "{}: a column scale is recorded only before a split", ctx.kernel_name());
    def(op.y, acc.at(0));
  }
  // Group inputs the epilogue reads, at (m, n) of the output's iteration space.
  const Shape& space = g.value(op.out).type.shape;
  const int rank = static_cast<int>(space.size());
  std::vector<std::string> coords = emit_coords(w, Shape(space.begin(), space.end() - 1), m, "e" + stem);
  coords.push_back(n);
  std::map<OperandRead, std::string> loaded = preloaded;
  if (op.x_scale >= 0) reg[op.x_scale] = "xq_scale";  // the activation-quantize prologue's (W8A8: the row's scale)
  for (const OperandRead& rd : epilogue_reads(ctx, op)) {
    if (loaded.count(rd)) continue;
    const std::string r = fmt::format("v{}_{}{}", stem, ident(g.value(rd.value).name), rd.axis >= 0 ? fmt::format("_axis{}", rd.axis) : "");
    w.line("const float {} = lj_to_float({}[{}]);  // %{}", r, ctx.buffer_param(rd.value, false),
           ctx.address(rd.value, space, coords, rd.axis), g.value(rd.value).name);
    loaded[rd] = r;
  }
  // emit_pointwise_node names its temporaries t_<value>: a scope per element keeps them apart.
  {
    auto scope = w.scope("");
    // Where %out is only stored, in its dtype, the store's conversion is its one rounding.
    bool reused = false;
    for (NodeId id : op.epilogue)
      for (ValueId v : g.node(id).operands) reused = reused || v == op.out;
    for (NodeId id : op.epilogue) emit_pointwise_node(w, g, id, rank, grp.inputs, loaded, reg, {}, reused ? -1 : op.out);
    w.line("{} = {};", result, reg.at(op.out));
  }
}

void emit_rope_position(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m) {
  const Graph& g = ctx.graph();
  w.line("const lj_i64 pos = {}[{}];  // %{}", ctx.buffer_param(op.pos, false), ctx.address(op.pos, g.value(op.pos).type.shape, {m}),
         g.value(op.pos).name);
  std::vector<std::string> checked;  // once for every cache written
  for (const MatmulOperands::Segment& s : op.segments)
    for (const auto* dests : {&s.plain, &s.rotated})
      for (const MatmulOperands::Dest& d : *dests) {
        if (d.cache_write < 0) continue;
        const Shape& cs = g.value(g.node(d.cache_write).operands[0]).type.shape;
        const std::string cap = product_expr(dim_as_product(cs[1]));
        if (std::find(checked.begin(), checked.end(), cap) != checked.end()) continue;
        checked.push_back(cap);
        // An out-of-range position would write outside the cache: stop the kernel loudly instead.
        w.line("if (pos < 0 || pos >= {}) __trap();  // %{}: position outside the cache", cap,
               g.value(g.node(d.cache_write).results[0]).name);
      }
}

void emit_rope_angle(SourceWriter& w, const KernelContext& ctx, const MatmulOperands& op, const std::string& n,
                     const std::string& cos_name, const std::string& sin_name) {
  // Every piece is whole heads of D from column 0 (the planner's rule), so n % D is the column's
  // place in its head.
  for (const MatmulOperands::Segment& s : op.segments)
    LJ_ASSERT(s.c0 % op.rope_dim == 0, "{}: a piece of the projection starts inside a head", ctx.kernel_name());
  w.comment(print_node(ctx.graph(), op.table) + ": the pair's angle at this row's position, as the table kernel computes it");
  w.line("const lj_i64 fq = {} % D {};  // the pair's frequency", n, op.rope_interleaved ? "/ 2" : "% HALF");
  w.line("double sd, cd;");
  w.line("sincos((double)pos * lj_inv_freq[fq], &sd, &cd);");
  w.line("const float {} = (float)cd, {} = (float)sd;", cos_name, sin_name);
}

void emit_rope_stores(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& m, const std::string& n,
                      int width, const std::string& y, const std::string& partner, bool vector, const std::string& table_row,
                      bool load_position, const std::pair<std::string, std::string>& angle) {
  const Graph& g = ctx.graph();
  const int64_t half = op.rope_dim / 2;
  LJ_ASSERT(op.table < 0 || (width == 1 && !angle.first.empty()), "{}: a one-row table's angles come from the caller",
            ctx.kernel_name());
  if (op.pos >= 0 && load_position) emit_rope_position(w, ctx, op, m);
  auto store = [&](const MatmulOperands::Dest& d, const std::string& vals) {
    std::string p, at;
    const char* t = nullptr;
    if (d.value >= 0) {
      p = ctx.buffer_param(d.value, true);
      at = ctx.address(d.value, g.value(d.value).type.shape, {m, "h", "d"});
      t = c_type(g.value(d.value).type.dtype);
      w.comment(fmt::format("%{}", g.value(d.value).name));
    } else {
      const Node& wn = g.node(d.cache_write);
      const ValueId cache = wn.results[0];
      p = ctx.buffer_param(cache, true);
      at = ctx.address(cache, g.value(cache).type.shape, {m, "pos", "h", "d"});
      t = c_type(g.value(cache).type.dtype);
      w.comment(print_node(g, d.cache_write));
    }
    if (vector && width > 1) {
      w.line("lj_store<{}, {}>({} + {}, {});", t, width, p, at, vals);
    } else {
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < {}; ++j) {}[{} + j] = lj_from_float<{}>({}[j]);", width, p, at, t, vals);
    }
  };
  for (size_t k = 0; k < op.segments.size(); ++k) {
    const MatmulOperands::Segment& s = op.segments[k];
    const bool last = k + 1 == op.segments.size();
    auto seg = w.scope(k == 0 ? (last ? std::string("") : fmt::format("if ({} < {})", n, s.c1))
                              : last ? std::string("else") : fmt::format("else if ({} < {})", n, s.c1));
    const std::string col = s.c0 == 0 ? n : fmt::format("({} - {})", n, s.c0);
    w.line("const lj_i64 h = {} / {}, d = {} % {};  // head and element of the run's first column", col, s.d, col, s.d);
    for (const MatmulOperands::Dest& d : s.plain) store(d, y);
    if (s.rope < 0) continue;
    w.comment(print_node(g, s.rope));
    w.line("float rot[{}];", width);
    // Half-style runs of 8: the 8 frequencies are consecutive, two 16-byte reads each, from the staged
    // tables or from the tables in memory where their rows allow 16-byte reads (8 element reads of
    // each table cost a ping-pong tile's epilogue four times the L1 wavefronts, taken from the
    // other warpgroup's wgmma operand reads: docs/perf.md, 2026-12-07).
    const Shape& ts = g.value(op.cos).type.shape;
    const bool vector_tables = !table_row.empty() || (angle.first.empty() && ctx.vector_width({op.cos, op.sin}, ts, 8) == 8);
    if (vector_tables && !op.rope_interleaved && width == 8 && half % 8 == 0) {
      w.line("float c[8], s[8];");
      if (!table_row.empty()) {
        w.line("lj_load<float, 8>(lj_cos_t + {} * {} + d % {}, c);", table_row, half, half);
        w.line("lj_load<float, 8>(lj_sin_t + {} * {} + d % {}, s);", table_row, half, half);
      } else {
        const std::string f = fmt::format("d % {}", half);
        const char* tt = c_type(g.value(op.cos).type.dtype);
        w.line("lj_load<{}, 8>({} + {}, c);", tt, ctx.buffer_param(op.cos, false), ctx.address(op.cos, ts, {m, f}));
        w.line("lj_load<{}, 8>({} + {}, s);", tt, ctx.buffer_param(op.sin, false), ctx.address(op.sin, ts, {m, f}));
      }
      w.line("#pragma unroll");
      w.line("for (int j = 0; j < 8; ++j) rot[j] = d < {} ? fmaf({}[j], c[j], -{}[j] * s[j]) : fmaf({}[j], c[j], {}[j] * s[j]);", half, y,
             partner, y, partner);
      for (const MatmulOperands::Dest& d : s.rotated) store(d, "rot");
      continue;
    }
    {
      w.line("#pragma unroll");
      auto j_loop = w.scope(fmt::format("for (int j = 0; j < {}; ++j)", width));
      const bool own_angle = !angle.first.empty();
      if (op.rope_interleaved) {
        w.line("const bool first = (d + j) % 2 == 0;  // 2i of the pair (2i, 2i + 1)");
        if (!own_angle) w.line("const lj_i64 fi = (d + j) / 2;  // the pair's frequency");
      } else {
        w.line("const bool first = d < {};  // i of the pair (i, i + {})", half, half);
        if (!own_angle) w.line("const lj_i64 fi = (d + j) % {};  // the pair's frequency", half);
      }
      if (own_angle)
        w.line("const float c = {}, s = {};", angle.first, angle.second);
      else if (!table_row.empty())
        w.line("const float c = lj_cos_t[{} * {} + fi], s = lj_sin_t[{} * {} + fi];", table_row, half, table_row, half);
      else
        w.line("const float c = {}[{}], s = {}[{}];", ctx.buffer_param(op.cos, false), ctx.address(op.cos, ts, {m, "fi"}),
               ctx.buffer_param(op.sin, false), ctx.address(op.sin, ts, {m, "fi"}));
      // The same expressions as the rope kernel (emit_rope_kv_write.cpp), so fused and unfused agree bit for bit.
      w.line("rot[j] = first ? fmaf({}[j], c, -{}[j] * s) : fmaf({}[j], c, {}[j] * s);", y, partner, y, partner);
    }
    for (const MatmulOperands::Dest& d : s.rotated) store(d, "rot");
  }
}

std::optional<TensorMapSpec> tma_rows(const KernelContext& ctx, ValueId v) {
  const Shape& s = ctx.graph().value(v).type.shape;
  const TensorLayout& l = ctx.layout(v);
  const size_t r = s.size();
  const int64_t eb = dtype_bytes(ctx.graph().value(v).type.dtype);
  if (r < 2 || !s.back().is_const() || l.strides.back() != DimProduct{}) return std::nullopt;  // rows of contiguous elements
  const DimProduct& row_stride = l.strides[r - 2];
  if (!row_stride.symbols.empty() || !l.offset.symbols.empty()) return std::nullopt;
  // Leading dims must flatten into one run of rows: each stride is the next one times its extent.
  for (size_t i = 0; i + 2 < r; ++i) {
    if (s[i].is_const() && s[i].value() == 1) continue;
    if (l.strides[i] != multiply(l.strides[i + 1], dim_as_product(s[i + 1]))) return std::nullopt;
  }
  if (row_stride.constant * eb % 16 != 0 || l.offset.constant * eb % 16 != 0) return std::nullopt;
  TensorMapSpec t;
  t.rows = dim_product(Shape(s.begin(), s.end() - 1));
  t.cols = s.back().value();
  t.row_stride = row_stride.constant;
  t.offset = l.offset.constant;
  return t;
}

namespace {

// The problem of operands already described in `ctx` (emit_matmul has them; no second analysis).
}  // namespace

int64_t q4_constant_bytes(const Graph& g, const MatmulOperands& op, int64_t rows) {
  const int64_t n = rows * (op.k / op.group);  // (row, group) pairs
  return n * dtype_bytes(g.value(op.ws).type.dtype) + (op.wz < 0 ? 0 : is_packed(g.value(op.wz).type.dtype) ? (n + 1) / 2 : n);
}

namespace {

MatmulProblem problem_of(const KernelContext& ctx, const MatmulOperands& op, const EmitOptions& opts) {
  MatmulProblem p;
  p.n = op.n, p.k = op.k, p.sm = opts.sm, p.max_shared_bytes = opts.max_shared_bytes, p.sm_count = opts.sm_count;
  p.out_bytes = dtype_bytes(op.yt);
  if (!op.segments.empty() && !op.rope_interleaved) p.rope_pair_dim = op.rope_dim;
  p.glu = op.glu;
  p.rope = !op.segments.empty();
  p.rms_in_kernel = op.rms >= 0;
  p.angles_in_kernel = op.table >= 0;
  p.quantize_in_kernel = op.x_quantize >= 0;
  p.norm_in_kernel = op.x_norm >= 0 && op.x_quantize < 0;
  if (op.tail_quantize >= 0) p.tail_row = ctx.graph().value(op.out).type.shape.back().value();
  p.arch_specific = opts.arch_specific;
  p.weight_codes = op.dequant >= 0;
  if (p.weight_codes) p.code_constant_row_bytes = q4_constant_bytes(ctx.graph(), op, 1);
  p.row_scaled = op.row_scale >= 0;
  // (Codes are dense params: a map over their bytes always fits, K being a multiple of 32.)
  p.tma = tma_rows(ctx, op.x) && (p.weight_codes || tma_rows(ctx, op.w));
  p.m = op.rows.constant;
  for (const std::string& s : op.rows.symbols) {
    const std::optional<int64_t> v = opts.hint.get(s);
    p.m = v ? p.m * *v : 0;  // unknown: 0
    if (!v) break;
  }
  // The tensor-core path multiplies like dtypes; mixed operands take the GEMV family.
  p.dtype = op.xt == op.wt ? op.xt : DType::F32;
  const int widest = std::max(dtype_bytes(op.xt), dtype_bytes(op.wt));
  // (Codes are dense params: their rows start 16-byte aligned where K is a multiple of 32.)
  // (With the norm folded in, the kernel reads the norm's input and weight where it would read x.)
  const std::vector<ValueId> read = p.norm_in_kernel ? std::vector<ValueId>{op.x_src, op.x_gamma}
                                    : p.weight_codes ? std::vector<ValueId>{op.x}
                                                     : std::vector<ValueId>{op.x, op.w};
  p.aligned = ctx.vector_width(read,
                               ctx.graph().value(op.x).type.shape, 16 / widest) * widest == 16;
  return p;
}

}  // namespace

void emit_gemv_output(SourceWriter& w, KernelContext& ctx, const MatmulOperands& op, const std::string& out_param) {
  const Graph& g = ctx.graph();
  if (!op.segments.empty()) {
    w.line("const float ya[1] = {{{}}}, yb[1] = {{{}}};  // %{} at columns n and n2", rounded_expr(op.ct, column_scaled(ctx, op, "sum", "n")),
           rounded_expr(op.ct, column_scaled(ctx, op, "sum_up", "n2")), g.value(op.y).name);
    // The pair's two columns; the row's position (for cache writes and a one-row table's angle)
    // is loaded and checked once, the angle computed once for both.
    auto first = w.scope("");
    if (op.pos >= 0) emit_rope_position(w, ctx, op, "m");
    std::pair<std::string, std::string> angle;
    if (op.table >= 0) {
      emit_rope_angle(w, ctx, op, "n", "cf", "sf");
      angle = {"cf", "sf"};
    }
    emit_rope_stores(w, ctx, op, "m", "n", 1, "ya", "yb", false, "", false, angle);
    auto second = w.scope("");
    emit_rope_stores(w, ctx, op, "m", "n2", 1, "yb", "ya", false, "", false, angle);
    return;
  }
  emit_epilogue_element(w, ctx, op, "m", "n", op.glu ? std::vector<std::string>{"sum", "sum_up"} : std::vector<std::string>{"sum"}, "r", "");
  w.line("{}[{}] = lj_from_float<{}>(r);  // %{}", out_param, row_address(w, ctx, op.out, "m", "n", "yc"),
         c_type(g.value(op.out).type.dtype), g.value(op.out).name);
}

MatmulProblem matmul_problem(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const MatmulOperands op = matmul_operands(ctx);
  if (!op.reject.empty()) throw UserError(op.reject, op.reject_loc);
  return problem_of(ctx, op, opts);
}

namespace {

// The config a matmul group is emitted with: the given one, else the default for the problem.
MatmulConfig config_of(const MatmulProblem& p, const EmitOptions& opts) { return opts.matmul ? *opts.matmul : default_matmul_config(p); }

// Why `cfg` cannot run the group's matmul, in the words emit throws; "" if it can.
std::string config_rejection(const KernelContext& ctx, const MatmulConfig& cfg, const MatmulProblem& p) {
  const std::string why = reject_reason(cfg, p);
  if (why.empty()) return "";
  return fmt::format("{}: config '{}' cannot run this matmul ([M, {}] x [{}, {}]^T, {}): {}", ctx.kernel_name(), cfg.str(), p.k, p.n, p.k,
                     dtype_name(p.dtype), why);
}

GeneratedKernel emit_matmul(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const MatmulOperands op = matmul_operands(ctx);
  if (!op.reject.empty()) throw UserError(op.reject, op.reject_loc);
  const MatmulProblem p = problem_of(ctx, op, opts);
  const MatmulConfig cfg = config_of(p, opts);
  if (std::string why = config_rejection(ctx, cfg, p); !why.empty()) throw UserError(why);
  if (cfg.family == MatmulConfig::Family::Gemv) return cfg.tensor_cores ? emit_gemv_mma(ctx, op, cfg) : emit_gemv(ctx, op, cfg);
  if (cfg.family == MatmulConfig::Family::Wgmma) return emit_gemm_wgmma(ctx, op, cfg, opts);
  return emit_gemm_mma(ctx, op, cfg, opts);
}

// The GEMV, mma.sync and wgmma kernels share the group: the config picks one (matmul_config.cpp
// holds the defaults, the pruner's rules and the candidate list).
class MatmulFamily final : public KernelFamily {
 public:
  GroupKind kind() const override { return GroupKind::Matmul; }
  bool tunable() const override { return true; }
  std::optional<KernelConfig> parse_config(std::string_view text, std::string* error) const override {
    std::optional<MatmulConfig> c = parse_matmul_config(text, error);
    if (!c) return std::nullopt;
    return KernelConfig(*c);
  }
  std::string reject_reason(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const override {
    KernelContext ctx(g, grp);
    const MatmulOperands op = matmul_operands(ctx);
    if (!op.reject.empty()) return op.reject;
    const MatmulProblem p = problem_of(ctx, op, opts);
    return config_rejection(ctx, config_of(p, opts), p);
  }
  std::vector<KernelConfig> candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& opts,
                                       std::vector<std::string>* pruned) const override {
    std::vector<KernelConfig> out;
    for (const MatmulConfig& c : matmul_candidates(matmul_problem(g, grp, opts), pruned)) out.emplace_back(c);
    return out;
  }
  GeneratedKernel emit(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const override { return emit_matmul(g, grp, opts); }
};

}  // namespace

const KernelFamily& matmul_family() {
  static const MatmulFamily family;
  return family;
}

}  // namespace lj
