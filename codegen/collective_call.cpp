#include "codegen/collective_call.h"

#include <fmt/format.h>

#include "codegen/emit_common.h"
#include "layerjit/check.h"

namespace lj {

bool is_collective(GroupKind k) { return k == GroupKind::AllReduce; }

GeneratedKernel collective_call(const Graph& g, const FusionGroup& grp) {
  LJ_ASSERT(is_collective(grp.kind), "group {} of @{} is not a collective", grp.id, g.name());
  LJ_ASSERT(grp.inputs.size() == 1 && grp.outputs.size() == 1, "all_reduce group {} of @{}: {} inputs, {} outputs", grp.id, g.name(),
            grp.inputs.size(), grp.outputs.size());
  KernelContext ctx(g, grp);
  for (ValueId v : {grp.inputs[0], grp.outputs[0]}) {
    const TensorLayout& l = ctx.layout(v);
    const std::vector<DimProduct> dense = dense_strides(g.value(v).type.shape);
    if (l.offset.constant != 0 || l.strides != dense)
      throw UserError(fmt::format("group {} of @{}: the all_reduce's %{} is a strided or offset view; NCCL sums one contiguous "
                                  "range (reduce a dense value)", grp.id, g.name(), g.value(v).name));
  }
  ctx.add_group_params();
  return ctx.kernel(SourceWriter{});
}

}  // namespace lj
