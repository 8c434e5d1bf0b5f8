// Copies of returned views. A graph output that is a view keeps the buffer it aliases alive until the
// run ends (the caller reads it there), however early that buffer's last reader runs: the prefill
// layer returns %v, a slice of the QKV projection, which pinned all [T, 6144] of it through the MLP,
// where the arena peaks. The copy goes into a kernel that already reads rows of that buffer (the
// RoPE kernel reads q and k out of the projection; v's rows are one more stream of loads and stores,
// as the decode cache write of v already is), so it costs no launch and no extra pass over memory
// beyond the slice itself. Readers of the value inside the graph (attention) keep reading it in
// place: their kernels do not change and no dependency between groups is added; the larger buffer
// dies after its last reader instead of at the end of the run.
#include "compiler/fusion/output_views.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/fusion/legality.h"
#include "compiler/fusion/tensor_layout.h"

namespace lj {

namespace {

bool contains(const std::vector<ValueId>& xs, ValueId v) { return std::find(xs.begin(), xs.end(), v) != xs.end(); }

std::string vname(const Graph& g, ValueId v) { return "%" + g.value(v).name; }

// The group that copies `view` of `owner`'s buffer: the first in plan order whose kernel copies rows
// and reads `owner`'s buffer already (so the copy extends no buffer's life), or nullptr with the
// reason in `why`.
FusionGroup* find_copier(const Graph& g, FusionPlan& plan, ValueId view, ValueId owner, std::string& why) {
  const FusionGroup* reader = nullptr;  // a row-copying kernel that reads the buffer, but cannot copy this view
  for (FusionGroup& grp : plan.groups) {
    if (!copies_rows(grp.kind)) continue;
    const bool reads_owner =
        std::any_of(grp.inputs.begin(), grp.inputs.end(), [&](ValueId in) { return memory_owner(g, in, plan.dense_views) == owner; });
    if (!reads_owner) continue;
    if (fits_row_copy(g, grp, view)) return &grp;
    if (!reader) reader = &grp;
  }
  if (reader) {
    why = fmt::format("stays a view of {}: group {} ({}) reads {} but copies only [rows, H, D] or [rows, D] views over its "
                      "{} rows with constant trailing dims, and {} is {}; {} lives to the end of the run",
                      vname(g, owner), reader->id, group_kind_name(reader->kind), vname(g, owner),
                      rope_group_rows(g, *reader).str(), vname(g, view), g.value(view).type.str(), vname(g, owner));
  } else {
    why = fmt::format("stays a view of {}: no kernel that copies rows (rope_kv_write) reads {}; {} lives to the end of the run",
                      vname(g, owner), vname(g, owner), vname(g, owner));
  }
  return nullptr;
}

}  // namespace

void plan_output_view_copies(const Graph& g, FusionPlan& plan, const FusionOptions& opts) {
  std::vector<ValueId> seen;
  for (ValueId v : g.outputs()) {
    const NodeId p = g.value(v).producer;
    if (p < 0 || !is_view(g.node(p).kind) || contains(seen, v)) continue;
    seen.push_back(v);
    OutputView ov;
    ov.value = v;
    ov.buffer = memory_owner(g, v, plan.dense_views);
    const std::string buf = vname(g, ov.buffer);
    if (contains(plan.dense_views, ov.buffer)) {
      const auto maker = std::find_if(plan.groups.begin(), plan.groups.end(),
                                      [&](const FusionGroup& grp) { return contains(grp.outputs, ov.buffer); });
      ov.why = fmt::format("{} has a buffer of its own{}: what it views is never stored", ov.buffer == v ? buf : "its source " + buf,
                           maker == plan.groups.end() ? "" : fmt::format(", stored by group {} ({})", maker->id, group_kind_name(maker->kind)));
    } else if (g.value(ov.buffer).producer < 0) {
      ov.why = fmt::format("stays a view of graph input {}: the caller's memory, which a copy would not free", buf);
    } else if (contains(g.outputs(), ov.buffer)) {
      ov.why = fmt::format("stays a view of {}: {} is returned too, so its buffer lives to the end of the run anyway", buf, buf);
    } else if (!smaller_at_every_size(g, v, ov.buffer)) {
      ov.why = fmt::format("stays a view of {}: it is all of {} ({} elements), so a copy would free nothing", buf, buf,
                           dim_product(g.value(ov.buffer).type.shape).str());
    } else if (!opts.fuse) {
      ov.why = fmt::format("stays a view of {}: --no-fuse adds no copies; {} lives to the end of the run", buf, buf);
    } else if (!opts.copy_output_views) {
      ov.why = fmt::format("stays a view of {}: copies of returned views are off; {} lives to the end of the run", buf, buf);
    } else if (FusionGroup* grp = find_copier(g, plan, v, ov.buffer, ov.why)) {
      ov.copied_by = grp->id;
      ov.why = fmt::format("copied by group {} ({}) into a buffer of its own, so {} is freed after its last reader instead of "
                           "at the end of the run",
                           grp->id, group_kind_name(grp->kind), buf);
      grp->copies.push_back(v);
      if (!contains(grp->inputs, v)) grp->inputs.push_back(v);
      grp->why.push_back(fmt::format("copies {} (a returned view, {}) out of {} ({}) into a buffer of its own: the kernel reads "
                                     "rows of {} already, and a view would keep all of {} alive to the end of the run",
                                     vname(g, v), g.value(v).type.str(), buf, g.value(ov.buffer).type.str(), buf, buf));
    }
    plan.output_views.push_back(std::move(ov));
  }
}

}  // namespace lj
