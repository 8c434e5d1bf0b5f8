#include "exec/memory_plan.h"

#include <algorithm>
#include <set>

namespace lj::exec {

namespace {

constexpr size_t kAlign = 256;  // every buffer starts 256-byte aligned, as cudaMalloc's would

bool contains(const std::vector<ValueId>& xs, ValueId v) { return std::find(xs.begin(), xs.end(), v) != xs.end(); }

size_t bytes_of(const Graph& g, ValueId v, const Bindings& b) {
  const TensorType& t = g.value(v).type;
  return static_cast<size_t>(storage_bytes(t.dtype, numel(resolve(t.shape, b))));
}

}  // namespace

std::map<ValueId, LiveRange> live_ranges(const Graph& g, const std::vector<TensorLayout>& layouts,
                                         const std::vector<GeneratedKernel>& kernels, const std::set<ValueId>& external) {
  std::vector<ValueId> kept;  // buffers behind graph outputs (an output may be a view of an intermediate)
  for (ValueId o : g.outputs()) kept.push_back(layouts[static_cast<size_t>(o)].buffer);
  std::map<ValueId, LiveRange> live;
  for (size_t i = 0; i < kernels.size(); ++i)
    for (const KernelParam& p : kernels[i].params) {
      if (p.kind != KernelParam::Kind::Buffer || contains(g.inputs(), p.buffer) || external.count(p.buffer)) continue;
      auto [it, fresh] = live.try_emplace(p.buffer, LiveRange{i, i});
      if (!fresh) it->second.last = i;
      if (contains(kept, p.buffer)) it->second.last = kernels.size();
    }
  return live;
}

MemoryPlan plan_memory(const Graph& g, const std::vector<TensorLayout>& layouts, const std::vector<GeneratedKernel>& kernels,
                       const std::set<ValueId>& external, const Bindings& b) {
  const std::map<ValueId, LiveRange> live = live_ranges(g, layouts, kernels, external);
  std::vector<ValueId> order;
  for (const auto& [v, range] : live) order.push_back(v);
  std::stable_sort(order.begin(), order.end(), [&](ValueId x, ValueId y) { return live.at(x).first < live.at(y).first; });
  MemoryPlan mp;
  struct Placed {
    size_t offset, bytes, last;
  };
  std::vector<Placed> placed;
  for (ValueId v : order) {
    const LiveRange r = live.at(v);
    const size_t bytes = (bytes_of(g, v, b) + kAlign - 1) / kAlign * kAlign;
    mp.unshared_bytes += bytes;
    std::erase_if(placed, [&](const Placed& p) { return p.last < r.first; });
    std::sort(placed.begin(), placed.end(), [](const Placed& x, const Placed& y) { return x.offset < y.offset; });
    size_t at = 0;
    for (const Placed& p : placed) {
      if (p.offset >= at + bytes) break;  // the gap before p holds it
      at = std::max(at, p.offset + p.bytes);
    }
    placed.push_back({at, bytes, r.last});
    mp.offset[v] = at;
    mp.arena_bytes = std::max(mp.arena_bytes, at + bytes);
  }
  return mp;
}

Footprint plan_footprint(const Graph& g, const std::vector<TensorLayout>& layouts, const std::vector<GeneratedKernel>& kernels,
                         const std::set<ValueId>& external, const Bindings& b) {
  Footprint f;
  for (ValueId v : g.inputs()) (g.value(v).is_param ? f.weights : f.inputs) += bytes_of(g, v, b);
  std::set<ValueId> counted;
  for (ValueId o : g.outputs()) {
    const ValueId buf = layouts[static_cast<size_t>(o)].buffer;
    if (external.count(buf) && !contains(g.inputs(), buf) && counted.insert(buf).second) f.outputs += bytes_of(g, buf, b);
  }
  f.arena = plan_memory(g, layouts, kernels, external, b).arena_bytes;
  for (const GeneratedKernel& k : kernels) f.scratch += static_cast<size_t>(scratch_bytes(k, b));
  return f;
}

}  // namespace lj::exec
