// Gather groups: an embedding lookup alone. One pass over the output [ids..., H], V consecutive
// elements of a table row per thread (16-byte loads where H and the output allow). An id outside
// the table writes a row of zeros: a kernel cannot raise an error, so the callers that take ids
// from users check them first (models/model.h check_generate_request), and ids the head's argmax
// produces are in range by construction.
#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "layerjit/text.h"

namespace lj {

namespace {

struct GatherPlan {
  NodeId node = -1;
  std::string reject;
};

GatherPlan plan_gather(const Graph& g, const FusionGroup& grp) {
  GatherPlan p;
  const std::string name = kernel_name(g, grp);
  if (grp.nodes.size() != 1 || g.node(grp.nodes[0]).kind != OpKind::Embedding) {
    p.reject = fmt::format("{}: a gather group holds one embedding", name);
    return p;
  }
  p.node = grp.nodes[0];
  const Node& n = g.node(p.node);
  const TensorType& table = g.value(n.operands[0]).type;
  if (!table.shape[0].is_const() || !table.shape[1].is_const())
    p.reject = fmt::format("{}: the embedding table {} must have a constant shape", name, table.str());
  return p;
}

GeneratedKernel emit_embedding(const Graph& g, const FusionGroup& grp) {
  const GatherPlan plan = plan_gather(g, grp);
  if (!plan.reject.empty()) throw UserError(plan.reject, g.node(grp.nodes[0]).loc);
  KernelContext ctx(g, grp);
  const Node& n = g.node(plan.node);
  const ValueId table = n.operands[0], ids = n.operands[1], out = n.results[0];
  const TensorType& tt = g.value(table).type;
  const int64_t vocab = tt.shape[0].value(), width = tt.shape[1].value();
  const Shape space = g.value(out).type.shape;
  const Shape id_space = g.value(ids).type.shape;
  constexpr int kThreads = 256;
  int vec = ctx.vector_width({out}, space, 16 / dtype_bytes(tt.dtype));
  while (width % vec != 0) vec /= 2;  // a table row starts at id * H: V must divide H
  ctx.add_group_params();

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(kThreads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    w.line("constexpr int V = {};  // elements per thread and access", vec);
    w.line("constexpr lj_i64 H = {}, VOCAB = {};", width, vocab);
    w.line("const lj_i64 n = {};", product_expr(dim_product(space)));
    auto loop = w.scope("for (lj_i64 e = ((lj_i64)blockIdx.x * blockDim.x + threadIdx.x) * V; e < n; e += (lj_i64)gridDim.x * blockDim.x * V)");
    std::vector<std::string> coords = emit_coords(w, space, "e", "c");
    const std::vector<std::string> id_coords(coords.begin(), coords.end() - 1);
    w.line("const int id = {}[{}];  // %{}", ctx.buffer_param(ids, false), ctx.address(ids, id_space, id_coords), g.value(ids).name);
    w.line("float v[V];");
    w.line("if (id >= 0 && id < VOCAB) lj_load<{}, V>({} + (lj_i64)id * H + {}, v);", c_type(tt.dtype), ctx.buffer_param(table, false),
           coords.back());
    w.line("else for (int j = 0; j < V; ++j) v[j] = 0.f;  // not a row of the table");
    w.line("lj_store<{}, V>({} + {}, v);  // {}", c_type(tt.dtype), ctx.buffer_param(out, true), ctx.address(out, space, coords),
           print_node(g, plan.node));
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work = dim_product(space);
  k.launch.per_block = static_cast<int64_t>(kThreads) * vec;
  k.launch.threads = kThreads;
  k.launch.early = true;
  return k;
}

}  // namespace

const KernelFamily& gather_family() {
  static const UntunedFamily family(GroupKind::Gather, [](const Graph& g, const FusionGroup& grp) { return plan_gather(g, grp).reject; },
                                    emit_embedding);
  return family;
}

}  // namespace lj
