// RoPE groups: a rope_table, the ropes that use it and the KV-cache writes at the same positions,
// in one kernel with one CTA per position row. The cos/sin row is computed once per CTA into shared
// memory (in double, then rounded to f32 as the rope_table op defines) and never stored; rotated
// keys go straight into the cache.
#include <algorithm>
#include <cmath>

#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_rope_kv_write(const Graph& g, const FusionGroup& grp, const EmitOptions&) {
  KernelContext ctx(g, grp);
  NodeId table = -1;
  std::vector<NodeId> ropes, writes;
  for (NodeId n : grp.nodes) {
    switch (g.node(n).kind) {
      case OpKind::RopeTable: table = n; break;
      case OpKind::Rope: ropes.push_back(n); break;
      case OpKind::KvCacheWrite: writes.push_back(n); break;
      default:
        throw UserError(fmt::format("{}: {} cannot be part of a rope_kv_write kernel", ctx.kernel_name(), op_name(g.node(n).kind)));
    }
  }
  // One CTA per row n: a position (rope_table / cache writes) and the rows of every rotated tensor.
  ValueId pos = table >= 0 ? g.node(table).operands[0] : (!writes.empty() ? g.node(writes[0]).operands[2] : -1);
  ValueId cos_in = -1, sin_in = -1;  // tables read from memory when the group does not compute them
  int64_t half = 0;
  Dim rows;
  if (table >= 0) {
    half = g.node(table).attrs.get_int("dim") / 2;
    rows = g.value(pos).type.shape[0];
  } else if (!ropes.empty()) {
    cos_in = g.node(ropes[0]).operands[1];
    sin_in = g.node(ropes[0]).operands[2];
    const Shape& cs = g.value(cos_in).type.shape;
    half = cs.back().value();
    rows = cs[0];
  } else {
    rows = g.value(pos).type.shape[0];
  }
  for (NodeId r : ropes) {
    const TensorType& xt = g.value(g.node(r).operands[0]).type;
    LJ_CHECK(xt.rank() == 3 && xt.shape[0] == rows, g.node(r).loc,
             "{}: the fused rope kernel rotates [N, H, D] tensors with one position per row; got {}", ctx.kernel_name(), xt.str());
    LJ_CHECK(table >= 0 || (g.node(r).operands[1] == cos_in && g.node(r).operands[2] == sin_in), g.node(r).loc,
             "{}: ropes in one kernel must share their cos/sin tables", ctx.kernel_name());
  }
  for (NodeId wn : writes) {
    const TensorType& nt = g.value(g.node(wn).operands[1]).type;
    LJ_CHECK(nt.rank() == 3, g.node(wn).loc, "{}: the fused cache write takes one new entry [B, H, D] per sequence; got {}",
             ctx.kernel_name(), nt.str());
    LJ_CHECK(g.node(wn).operands[2] == pos, g.node(wn).loc, "{}: cache writes in one kernel must share their positions",
             ctx.kernel_name());
  }
  constexpr int kThreads = 128;

  if (pos >= 0) ctx.buffer_param(pos, false);  // positions first: the kernel reads them before anything else
  ctx.add_group_params();

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.blank();
  if (table >= 0) {
    // theta^(-2i/dim) is a compile-time constant: computed here in double exactly as the CPU
    // reference computes it (17 significant digits read back to the same double), so the kernel
    // spends no time on pow() and the angles match the reference bit for bit.
    const Node& tn = g.node(table);
    const int64_t dim = tn.attrs.get_int("dim");
    const double theta = tn.attrs.get_float("theta");
    std::string values;
    for (int64_t i = 0; i < half; ++i) {
      values += fmt::format("{}{:.17g}", i == 0 ? "" : (i % 4 == 0 ? ",\n    " : ", "),
                            std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim)));
    }
    w.line("// {}: inv_freq[i] = theta^(-2i/dim)", print_node(g, table));
    w.line("static __device__ const double lj_inv_freq[{}] = {{\n    {}}};", half, values);
    w.blank();
  }
  {
    auto fn = w.scope(ctx.signature(kThreads));
    if (half > 0) {
      w.line("constexpr int HALF = {};  // head_dim / 2", half);
      w.line("__shared__ float cos_s[HALF], sin_s[HALF];");
    }
    w.line("const lj_i64 n = blockIdx.x;");
    w.line("if (n >= {}) return;", product_expr(dim_as_product(rows)));
    if (pos >= 0) w.line("const lj_i64 pos = {}[n];", ctx.buffer_param(pos, false));
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
    if (half > 0) w.line("__syncthreads();");
    auto cache_check = [&](NodeId wn) {
      const TensorType& ct = g.value(g.node(wn).operands[0]).type;
      // An out-of-range position would write outside the cache: stop the kernel loudly instead.
      w.line("if (pos < 0 || pos >= {}) __trap();  // %{}: position outside the cache", product_expr(dim_as_product(ct.shape[1])),
             g.value(g.node(wn).results[0]).name);
    };
    std::vector<std::string> checked;  // one check per distinct cache capacity
    for (NodeId wn : writes) {
      const std::string cap = product_expr(dim_as_product(g.value(g.node(wn).operands[0]).type.shape[1]));
      if (std::find(checked.begin(), checked.end(), cap) != checked.end()) continue;
      checked.push_back(cap);
      cache_check(wn);
    }
    auto writes_of = [&](ValueId v) {
      std::vector<NodeId> out;
      for (NodeId wn : writes)
        if (g.node(wn).operands[1] == v) out.push_back(wn);
      return out;
    };
    auto cache_addr = [&](NodeId wn, const std::string& h, const std::string& d) {
      const ValueId cache = g.node(wn).operands[0];
      return ctx.address(cache, g.value(cache).type.shape, {"n", "pos", h, d});
    };
    for (NodeId r : ropes) {
      const Node& rn = g.node(r);
      const ValueId x = rn.operands[0];
      const ValueId y = rn.results[0];
      const TensorType& xt = g.value(x).type;
      const bool interleaved = rn.attrs.get_string("style") == "interleaved";
      const Shape& s = xt.shape;
      w.comment(print_node(g, r));
      const bool stored = std::find(grp.outputs.begin(), grp.outputs.end(), y) != grp.outputs.end();
      // Half-style pairs are two contiguous runs (i.. and i + HALF..): V of each per access where
      // every access is aligned. Interleaved pairs are adjacent: one pair per thread.
      std::vector<ValueId> accessed = {x};
      if (stored) accessed.push_back(y);
      for (NodeId wn : writes_of(y)) accessed.push_back(g.node(wn).operands[0]);
      int vec = interleaved ? 1 : ctx.vector_width(accessed, s, 16 / dtype_bytes(xt.dtype));
      while (vec > 1 && half % vec != 0) vec /= 2;
      const int64_t runs = interleaved ? half : half / vec;
      auto loop = w.scope(fmt::format("for (int idx = threadIdx.x; idx < {} * {}; idx += blockDim.x)", s[1].value(), runs));
      w.line("const int h = idx / {}, i = idx % {} * {};", runs, runs, interleaved ? 1 : vec);
      const std::string d1 = interleaved ? "2 * i" : "i";
      const std::string d2 = interleaved ? "2 * i + 1" : "i + HALF";
      const std::string xp = ctx.buffer_param(x, false);
      const char* xt_c = c_type(xt.dtype);
      w.line("float x1[{}], x2[{}], y1[{}], y2[{}];", vec, vec, vec, vec);
      w.line("lj_load<{}, {}>({} + {}, x1);", xt_c, vec, xp, ctx.address(x, s, {"n", "h", d1}));
      w.line("lj_load<{}, {}>({} + {}, x2);", xt_c, vec, xp, ctx.address(x, s, {"n", "h", d2}));
      w.line("#pragma unroll");
      {
        auto inner = w.scope(fmt::format("for (int j = 0; j < {}; ++j)", vec));
        w.line("y1[j] = fmaf(x1[j], cos_s[i + j], -x2[j] * sin_s[i + j]);");
        w.line("y2[j] = fmaf(x2[j], cos_s[i + j], x1[j] * sin_s[i + j]);");
      }
      if (stored) {
        const std::string yp = ctx.buffer_param(y, true);
        w.line("lj_store<{}, {}>({} + {}, y1);", xt_c, vec, yp, ctx.address(y, s, {"n", "h", d1}));
        w.line("lj_store<{}, {}>({} + {}, y2);", xt_c, vec, yp, ctx.address(y, s, {"n", "h", d2}));
      }
      for (NodeId wn : writes_of(y)) {
        const std::string cp = ctx.buffer_param(g.node(wn).results[0], true);
        w.line("lj_store<{}, {}>({} + {}, y1);  // {}", xt_c, vec, cp, cache_addr(wn, "h", d1), print_node(g, wn));
        w.line("lj_store<{}, {}>({} + {}, y2);", xt_c, vec, cp, cache_addr(wn, "h", d2));
      }
    }
    // Cache writes of values computed elsewhere (v): a copy into the cache row.
    for (NodeId wn : writes) {
      const ValueId nv = g.node(wn).operands[1];
      if (g.value(nv).producer >= 0 &&
          std::find(grp.nodes.begin(), grp.nodes.end(), g.value(nv).producer) != grp.nodes.end())
        continue;
      const Shape& s = g.value(nv).type.shape;
      const ValueId cache = g.node(wn).operands[0];
      const char* t = c_type(g.value(nv).type.dtype);
      const int vec = ctx.vector_width({nv, cache}, s, 16 / dtype_bytes(g.value(nv).type.dtype));
      const int64_t runs = s[2].value() / vec;
      w.comment(print_node(g, wn));
      auto loop = w.scope(fmt::format("for (int idx = threadIdx.x; idx < {} * {}; idx += blockDim.x)", s[1].value(), runs));
      w.line("const int h = idx / {}, d = idx % {} * {};", runs, runs, vec);
      w.line("float e[{}];", vec);
      w.line("lj_load<{}, {}>({} + {}, e);", t, vec, ctx.buffer_param(nv, false), ctx.address(nv, s, {"n", "h", "d"}));
      w.line("lj_store<{}, {}>({} + {}, e);", t, vec, ctx.buffer_param(g.node(wn).results[0], true), cache_addr(wn, "h", "d"));
    }
  }

  GeneratedKernel k;
  k.group = grp.id;
  k.name = ctx.kernel_name();
  k.source = w.str();
  k.params = ctx.params();
  k.launch.work = dim_as_product(rows);
  k.launch.per_block = 1;
  k.launch.threads = kThreads;
  return k;
}

}  // namespace lj
