// fold_norms: RMSNorm folded into the matmuls that read it. With s = 1 / sqrt(mean(x^2) + eps) per
// row, matmul(rms_norm(x, w), W)[m, n] = s[m] * sum_k x[m, k] * (W[n, k] * w[k]): the norm weight
// moves into W once (a param-only mul, computed when the weights are bound) and the per-row factor
// into the matmul, applied to its fp32 sums. The normalised activations never reach memory: the norm
// kernel reads x and writes one float per row (the seed's "kernel 0" folded away at T = 4096: 32 MiB
// less written per norm of the 8B layer, and the same 32 MiB read by the projection either way).
//
// Rounding differs from the unfolded graph: W * w is rounded to W's dtype once instead of each
// normalised element to x's dtype; both are one rounding of the same products, so the folded result
// agrees with the unfolded one to the matmul's tolerance (not bit for bit).
#include <algorithm>

#include <fmt/format.h>

#include "compiler/passes/graph_editor.h"
#include "layerjit/passes.h"
#include "layerjit/op_attrs.h"

namespace lj {

namespace {

bool is_param_input(const Graph& g, ValueId v) { return g.value(v).producer < 0 && g.value(v).is_param; }

}  // namespace

NormFolding fold_norms(const Graph& g) {
  std::vector<std::vector<NodeId>> users(g.values().size());
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes().size()); ++n)
    for (ValueId v : g.node(n).operands) users[static_cast<size_t>(v)].push_back(n);
  auto returned = [&](ValueId v) { return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end(); };
  auto name = [&](ValueId v) { return "%" + g.value(v).name; };

  GraphEditor ed(g);
  NormFolding out;
  for (NodeId n = 0; n < static_cast<NodeId>(g.nodes().size()); ++n) {
    const Node& norm = g.node(n);
    if (norm.kind != OpKind::RmsNorm) continue;
    const ValueId x = norm.operands[0], w = norm.operands[1], h = norm.results[0];
    const std::vector<NodeId>& readers = users[static_cast<size_t>(h)];
    const bool feeds_matmul = std::any_of(readers.begin(), readers.end(), [&](NodeId u) { return g.node(u).kind == OpKind::Matmul; });
    if (!feeds_matmul) continue;
    auto refuse = [&](const std::string& why) { out.notes.push_back(fmt::format("{} not folded: {}", name(h), why)); };
    if (!is_param_input(g, w)) {
      refuse(fmt::format("its weight {} is not a param, so it cannot be multiplied into the matmul's weights once", name(w)));
      continue;
    }
    if (returned(h)) {
      refuse("it is returned, so it is stored anyway");
      continue;
    }
    std::string why;
    for (NodeId u : readers) {
      const Node& mm = g.node(u);
      if (mm.kind != OpKind::Matmul)
        why = fmt::format("{} reads it too, and needs the normalised rows", op_name(mm.kind));
      else if (mm.operands[0] != h || mm.operands.size() != 2)
        why = "a matmul reads it as its weight, or already scales its rows";
      else if (!is_param_input(g, mm.operands[1]))
        why = fmt::format("the matmul's weight {} is not a param", name(mm.operands[1]));
      if (!why.empty()) break;
    }
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    // The norm's result id becomes the row scale: every reader of it is rewritten below.
    const std::string scale = ed.unique_name(g.value(h).name + ".scale");
    Attrs sa;
    sa.set("eps", attr::eps(norm.attrs));
    ed.replace(n, OpKind::RmsScale, {x}, sa, {scale});
    std::string folded_list;
    for (NodeId u : readers) {
      const Node& mm = g.node(u);
      const ValueId wt = mm.operands[1];
      const ValueId wf = ed.insert_before(u, OpKind::Mul, {wt, w}, {}, ed.unique_name(g.value(wt).name + ".folded"));
      ed.replace(u, OpKind::Matmul, {x, wf, h}, mm.attrs);
      folded_list += fmt::format("{}{} (weights %{} = {} * {})", folded_list.empty() ? "" : ", ", name(mm.results[0]),
                                 ed.graph().value(wf).name, name(wt), name(w));
    }
    ++out.folded;
    out.notes.push_back(fmt::format("{} = rms_norm({}, {}) folded into {}: each row's sums scaled by %{} = rms_scale({}), "
                                    "so {} ({}) is never stored",
                                    name(h), name(x), name(w), folded_list, scale, name(x), name(h), g.value(h).type.str()));
  }
  out.graph = ed.finish();
  return out;
}

}  // namespace lj
