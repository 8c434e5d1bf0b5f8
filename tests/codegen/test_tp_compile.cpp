// Tensor parallelism, compile tier: every kernel of the Llama-3-8B layer's rank graphs (the sharding
// pass's, docs/tp.md) at tp = 2 and 4, prefill and decode, and of the INT4, FP8 and W8A8 layers'
// decode rank graphs at tp = 2, is generated for the rank's shapes and compiles for sm_90a without
// spills; each all_reduce is a group with no kernel (NCCL runs it).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "codegen/kernel.h"
#include "jit/compile_kernels.h"
#include "jit/compile_plan.h"
#include "layerjit/llama.h"
#include "layerjit/shard.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"

using namespace lj;

TEST_CASE("every rank's kernels of the sharded 8B layers compile for sm_90a without spills (tp = 2 and 4, the quantized ones at 2)", "[codegen][shard]") {
  auto target = rt::Target::parse("sm_90a");
  REQUIRE(target.ok());
  int compiled = 0, reduces = 0;
  auto check_graph = [&](const Graph& rg, int tp, bool decode) {
    FusionOptions fo;
    if (decode)
      fo.sizes.set("B", 1), fo.sizes.set("C", 4096);
    else
      fo.sizes.set("T", 4096);
    const Lowered l = lower(rg, fo);
    for (const FusionGroup& grp : l.plan.groups) {
      if (grp.kind == GroupKind::AllReduce) {
        ++reduces;
        CHECK_FALSE(has_emitter(grp.kind));
        CHECK_THROWS_WITH(emit_group(*l.graph, grp, EmitOptions{}), Catch::Contains("NCCL runs it"));
        continue;
      }
      EmitOptions eo;
      eo.sm = 90, eo.arch_specific = true;
      eo.hint = fo.sizes;
      const GeneratedKernel k = emit_group(*l.graph, grp, eo);
      auto r = jit::kernel_resources(k, *target);
      INFO("tp = " << tp << ", " << k.name << " (" << k.config << "): " << (r.ok() ? r->str() : r.message()));
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      CHECK(!r->spills());
      ++compiled;
    }
  };
  for (int tp : {2, 4})
    for (bool decode : {false, true}) {
      const LlamaConfig c = LlamaConfig::llama3_8b();
      const ShardedGraph s = shard(decode ? llama_decode(c) : llama_prefill(c), tp);
      check_graph(s.graph, tp, decode);
      // The other ranks' graph differs only where rank 0 adds the residuals: checked once.
      if (tp == 2 && decode) check_graph(s.others, tp, decode);
    }
  CHECK(reduces == 10);  // two per rank graph: after o and after down
  CHECK(compiled >= 4 * 5);
  // The quantized layers' decode rank graphs at tp = 2: 4-bit codes, fp8 and W8A8 (rank-local
  // activation scales, the all_reduce after the per-channel scale and cast).
  for (const char* name : {"int4", "fp8", "w8a8"}) {
    const Module m = parse_file(fmt::format("{}/examples/llama3_8b_{}.lj", LAYERJIT_SOURCE_DIR, name));
    for (const Graph& g : m.graphs)
      if (g.name().ends_with("_decode")) check_graph(shard(g, 2).graph, 2, true);
  }
  CHECK(reduces == 16);
}

TEST_CASE("compile_plan keeps each all_reduce apart as an NCCL call: its send and receive buffers, no source", "[codegen][shard]") {
  const ShardedGraph s = shard(llama_decode(LlamaConfig::llama3_8b()), 2);
  Bindings b;
  b.set("B", 1), b.set("C", 4096);
  const Lowered l = jit::plan(s.graph, {}, b);
  auto t = jit::JitTarget::of_arch("sm_90a");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = b;
  o.compile = false;
  auto cp = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(cp.ok());
  REQUIRE(cp->collectives.size() == 2);
  CHECK(cp->groups.size() + 2 == l.plan.groups.size());
  for (const jit::CompiledGroup& cg : cp->groups) CHECK(cg.kernel.name.find("all_reduce") == std::string::npos);
  for (const GeneratedKernel& k : cp->collectives) {
    INFO(k.name);
    CHECK(k.name.ends_with("_all_reduce"));
    CHECK(k.source.empty());
    REQUIRE(k.params.size() >= 2);
    CHECK((k.params[0].read && !k.params[0].written));
    CHECK((k.params[1].written && !k.params[1].read));
    CHECK(k.params[0].dtype == DType::BF16);
    CHECK(l.graph->value(k.params[1].buffer).name == (&k == &cp->collectives[0] ? "h1" : "out"));  // the residual sums (folded)
  }
}
