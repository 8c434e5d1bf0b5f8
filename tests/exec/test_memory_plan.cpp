// The arena layout of whole plans, on the CPU (kernels are generated, never run): no two buffers that
// are live at the same kernel share a byte, graph outputs survive the run, and reuse makes the fused
// Llama-3-8B prefill plan need far less than the unfused one.
#include <catch2/catch.hpp>

#include "exec/memory_plan.h"
#include "layerjit/llama.h"

using namespace lj;

namespace {

struct Planned {
  std::vector<TensorLayout> layouts;
  std::vector<GeneratedKernel> kernels;
  exec::MemoryPlan plan;
  std::map<ValueId, exec::LiveRange> live;
};

Planned plan(const Graph& g, bool fuse, const Bindings& b) {
  Planned p;
  p.layouts = compute_layouts(g);
  EmitOptions eo;
  eo.hint = b;
  for (const FusionGroup& grp : plan_fusion(g, FusionOptions{fuse}).groups) p.kernels.push_back(emit_group(g, grp, eo));
  p.plan = exec::plan_memory(g, p.layouts, p.kernels, {}, b);
  p.live = exec::live_ranges(g, p.layouts, p.kernels, {});
  return p;
}

size_t bytes_of(const Graph& g, ValueId v, const Bindings& b) {
  return static_cast<size_t>(numel(resolve(g.value(v).type.shape, b)) * dtype_bytes(g.value(v).type.dtype));
}

// Every pair of placed buffers whose live ranges meet occupies disjoint bytes, inside the arena.
void check_no_overlap(const Graph& g, const Planned& p, const Bindings& b) {
  REQUIRE(p.plan.offset.size() == p.live.size());
  for (const auto& [v, off] : p.plan.offset) {
    INFO("%" << g.value(v).name);
    CHECK(off % 256 == 0);
    CHECK(off + bytes_of(g, v, b) <= p.plan.arena_bytes);
    for (const auto& [w, woff] : p.plan.offset) {
      if (w <= v) continue;
      const exec::LiveRange a = p.live.at(v), c = p.live.at(w);
      if (a.last < c.first || c.last < a.first) continue;  // never live together
      INFO("and %" << g.value(w).name);
      CHECK((off + bytes_of(g, v, b) <= woff || woff + bytes_of(g, w, b) <= off));
    }
  }
}

}  // namespace

TEST_CASE("arena layouts of the Llama layers never overlap live buffers", "[exec]") {
  for (bool fuse : {true, false}) {
    Bindings pre;
    pre.set("T", 4096);
    const Graph prefill = llama_prefill(LlamaConfig::llama3_8b());
    check_no_overlap(prefill, plan(prefill, fuse, pre), pre);
    Bindings dec;
    dec.set("B", 32);
    dec.set("C", 4096);
    const Graph decode = llama_decode(LlamaConfig::llama3_8b());
    check_no_overlap(decode, plan(decode, fuse, dec), dec);
  }
}

TEST_CASE("buffers behind graph outputs live to the end of the run", "[exec]") {
  Bindings b;
  b.set("T", 33);
  const Graph g = llama_prefill(LlamaConfig::small());
  const Planned p = plan(g, true, b);
  for (ValueId o : g.outputs()) {
    const ValueId buf = p.layouts[static_cast<size_t>(o)].buffer;
    INFO("%" << g.value(o).name << " in %" << g.value(buf).name);
    if (buf == o || p.live.count(buf)) {
      REQUIRE(p.live.count(buf));
      CHECK(p.live.at(buf).last == p.kernels.size());
    }
  }
}

TEST_CASE("reuse: the fused prefill plan's arena is far below the unfused one's and below no reuse", "[exec]") {
  Bindings b;
  b.set("T", 4096);
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const Planned fused = plan(g, true, b), unfused = plan(g, false, b);
  INFO("fused " << fused.plan.arena_bytes << ", unfused " << unfused.plan.arena_bytes << ", unfused without reuse "
                << unfused.plan.unshared_bytes);
  CHECK(unfused.plan.arena_bytes < unfused.plan.unshared_bytes);
  CHECK(fused.plan.arena_bytes <= fused.plan.unshared_bytes);
  // Measured layout (docs/perf.md): 232 MiB fused, 592 MiB unfused, 762 MiB without reuse.
  CHECK(fused.plan.arena_bytes == 232u << 20);
  CHECK(unfused.plan.arena_bytes == 592u << 20);
}

TEST_CASE("the footprint adds up weights, inputs, bound outputs, the arena and scratch", "[exec]") {
  Bindings b;
  b.set("B", 3);
  b.set("C", 100);
  const Graph g = llama_decode(LlamaConfig::small());
  const Planned p = plan(g, true, b);
  size_t weights = 0, inputs = 0;
  for (ValueId v : g.inputs()) (g.value(v).is_param ? weights : inputs) += bytes_of(g, v, b);
  const exec::Footprint f = exec::plan_footprint(g, p.layouts, p.kernels, {}, b);
  CHECK(f.weights == weights);
  CHECK(f.inputs == inputs);
  CHECK(f.outputs == 0);  // %out in the arena, the caches are inputs updated in place
  CHECK(f.arena == p.plan.arena_bytes);
  CHECK(f.scratch > 0);  // the split-KV decode attention's partials and counters
  CHECK(f.total() == weights + inputs + f.arena + f.scratch);
  // Binding %out moves it from the arena to the caller's own buffer.
  const ValueId out = g.outputs()[0];
  const exec::Footprint bound = exec::plan_footprint(g, p.layouts, p.kernels, {out}, b);
  CHECK(bound.outputs == bytes_of(g, out, b));
  CHECK(bound.arena <= f.arena);
  CHECK(exec::plan_memory(g, p.layouts, p.kernels, {out}, b).offset.count(out) == 0);
  CHECK(p.plan.offset.count(out) == 1);
}
