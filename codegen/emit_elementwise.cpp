// Elementwise groups: one pass over the output's iteration space, V consecutive elements per thread
// (16-byte accesses where alignment is proven), every intermediate kept in fp32 registers.
#include <algorithm>

#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "compiler/fusion/legality.h"
#include "layerjit/op_attrs.h"
#include "layerjit/text.h"

namespace lj {

namespace {

// A group-wise dequantize alone (the weight preparation of a quantized matmul the planner does not
// fuse, or an unfused plan): one thread per byte of codes, so a 4-bit pair is unpacked from the
// byte that holds it (element 2j in the low nibble); both share a group, since groups are even.
GeneratedKernel emit_group_dequantize(const Graph& g, const FusionGroup& grp) {
  KernelContext ctx(g, grp);
  constexpr int kThreads = 256;
  const Node& node = g.node(grp.nodes[0]);
  const TensorType& xt = g.value(node.operands[0]).type;
  const DType out = g.value(node.results[0]).type.dtype;
  const int64_t k = xt.shape.back().value(), group = *attr::group(node.attrs);
  const bool packed = is_packed(xt.dtype);
  const bool has_zero = node.operands.size() == 3;
  const DType zt = has_zero ? g.value(node.operands[2]).type.dtype : DType::U4;
  ctx.add_group_params();
  const std::string x = ctx.buffer_param(node.operands[0], false), s = ctx.buffer_param(node.operands[1], false),
                    y = ctx.buffer_param(node.results[0], true);

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(kThreads));
    w.line("lj_pdl_begin();");
    w.line("constexpr lj_i64 K = {}, G = {}, GROUPS = {};  // row length, group, groups per row", k, group, k / group);
    w.line("const lj_i64 n = {};  // bytes of codes", packed ? fmt::format("({}) / 2", product_expr(dim_product(xt.shape)))
                                                               : product_expr(dim_product(xt.shape)));
    auto loop = w.scope("for (lj_i64 e = (lj_i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (lj_i64)gridDim.x * blockDim.x)");
    w.line("const lj_i64 i = e * {};  // the first element this byte holds", packed ? 2 : 1);
    w.line("const lj_i64 at = i / K * GROUPS + i % K / G;  // its group's scale");
    w.line("const float s = lj_to_float({}[at]);", s);
    if (has_zero) {
      const std::string z = ctx.buffer_param(node.operands[2], false);
      if (zt == DType::U4) w.line("const float z = (float)(({}[at / 2] >> (at % 2 * 4)) & 15);", z);
      else w.line("const float z = (float){}[at];", z);
    } else {
      w.line("const float z = 0.f;");
    }
    if (!packed) {
      w.line("{}[i] = lj_from_float<{}>(((float){}[e] - z) * s);", y, c_type(out), x);
    } else {
      w.line("const int b = {}[e];", x);
      if (xt.dtype == DType::I4) w.line("const int lo = ((b & 15) ^ 8) - 8, hi = ((b >> 4) ^ 8) - 8;  // two's complement nibbles");
      else w.line("const int lo = b & 15, hi = b >> 4;");
      w.line("{}[i] = lj_from_float<{}>(((float)lo - z) * s);", y, c_type(out));
      w.line("{}[i + 1] = lj_from_float<{}>(((float)hi - z) * s);", y, c_type(out));
    }
  }
  GeneratedKernel kern = ctx.kernel(w);
  kern.launch.work = dim_product(xt.shape);
  kern.launch.per_block = static_cast<int64_t>(kThreads) * (packed ? 2 : 1);
  kern.launch.threads = kThreads;
  kern.launch.early = true;
  return kern;
}

GeneratedKernel emit_elementwise(const Graph& g, const FusionGroup& grp) {
  if (grp.nodes.size() == 1 && is_group_dequantize(g.node(grp.nodes[0]))) return emit_group_dequantize(g, grp);
  KernelContext ctx(g, grp);
  const Shape space = g.value(g.node(grp.nodes.back()).results[0]).type.shape;
  constexpr int kThreads = 256;

  // Vector width: 16 bytes of the widest stored or loaded dtype, where every access allows it.
  const int vec = ctx.group_vector_width(space);
  ctx.add_group_params();

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.line("#include \"layerjit/math.cuh\"");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(kThreads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    emit_trigger_dependents(w, grp);
    w.line("constexpr int V = {};  // elements per thread and access", vec);
    w.line("const lj_i64 n = {};", product_expr(dim_product(space)));
    auto loop = w.scope("for (lj_i64 e = ((lj_i64)blockIdx.x * blockDim.x + threadIdx.x) * V; e < n; e += (lj_i64)gridDim.x * blockDim.x * V)");
    std::vector<std::string> coords = emit_coords(w, space, "e", "c");
    // Inputs, in the order the nodes read them; a value read per channel is a separate load.
    const int rank = static_cast<int>(space.size());
    std::map<OperandRead, std::string> loaded;
    std::map<ValueId, std::string> reg;  // values computed in the kernel -> register
    auto computed_here = [&](ValueId v) { return std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end(); };
    for (NodeId n : grp.nodes) {
      const Node& node = g.node(n);
      for (int i = 0; i < static_cast<int>(node.operands.size()); ++i) {
        OperandRead rd = operand_read(g, node, i, rank);
        if (computed_here(rd.value) || loaded.count(rd)) continue;
        const ValueId v = rd.value;
        const std::string r = "v_" + ident(g.value(v).name) + (rd.axis >= 0 ? fmt::format("_axis{}", rd.axis) : "");
        const std::string ptr = ctx.buffer_param(v, false);
        const std::string addr = ctx.address(v, space, coords, rd.axis);
        const char* t = c_type(g.value(v).type.dtype);
        if (ctx.varies_innermost(v, space, rd.axis)) {
          w.line("float {}[V];  // %{}", r, g.value(v).name);
          w.line("lj_load<{}, V>({} + {}, {});", t, ptr, addr, r);
          loaded[rd] = r + "[j]";
        } else {
          w.line("const float {} = lj_to_float({}[{}]);  // %{} (broadcast along the last axis)", r, ptr, addr, g.value(v).name);
          loaded[rd] = r;
        }
      }
    }
    for (ValueId v : grp.outputs) w.line("float y_{}[V];", ident(g.value(v).name));
    {
      w.line("#pragma unroll");
      auto inner = w.scope("for (int j = 0; j < V; ++j)");
      for (NodeId n : grp.nodes) emit_pointwise_node(w, g, n, rank, grp.inputs, loaded, reg, grp.outputs);
    }
    for (ValueId v : grp.outputs)
      w.line("lj_store<{}, V>({} + {}, y_{});", c_type(g.value(v).type.dtype), ctx.buffer_param(v, true),
             ctx.address(v, space, coords), ident(g.value(v).name));
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work = dim_product(space);
  k.launch.per_block = static_cast<int64_t>(kThreads) * vec;
  k.launch.threads = kThreads;
  k.launch.early = true;  // many small CTAs: where they land does not matter
  return k;
}

}  // namespace

// Every chain of pointwise nodes the planner groups has a kernel: nothing to refuse.
const KernelFamily& elementwise_family() {
  static const UntunedFamily family(
      GroupKind::Elementwise, [](const Graph&, const FusionGroup&) { return std::string(); }, emit_elementwise);
  return family;
}

}  // namespace lj
