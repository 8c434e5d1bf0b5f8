// Tensor parallelism, compile tier: every kernel of the Llama-3-8B layer's rank graph (the sharding
// pass's, docs/tp.md) at tp = 2 and 4, prefill and decode, is generated for the rank's shapes and
// compiles for sm_90a without spills; each all_reduce is a group with no kernel (NCCL runs it).
#include <catch2/catch.hpp>

#include "codegen/kernel.h"
#include "jit/compile_kernels.h"
#include "layerjit/llama.h"
#include "layerjit/shard.h"
#include "runtime/nvrtc.h"

using namespace lj;

TEST_CASE("every rank's kernels of the sharded 8B layer compile for sm_90a without spills (tp = 2, 4)", "[codegen][shard]") {
  auto target = rt::Target::parse("sm_90a");
  REQUIRE(target.ok());
  int compiled = 0, reduces = 0;
  for (int tp : {2, 4})
    for (bool decode : {false, true}) {
      const LlamaConfig c = LlamaConfig::llama3_8b();
      const ShardedGraph s = shard(decode ? llama_decode(c) : llama_prefill(c), tp);
      FusionOptions fo;
      if (decode)
        fo.sizes.set("B", 1), fo.sizes.set("C", 4096);
      else
        fo.sizes.set("T", 4096);
      const Lowered l = lower(s.graph, fo);
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
        CHECK(!r->spills());
        ++compiled;
      }
    }
  CHECK(reduces == 8);  // two per layer: after o and after down
  CHECK(compiled >= 4 * 5);
}
