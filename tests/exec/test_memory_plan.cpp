// The arena layout of whole plans, on the CPU (kernels are generated, never run): no two buffers that
// are live at the same kernel share a byte, graph outputs survive the run, and reuse makes the fused
// Llama-3-8B prefill plan need far less than the unfused one: at most a third, once the returned %v
// is copied out of the QKV projection instead of pinning all of it to the end of the run.
#include <catch2/catch.hpp>

#include "exec/memory_plan.h"
#include "layerjit/llama.h"

using namespace lj;

namespace {

struct Planned {
  FusionPlan fusion;
  std::vector<TensorLayout> layouts;
  std::vector<GeneratedKernel> kernels;
  exec::MemoryPlan plan;
  std::map<ValueId, exec::LiveRange> live;
};

// What exec::Executable::build plans, without a GPU: the fusion plan, its layouts (plan_layouts: a
// copied returned view in its own buffer), every kernel, the arena.
Planned plan(const Graph& g, const FusionOptions& fo, const Bindings& b) {
  Planned p;
  p.fusion = plan_fusion(g, fo);
  p.layouts = plan_layouts(g, p.fusion);
  EmitOptions eo;
  eo.hint = b;
  for (const FusionGroup& grp : p.fusion.groups) p.kernels.push_back(emit_group(g, grp, eo));
  p.plan = exec::plan_memory(g, p.layouts, p.kernels, {}, b);
  p.live = exec::live_ranges(g, p.layouts, p.kernels, {});
  return p;
}
Planned plan(const Graph& g, bool fuse, const Bindings& b) { return plan(g, FusionOptions{fuse}, b); }

// The copy of the returned %v is made by the RoPE kernel when the matmuls are planned alone (fused,
// the QKV projection stores %v in a buffer of its own and %qkv never exists).
FusionOptions with_copies() {
  FusionOptions fo;
  fo.matmul_epilogues = false;
  return fo;
}

FusionOptions without_copies() {
  FusionOptions fo = with_copies();
  fo.copy_output_views = false;
  return fo;
}

ValueId value_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].name == name) return static_cast<ValueId>(i);
  FAIL("no value %" << name);
  return -1;
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
  for (const FusionOptions& fo : {FusionOptions{true}, FusionOptions{false}, without_copies()}) {
    Bindings pre;
    pre.set("T", 4096);
    const Graph prefill = llama_prefill(LlamaConfig::llama3_8b());
    check_no_overlap(prefill, plan(prefill, fo, pre), pre);
    Bindings dec;
    dec.set("B", 32);
    dec.set("C", 4096);
    const Graph decode = llama_decode(LlamaConfig::llama3_8b());
    check_no_overlap(decode, plan(decode, fo, dec), dec);
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
  // The layout at T=4096: 194 MiB fused (192 MiB with the RoPE kernel, which kept the 2 MiB of cos/sin
  // tables on chip; 232 MiB while the returned %v pinned %qkv, the number in docs/perf.md), 592 MiB
  // unfused, 762 MiB without reuse.
  CHECK(fused.plan.arena_bytes == 194u << 20);
  CHECK(unfused.plan.arena_bytes == 592u << 20);
}

TEST_CASE("the fused 8B prefill plan's arena at T=4096 is at most a third of the unfused plan's", "[exec]") {
  Bindings b;
  b.set("T", 4096);
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const Planned fused = plan(g, true, b), unfused = plan(g, false, b), copied = plan(g, with_copies(), b),
                pinned = plan(g, without_copies(), b);
  INFO("fused " << (fused.plan.arena_bytes >> 20) << " MiB, unfused " << (unfused.plan.arena_bytes >> 20)
                << " MiB, matmuls alone " << (copied.plan.arena_bytes >> 20) << " MiB, and without the copy of %v "
                << (pinned.plan.arena_bytes >> 20) << " MiB");
  CHECK(3 * fused.plan.arena_bytes <= unfused.plan.arena_bytes);
  // %v in a buffer of its own is what gets it there: with %v a view, %qkv is pinned to the end and
  // the plan misses.
  CHECK(3 * pinned.plan.arena_bytes > unfused.plan.arena_bytes);
  CHECK(copied.plan.arena_bytes < pinned.plan.arena_bytes);
  CHECK(fused.plan.arena_bytes < pinned.plan.arena_bytes);
}

TEST_CASE("a copied returned view frees the buffer it was sliced from after its last reader", "[exec]") {
  Bindings b;
  b.set("T", 4096);
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const ValueId qkv = value_named(g, "qkv"), v = value_named(g, "v");
  const Planned fused = plan(g, with_copies(), b), pinned = plan(g, without_copies(), b);
  // Without the copy, %v is %qkv's memory and the whole projection lives to the end of the run.
  CHECK(pinned.layouts[static_cast<size_t>(v)].buffer == qkv);
  CHECK(pinned.live.at(qkv).last == pinned.kernels.size());
  CHECK(pinned.live.count(v) == 0);
  // With it, %v is a buffer of its own, written by the RoPE kernel and kept to the end; %qkv dies
  // after attention, its last reader, long before the MLP where the arena peaks.
  REQUIRE(fused.fusion.output_views.size() == 1);
  const int rope = fused.fusion.output_views[0].copied_by;
  REQUIRE(rope >= 0);
  CHECK(fused.layouts[static_cast<size_t>(v)].buffer == v);
  REQUIRE(fused.live.count(v) == 1);
  CHECK(fused.live.at(v).first == static_cast<size_t>(rope));
  CHECK(fused.live.at(v).last == fused.kernels.size());
  size_t attention = 0;
  for (const FusionGroup& grp : fused.fusion.groups)
    if (grp.kind == GroupKind::Attention) attention = static_cast<size_t>(grp.id);
  CHECK(fused.live.at(qkv).last == attention);
  // The MLP's gate/up projection, where the arena peaks, no longer has %qkv live.
  size_t gate_up = 0;
  for (const FusionGroup& grp : fused.fusion.groups)
    for (ValueId o : grp.outputs)
      if (g.value(o).name == "act") gate_up = static_cast<size_t>(grp.id);
  CHECK(fused.live.at(qkv).last < gate_up);
  CHECK(pinned.live.at(qkv).last > gate_up);
}

TEST_CASE("copies of returned views leave the decode plan's arena as it was", "[exec]") {
  const Graph g = llama_decode(LlamaConfig::llama3_8b());
  for (int64_t batch : {1, 32}) {
    Bindings b;
    b.set("B", batch);
    b.set("C", 4096);
    const Planned with = plan(g, true, b), without = plan(g, without_copies(), b);
    INFO("B=" << batch << ": " << with.plan.arena_bytes << " bytes with copies, " << without.plan.arena_bytes << " without");
    CHECK(with.fusion.output_views.empty());  // it returns %out and the caches written in place: no views
    CHECK(with.plan.arena_bytes <= without.plan.arena_bytes);
    CHECK(with.plan.arena_bytes <= plan(g, false, b).plan.arena_bytes);
  }
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
