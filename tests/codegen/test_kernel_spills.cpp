// Register spills are a performance bug no output check sees: every generated kernel of the Llama
// layers is compiled with ptxas's report and must not spill, with one known exception (below).
#include <catch2/catch.hpp>

#include <tuple>

#include "codegen/kernel.h"
#include "layerjit/llama.h"
#include "runtime/kernel_resources.h"

using namespace lj;

TEST_CASE("the Llama layers' kernels compile for sm_80, sm_90 and sm_90a without spilling registers", "[codegen]") {
  for (const auto& [g, sym, value] : {std::tuple{llama_prefill(LlamaConfig::llama3_8b()), "T", 4096},
                                      std::tuple{llama_decode(LlamaConfig::llama3_8b()), "B", 1}})
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      auto target = rt::Target::parse(arch);
      REQUIRE(target.ok());
      EmitOptions eo;
      eo.sm = target->sm;
      eo.arch_specific = target->arch_specific;
      eo.hint.set(sym, value);
      eo.hint.set("C", 4096);
      eo.max_shared_bytes = target->sm == 80 ? 163 * 1024 : 227 * 1024;
      for (const FusionGroup& grp : plan_fusion(g).groups) {
        const GeneratedKernel k = emit_group(g, grp, eo);
        auto r = rt::kernel_resources(k, *target);
        INFO(k.name << " (" << k.config << ") for " << arch << ": " << (r.ok() ? r->str() : r.message()));
        REQUIRE(r.ok());
        // Known: the mma.sync prefill attention (two 16-row m-tiles per warp) sits at the 255-register
        // limit and spills under 128 bytes (docs/perf.md, Attention); sm_90a runs the wgmma kernel.
        const bool known = grp.kind == GroupKind::Attention && !k.arch_specific && g.name() == "llama3_8b_prefill";
        if (known) {
          CHECK(r->spill_store_bytes + r->spill_load_bytes <= 256);
        } else {
          CHECK(!r->spills());
        }
      }
    }
}
