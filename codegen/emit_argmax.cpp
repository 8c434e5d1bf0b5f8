// argmax over the last axis: one block of 1024 threads per row, each thread scanning the row at a
// stride (so its own first best index is kept by a strict comparison), then a block reduction that
// prefers the larger value and, between equal ones, the smaller index (templates argmax.cuh). The
// head of a model runs it on [B, vocab] logits: one block reads a 128256-wide f32 row (501 KiB).
#include "codegen/emit_argmax.h"

#include "codegen/emit_common.h"
#include "layerjit/text.h"

namespace lj {

bool is_argmax_group(const Graph& g, const FusionGroup& grp) {
  for (NodeId n : grp.nodes)
    if (g.node(n).kind == OpKind::Argmax) return true;
  return false;
}

std::string argmax_reject(const Graph& g, const FusionGroup& grp) {
  const std::string name = kernel_name(g, grp);
  if (grp.nodes.size() != 1) return fmt::format("{}: an argmax kernel takes the argmax alone, not with other nodes", name);
  const Node& n = g.node(grp.nodes[0]);
  const TensorType& x = g.value(n.operands[0]).type;
  if (!x.shape.back().is_const()) return fmt::format("{}: the row length of {} must be a constant", name, x.str());
  if (x.shape.back().value() > (int64_t{1} << 31) - 1) return fmt::format("{}: rows of {} are longer than an int indexes", name, x.str());
  return "";
}

GeneratedKernel emit_argmax(const Graph& g, const FusionGroup& grp) {
  if (std::string why = argmax_reject(g, grp); !why.empty()) throw UserError(why, g.node(grp.nodes[0]).loc);
  KernelContext ctx(g, grp);
  const NodeId node = grp.nodes[0];
  const Node& n = g.node(node);
  const ValueId x = n.operands[0], y = n.results[0];
  const Shape space = g.value(x).type.shape;
  const Shape rows(space.begin(), space.end() - 1);
  const int64_t len = space.back().value();
  constexpr int kThreads = 1024;
  ctx.add_group_params();

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/vec.cuh\"");
  w.line("#include \"layerjit/argmax.cuh\"");
  w.blank();
  {
    auto fn = w.scope(ctx.signature(kThreads));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    w.line("constexpr int N = {};  // the row length", len);
    w.line("const lj_i64 row = blockIdx.x;");
    std::vector<std::string> rc = emit_coords(w, rows, "row", "r");
    std::vector<std::string> xc = rc;
    xc.push_back("i");
    w.line("float best = -__int_as_float(0x7f800000);");
    w.line("int bi = 0x7fffffff;");
    {
      auto loop = w.scope("for (int i = threadIdx.x; i < N; i += blockDim.x)");
      w.line("const float v = lj_to_float({}[{}]);", ctx.buffer_param(x, false), ctx.address(x, space, xc));
      w.line("if (lj_argmax_better(v, i, best, bi)) {{ best = v; bi = i; }}");
    }
    w.line("const int winner = lj_block_argmax(best, bi);  // {}", print_node(g, node));
    w.line("if (threadIdx.x == 0) {}[{}] = winner;", ctx.buffer_param(y, true), ctx.address(y, rows, rc));
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work = dim_product(rows);
  k.launch.per_block = 1;
  k.launch.threads = kThreads;
  return k;
}

}  // namespace lj
