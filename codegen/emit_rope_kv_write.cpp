// RoPE groups: a rope_table, the ropes that use it and the KV-cache writes at the same positions,
// in one kernel with one CTA per position row. The cos/sin row is computed once per CTA into shared
// memory (in double, then rounded to f32 as the rope_table op defines) and never stored; rotated
// keys go straight into the cache. The kernel also copies returned views of the buffer it reads
// (FusionGroup::copies: the prefill layer's v, out of the QKV projection) into buffers of their own,
// row by row like a cache write of v, so the projection need not outlive its readers. A per-head
// RMSNorm of a rope's input (Qwen3's q_norm, k_norm) runs in the same kernel: each thread adds up the
// squares of the elements it loads into shared memory, and after the barrier every head's sum is
// added up in a fixed order, so the normed heads are never stored.
#include <algorithm>
#include <functional>
#include <map>

#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "compiler/fusion/legality.h"
#include "layerjit/text.h"
#include "layerjit/op_attrs.h"

namespace lj {

namespace {

// The kernel's nodes and rows, and why none implements the group if it cannot.
struct RopeKvPlan {
  NodeId table = -1;
  std::vector<NodeId> ropes, writes;
  std::map<NodeId, NodeId> norm_of;  // rope -> the per-head rms_norm producing its input
  ValueId pos = -1;                  // one CTA per row n: a position (rope_table / cache writes)
  ValueId cos_in = -1, sin_in = -1;  // tables read from memory when the group does not compute them
  int64_t half = 0;
  Dim rows;
  std::string reject;
  SourceLoc loc;
};

RopeKvPlan plan_rope_kv_write(const Graph& g, const FusionGroup& grp) {
  RopeKvPlan p;
  const std::string name = kernel_name(g, grp);
  auto refuse = [&](SourceLoc loc, std::string why) {
    p.reject = std::move(why);
    p.loc = std::move(loc);
    return p;
  };
  std::vector<NodeId> norms;
  for (NodeId n : grp.nodes) {
    switch (g.node(n).kind) {
      case OpKind::RopeTable: p.table = n; break;
      case OpKind::Rope: p.ropes.push_back(n); break;
      case OpKind::KvCacheWrite: p.writes.push_back(n); break;
      case OpKind::RmsNorm: norms.push_back(n); break;
      default: return refuse({}, fmt::format("{}: {} cannot be part of a rope_kv_write kernel", name, op_name(g.node(n).kind)));
    }
  }
  p.pos = p.table >= 0 ? g.node(p.table).operands[0] : (!p.writes.empty() ? g.node(p.writes[0]).operands[2] : -1);
  if (p.table >= 0) {
    p.half = attr::rope_dim(g.node(p.table).attrs) / 2;
    p.rows = g.value(p.pos).type.shape[0];
  } else if (!p.ropes.empty()) {
    p.cos_in = g.node(p.ropes[0]).operands[1];
    p.sin_in = g.node(p.ropes[0]).operands[2];
    const Shape& cs = g.value(p.cos_in).type.shape;
    p.half = cs.back().value();
    p.rows = cs[0];
  } else {
    p.rows = g.value(p.pos).type.shape[0];
  }
  for (NodeId r : p.ropes) {
    const TensorType& xt = g.value(g.node(r).operands[0]).type;
    if (xt.rank() != 3 || xt.shape[0] != p.rows)
      return refuse(g.node(r).loc, fmt::format("{}: the fused rope kernel rotates [N, H, D] tensors with one position per row; got {}",
                                               name, xt.str()));
    if (p.table < 0 && (g.node(r).operands[1] != p.cos_in || g.node(r).operands[2] != p.sin_in))
      return refuse(g.node(r).loc, fmt::format("{}: ropes in one kernel must share their cos/sin tables", name));
  }
  for (NodeId nn : norms) {
    const Node& norm = g.node(nn);
    const auto rope = std::find_if(p.ropes.begin(), p.ropes.end(), [&](NodeId r) { return g.node(r).operands[0] == norm.results[0]; });
    const TensorType& xt = g.value(norm.operands[0]).type;
    if (rope == p.ropes.end() || xt.rank() != 3 || xt.shape[0] != p.rows || !xt.shape[2].is_const() || xt.shape[2].value() != 2 * p.half)
      return refuse(norm.loc, fmt::format("{}: the kernel normalises the [N, H, {}] heads a rope of the group rotates; got {}", name,
                                          2 * p.half, print_node(g, nn)));
    p.norm_of[*rope] = nn;
  }
  for (NodeId wn : p.writes) {
    const TensorType& nt = g.value(g.node(wn).operands[1]).type;
    if (nt.rank() != 3)
      return refuse(g.node(wn).loc,
                    fmt::format("{}: the fused cache write takes one new entry [B, H, D] per sequence; got {}", name, nt.str()));
    if (g.node(wn).operands[2] != p.pos)
      return refuse(g.node(wn).loc, fmt::format("{}: cache writes in one kernel must share their positions", name));
  }
  for (ValueId v : grp.copies)
    if (!fits_row_copy(g, grp, v))
      return refuse(g.value(v).loc,
                    fmt::format("{}: the kernel copies [N, H, D] or [N, D] views with constant trailing dims over its {} rows; %{} is {}",
                                name, p.rows.str(), g.value(v).name, g.value(v).type.str()));
  return p;
}

GeneratedKernel emit_rope_kv_write(const Graph& g, const FusionGroup& grp) {
  const RopeKvPlan plan = plan_rope_kv_write(g, grp);
  if (!plan.reject.empty()) throw UserError(plan.reject, plan.loc);
  KernelContext ctx(g, grp);
  const NodeId table = plan.table;
  const std::vector<NodeId>& ropes = plan.ropes;
  const std::vector<NodeId>& writes = plan.writes;
  const ValueId pos = plan.pos, cos_in = plan.cos_in, sin_in = plan.sin_in;
  const int64_t half = plan.half;
  const Dim rows = plan.rows;
  constexpr int kThreads = 128;

  if (pos >= 0) ctx.buffer_param(pos, false);  // positions first: the kernel reads them before anything else
  ctx.add_group_params();

  // Every thread issues all of its loads (kept as raw 16-byte packs, 4 registers each) before the
  // position, the cos/sin row and the barrier: a CTA then waits for DRAM once, not once per loop trip
  // (ncu: one pair of loads in flight per thread held the first version at ~55 % of peak bandwidth).
  // Work beyond kMaxStaged trips per thread runs in a plain loop after the barrier.
  constexpr int kMaxStaged = 4;
  auto writes_of = [&](ValueId v) {
    std::vector<NodeId> out;
    for (NodeId wn : writes)
      if (g.node(wn).operands[1] == v) out.push_back(wn);
    return out;
  };
  // A paged cache (block table operand) is a pool [P, page, H, D]: the row's position lives in pool
  // page pg<i> (looked up once per kernel, below) at row pos % page.
  auto paged = [&](NodeId wn) { return g.node(wn).operands.size() == 4; };
  auto page_var = [&](NodeId wn) {
    return fmt::format("pg{}", std::find(writes.begin(), writes.end(), wn) - writes.begin());
  };
  auto cache_addr = [&](NodeId wn, const std::string& h, const std::string& d) {
    const ValueId cache = g.node(wn).operands[0];
    const Shape& cs = g.value(cache).type.shape;
    if (!paged(wn)) return ctx.address(cache, cs, {"n", "pos", h, d});
    return ctx.address(cache, cs, {page_var(wn), fmt::format("(pos % {})", product_expr(dim_as_product(cs[1]))), h, d});
  };
  // Positions a sequence's cache holds: C of a [B, C, H, D] cache, pages x page of a paged one.
  auto capacity = [&](NodeId wn) {
    const Shape& cs = g.value(g.node(wn).operands[0]).type.shape;
    if (!paged(wn)) return product_expr(dim_as_product(cs[1]));
    const Shape& bt = g.value(g.node(wn).operands[3]).type.shape;
    return product_expr(multiply(dim_as_product(bt[1]), dim_as_product(cs[1])));
  };
  // One stream per rope (pairs of runs, rotated), per cache write of a value computed elsewhere and
  // per copied returned view (runs copied unchanged).
  struct Stream {
    NodeId node;
    bool rope;
    bool interleaved = false;
    ValueId src;
    const char* type;
    int vec;
    int64_t runs;    // accesses per head
    int64_t total;   // accesses per row
    int64_t trips;   // loop trips per thread
    int64_t staged;  // of which are loaded before the barrier
    bool copy = false;  // stores `src` into its own buffer (FusionGroup::copies)
    bool flat = false;  // `src` is [N, D]: no head coordinate
    NodeId norm = -1;   // a rope's per-head rms_norm: `src` is the norm's input
  };
  std::vector<Stream> streams;
  for (NodeId r : ropes) {
    const Node& rn = g.node(r);
    const auto norm = plan.norm_of.find(r);
    const NodeId nn = norm == plan.norm_of.end() ? -1 : norm->second;
    const ValueId x = nn >= 0 ? g.node(nn).operands[0] : rn.operands[0], y = rn.results[0];
    const TensorType& xt = g.value(x).type;
    const bool interleaved = attr::rope_style(rn.attrs) == attr::RopeStyle::Interleaved;
    // Half-style pairs are two contiguous runs (i.. and i + HALF..): V of each per access where every
    // access is aligned. Interleaved pairs are adjacent: one pair per thread.
    std::vector<ValueId> accessed = {x};
    if (std::find(grp.outputs.begin(), grp.outputs.end(), y) != grp.outputs.end()) accessed.push_back(y);
    for (NodeId wn : writes_of(y)) accessed.push_back(g.node(wn).operands[0]);
    int vec = interleaved ? 1 : ctx.vector_width(accessed, xt.shape, 16 / dtype_bytes(xt.dtype));
    while (vec > 1 && half % vec != 0) vec /= 2;
    const int64_t runs = interleaved ? half : half / vec;
    Stream st{r, true, interleaved, x, c_type(xt.dtype), vec, runs, xt.shape[1].value() * runs, 0, 0};
    st.norm = nn;
    streams.push_back(st);
  }
  for (NodeId wn : writes) {
    const ValueId nv = g.node(wn).operands[1];
    if (g.value(nv).producer >= 0 && std::find(grp.nodes.begin(), grp.nodes.end(), g.value(nv).producer) != grp.nodes.end())
      continue;
    const TensorType& nt = g.value(nv).type;
    const int vec = ctx.vector_width({nv, g.node(wn).operands[0]}, nt.shape, 16 / dtype_bytes(nt.dtype));
    const int64_t runs = nt.shape[2].value() / vec;
    streams.push_back({wn, false, false, nv, c_type(nt.dtype), vec, runs, nt.shape[1].value() * runs, 0, 0});
  }
  for (ValueId v : grp.copies) {
    const TensorType& vt = g.value(v).type;
    // The copy's own buffer is dense, so the source's alignment alone bounds the vector width.
    const int vec = ctx.vector_width({v}, vt.shape, 16 / dtype_bytes(vt.dtype));
    const int64_t runs = vt.shape.back().value() / vec, heads = vt.rank() == 3 ? vt.shape[1].value() : 1;
    streams.push_back(
        {g.value(v).producer, false, false, v, c_type(vt.dtype), vec, runs, heads * runs, 0, 0, true, vt.rank() == 2});
  }
  for (Stream& s : streams) {
    s.trips = (s.total + kThreads - 1) / kThreads;
    s.staged = std::min<int64_t>(s.trips, kMaxStaged);
  }
  // Coordinates of access `idx` of a stream: head h, element offsets of the pair's halves (d1, d2).
  auto coords = [&](SourceWriter& w, const Stream& s) {
    if (s.flat) w.line("const int i = idx{};", s.vec == 1 ? "" : fmt::format(" * {}", s.vec));
    else w.line("const int h = idx / {}, i = idx % {} * {};", s.runs, s.runs, s.rope && s.interleaved ? 1 : s.vec);
  };
  // The run of access `idx` of a stream that moves runs unchanged (a cache write or a copy), in `src`.
  auto run_at = [](const Stream& s) {
    return s.flat ? std::vector<std::string>{"n", "i"} : std::vector<std::string>{"n", "h", "i"};
  };
  auto d1 = [](const Stream& s) { return std::string(s.interleaved ? "2 * i" : "i"); };
  auto d2 = [](const Stream& s) { return std::string(s.interleaved ? "2 * i + 1" : "i + HALF"); };
  // The staged trips of a stream, unrolled; the guard is left out when every trip is in range.
  auto staged_loop = [&](SourceWriter& w, const Stream& s, const std::function<void()>& body) {
    w.line("#pragma unroll");
    auto loop = w.scope(fmt::format("for (int it = 0; it < {}; ++it)", s.staged));
    w.line("const int idx = threadIdx.x + it * {};", kThreads);
    if (s.staged * kThreads <= s.total) {
      body();
    } else {
      auto guard = w.scope(fmt::format("if (idx < {})", s.total));
      body();
    }
  };
  auto tail_loop = [&](SourceWriter& w, const Stream& s, const std::function<void()>& body) {
    if (s.staged == s.trips) return;
    auto loop = w.scope(fmt::format("for (int idx = threadIdx.x + {}; idx < {}; idx += {})", s.staged * kThreads, s.total, kThreads));
    body();
  };

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.blank();
  if (table >= 0) emit_inv_freq_table(w, g, table);
  {
    auto fn = w.scope(ctx.signature(kThreads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    emit_trigger_dependents(w, grp);
    if (half > 0) {
      w.line("constexpr int HALF = {};  // head_dim / 2", half);
      w.line("__shared__ float cos_s[HALF], sin_s[HALF];");
    }
    w.line("const lj_i64 n = blockIdx.x;");
    w.line("if (n >= {}) return;", product_expr(dim_as_product(rows)));
    if (pos >= 0) w.line("const lj_i64 pos = {}[n];", ctx.buffer_param(pos, false));
    for (size_t k = 0; k < streams.size(); ++k) {
      const Stream& s = streams[k];
      const std::string xp = ctx.buffer_param(s.src, false);
      const Shape& shape = g.value(s.src).type.shape;
      w.comment(fmt::format("loads of {}", print_node(g, s.node)));
      w.line("lj_pack<{}, {}> a{}[{}]{};", s.type, s.vec, k, s.staged, s.rope ? fmt::format(", b{}[{}]", k, s.staged) : "");
      staged_loop(w, s, [&] {
        coords(w, s);
        if (s.rope) {
          w.line("a{}[it] = lj_load_raw<{}, {}>({} + {});", k, s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d1(s)}));
          w.line("b{}[it] = lj_load_raw<{}, {}>({} + {});", k, s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d2(s)}));
        } else {
          w.line("a{}[it] = lj_load_raw<{}, {}>({} + {});", k, s.type, s.vec, xp, ctx.address(s.src, shape, run_at(s)));
        }
      });
    }
    if (table >= 0) {
      const Node& tn = g.node(table);
      w.comment(print_node(g, table));
      auto loop = w.scope("for (int i = threadIdx.x; i < HALF; i += blockDim.x)");
      w.line("const double inv_freq = lj_inv_freq[i];");
      w.line("double s, c;");
      w.line("sincos((double)pos * inv_freq, &s, &c);");
      w.line("cos_s[i] = (float)c;");
      w.line("sin_s[i] = (float)s;");
      // Stored only when another kernel reads the tables (the unfused plan).
      const Shape tshape = g.value(tn.results[0]).type.shape;
      for (int r = 0; r < 2; ++r) {
        const ValueId t = tn.results[static_cast<size_t>(r)];
        if (std::find(grp.outputs.begin(), grp.outputs.end(), t) == grp.outputs.end()) continue;
        w.line("{}[{}] = {}_s[i];", ctx.buffer_param(t, true), ctx.address(t, tshape, {"n", "i"}), r == 0 ? "cos" : "sin");
      }
    } else if (cos_in >= 0) {
      const Shape tshape = g.value(cos_in).type.shape;
      auto loop = w.scope("for (int i = threadIdx.x; i < HALF; i += blockDim.x)");
      w.line("cos_s[i] = lj_to_float({}[{}]);  // %{}", ctx.buffer_param(cos_in, false), ctx.address(cos_in, tshape, {"n", "i"}),
             g.value(cos_in).name);
      w.line("sin_s[i] = lj_to_float({}[{}]);  // %{}", ctx.buffer_param(sin_in, false), ctx.address(sin_in, tshape, {"n", "i"}),
             g.value(sin_in).name);
    }
    std::vector<std::string> checked;  // one check per distinct cache capacity
    for (NodeId wn : writes) {
      const std::string cap = capacity(wn);
      if (std::find(checked.begin(), checked.end(), cap) != checked.end()) continue;
      checked.push_back(cap);
      // An out-of-range position would write outside the cache: stop the kernel loudly instead.
      w.line("if (pos < 0 || pos >= {}) __trap();  // %{}: position outside the cache", cap, g.value(g.node(wn).results[0]).name);
    }
    for (NodeId wn : writes) {
      if (!paged(wn)) continue;
      const Node& wr = g.node(wn);
      const Shape& cs = g.value(wr.operands[0]).type.shape;
      const ValueId bt = wr.operands[3];
      w.line("const lj_i64 {} = {}[{}];  // %{}: the pool page of this position", page_var(wn), ctx.buffer_param(bt, false),
             ctx.address(bt, g.value(bt).type.shape, {"n", fmt::format("(pos / {})", product_expr(dim_as_product(cs[1])))}),
             g.value(bt).name);
      w.line("if ({} < 0 || {} >= {}) __trap();  // a page outside the pool", page_var(wn), page_var(wn),
             product_expr(dim_as_product(cs[0])));
    }
    // Cache writes of values computed elsewhere (v) and copies of returned views: their runs stored
    // into the cache row or the copy's own buffer unchanged.
    for (size_t k = 0; k < streams.size(); ++k) {
      const Stream& s = streams[k];
      if (s.rope) continue;
      const std::string cp = s.copy ? ctx.copy_param(s.src) : ctx.buffer_param(g.node(s.node).results[0], true);
      const std::string to = s.copy ? ctx.copy_address(s.src, run_at(s)) : cache_addr(s.node, "h", "i");
      w.comment(s.copy ? fmt::format("{}: returned, copied into a buffer of its own", print_node(g, s.node))
                       : print_node(g, s.node));
      staged_loop(w, s, [&] {
        coords(w, s);
        w.line("lj_store_raw<{}, {}>({} + {}, a{}[it]);", s.type, s.vec, cp, to, k);
      });
      tail_loop(w, s, [&] {
        coords(w, s);
        w.line("lj_store_raw<{}, {}>({} + {}, lj_load_raw<{}, {}>({} + {}));", s.type, s.vec, cp, to, s.type, s.vec,
               ctx.buffer_param(s.src, false), ctx.address(s.src, g.value(s.src).type.shape, run_at(s)));
      });
    }
    // Per-head norms: each access's sum of squares into shared memory (the barrier below publishes
    // them); accesses past the staged trips load their elements once more.
    for (size_t k = 0; k < streams.size(); ++k) {
      const Stream& s = streams[k];
      if (s.norm < 0) continue;
      w.comment(fmt::format("{}: the squares of each access", print_node(g, s.norm)));
      w.line("__shared__ float ss{}[{}];", k, s.total);
      auto squares = [&](const std::function<void()>& fetch) {
        coords(w, s);
        w.line("float x1[{}], x2[{}];", s.vec, s.vec);
        fetch();
        w.line("float sq = 0.f;");
        w.line("#pragma unroll");
        w.line("for (int j = 0; j < {}; ++j) sq += x1[j] * x1[j] + x2[j] * x2[j];", s.vec);
        w.line("ss{}[idx] = sq;", k);
      };
      const std::string xp = ctx.buffer_param(s.src, false);
      const Shape& shape = g.value(s.src).type.shape;
      staged_loop(w, s, [&] {
        squares([&] {
          w.line("lj_unpack(a{}[it], x1);", k);
          w.line("lj_unpack(b{}[it], x2);", k);
        });
      });
      tail_loop(w, s, [&] {
        squares([&] {
          w.line("lj_load<{}, {}>({} + {}, x1);", s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d1(s)}));
          w.line("lj_load<{}, {}>({} + {}, x2);", s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d2(s)}));
        });
      });
    }
    if (half > 0) w.line("__syncthreads();");
    for (size_t k = 0; k < streams.size(); ++k) {
      const Stream& s = streams[k];
      if (!s.rope) continue;
      const Node& rn = g.node(s.node);
      const ValueId y = rn.results[0];
      const Shape& shape = g.value(s.src).type.shape;
      const bool stored = std::find(grp.outputs.begin(), grp.outputs.end(), y) != grp.outputs.end();
      w.comment(print_node(g, s.node));
      // Rotates the pair in x1/x2 and stores it to the output and into each cache that takes it.
      auto rotate = [&](const std::function<void()>& fetch) {
        coords(w, s);
        w.line("float x1[{}], x2[{}], y1[{}], y2[{}];", s.vec, s.vec, s.vec, s.vec);
        fetch();
        if (s.norm >= 0) {
          // The head's sum in a fixed order (the same in every CTA and run), then the norm's value
          // rounded to its dtype, as the graph defines %normed.
          const Node& nn = g.node(s.norm);
          const ValueId wv = nn.operands[1], normed = nn.results[0];
          const std::string wp = ctx.buffer_param(wv, false);
          const Shape& ws = g.value(wv).type.shape;
          w.comment(print_node(g, s.norm));
          w.line("float ssum = 0.f;");
          w.line("for (int r = 0; r < {}; ++r) ssum += ss{}[h * {} + r];", s.runs, k, s.runs);
          w.line("const float scale = rsqrtf(ssum / {}.f + {}f);", 2 * half, attr::eps(nn.attrs));
          w.line("#pragma unroll");
          auto inner = w.scope(fmt::format("for (int j = 0; j < {}; ++j)", s.vec));
          const std::string j1 = s.interleaved ? "2 * i + j" : "i + j", j2 = s.interleaved ? "2 * i + 1 + j" : "i + HALF + j";
          const DType nt = g.value(normed).type.dtype;
          w.line("x1[j] = {};", rounded_expr(nt, fmt::format("x1[j] * scale * lj_to_float({}[{}])", wp, ctx.address(wv, ws, {j1}))));
          w.line("x2[j] = {};", rounded_expr(nt, fmt::format("x2[j] * scale * lj_to_float({}[{}])", wp, ctx.address(wv, ws, {j2}))));
        }
        w.line("#pragma unroll");
        {
          auto inner = w.scope(fmt::format("for (int j = 0; j < {}; ++j)", s.vec));
          w.line("y1[j] = fmaf(x1[j], cos_s[i + j], -x2[j] * sin_s[i + j]);");
          w.line("y2[j] = fmaf(x2[j], cos_s[i + j], x1[j] * sin_s[i + j]);");
        }
        if (stored) {
          const std::string yp = ctx.buffer_param(y, true);
          w.line("lj_store<{}, {}>({} + {}, y1);", s.type, s.vec, yp, ctx.address(y, shape, {"n", "h", d1(s)}));
          w.line("lj_store<{}, {}>({} + {}, y2);", s.type, s.vec, yp, ctx.address(y, shape, {"n", "h", d2(s)}));
        }
        for (NodeId wn : writes_of(y)) {
          const std::string cp = ctx.buffer_param(g.node(wn).results[0], true);
          w.line("lj_store<{}, {}>({} + {}, y1);  // {}", s.type, s.vec, cp, cache_addr(wn, "h", d1(s)), print_node(g, wn));
          w.line("lj_store<{}, {}>({} + {}, y2);", s.type, s.vec, cp, cache_addr(wn, "h", d2(s)));
        }
      };
      staged_loop(w, s, [&] {
        rotate([&] {
          w.line("lj_unpack(a{}[it], x1);", k);
          w.line("lj_unpack(b{}[it], x2);", k);
        });
      });
      tail_loop(w, s, [&] {
        rotate([&] {
          const std::string xp = ctx.buffer_param(s.src, false);
          w.line("lj_load<{}, {}>({} + {}, x1);", s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d1(s)}));
          w.line("lj_load<{}, {}>({} + {}, x2);", s.type, s.vec, xp, ctx.address(s.src, shape, {"n", "h", d2(s)}));
        });
      });
    }
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work = dim_as_product(rows);
  k.launch.per_block = 1;
  k.launch.threads = kThreads;
  k.launch.early = true;  // one small CTA per row: where the CTAs land does not matter
  return k;
}

}  // namespace

const KernelFamily& rope_kv_write_family() {
  static const UntunedFamily family(GroupKind::RopeKvWrite, [](const Graph& g, const FusionGroup& grp) { return plan_rope_kv_write(g, grp).reject; }, emit_rope_kv_write);
  return family;
}

// A rope_table alone is the same kernel with nothing rotated or written: one emitter, its own name.
const KernelFamily& rope_table_family() {
  static const UntunedFamily family(GroupKind::RopeTable, [](const Graph& g, const FusionGroup& grp) { return plan_rope_kv_write(g, grp).reject; }, emit_rope_kv_write);
  return family;
}

}  // namespace lj
