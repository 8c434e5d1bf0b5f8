// Where the intermediates of a run live: one arena, each buffer at an offset, a buffer's bytes reused
// once every kernel that touches it has run. Pure planning (no GPU), so it is tested on the CPU.
#pragma once

#include <map>
#include <set>
#include <vector>

#include "codegen/kernel.h"
#include "compiler/fusion/tensor_layout.h"

namespace lj::exec {

struct MemoryPlan {
  std::map<ValueId, size_t> offset;  ///< per placed buffer value, 256-byte aligned
  size_t arena_bytes = 0;            ///< peak: the arena's size
  size_t unshared_bytes = 0;         ///< every placed buffer in its own allocation
};

/// Live range of a placed buffer: the first and last kernel (index into the plan) that touches it;
/// `kernels.size()` as the last for a buffer behind a graph output, which must survive the run.
struct LiveRange {
  size_t first = 0, last = 0;
};

/// The buffers the executable places (every buffer a kernel touches except graph inputs and those in
/// `external`, bound by the caller) with their live ranges, in graph value order. `layouts` say which
/// buffer is behind each output: plan_layouts (compiler/fusion/tensor_layout.h), where a returned view the
/// plan copies is its own buffer, so the buffer it was sliced from dies after its last reader.
std::map<ValueId, LiveRange> live_ranges(const Graph& g, const std::vector<TensorLayout>& layouts,
                                         const std::vector<GeneratedKernel>& kernels, const std::set<ValueId>& external);

/// First fit, in order of first use, over the buffers still live when each one starts.
MemoryPlan plan_memory(const Graph& g, const std::vector<TensorLayout>& layouts, const std::vector<GeneratedKernel>& kernels,
                       const std::set<ValueId>& external, const Bindings& b);

/// Device memory one call of a plan needs at symbol values `b`: what the caller binds (weights,
/// other inputs such as KV caches, outputs bound outside the arena) and what the executable allocates
/// (the arena of intermediates and unbound outputs, the kernels' scratch).
struct Footprint {
  size_t weights = 0;  ///< `param` inputs
  size_t inputs = 0;   ///< the other graph inputs
  size_t outputs = 0;  ///< outputs in buffers of their own (in `external`, not an input updated in place)
  size_t prepared = 0;  ///< weights the plan prepares (a folded norm's W * w), held by the executable
  size_t arena = 0;
  size_t scratch = 0;
  size_t total() const { return weights + inputs + outputs + prepared + arena + scratch; }
};

Footprint plan_footprint(const Graph& g, const std::vector<TensorLayout>& layouts, const std::vector<GeneratedKernel>& kernels,
                         const std::set<ValueId>& external, const Bindings& b);

}  // namespace lj::exec
