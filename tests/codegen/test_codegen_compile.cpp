// Every kernel generated for the Llama layers and the odd-shaped test graphs compiles with NVRTC
// for sm_80, sm_90 and sm_90a (no GPU needed), fused and unfused; the source is deterministic.
#include <catch2/catch.hpp>

#include "codegen/device_headers.h"
#include "codegen/kernel.h"
#include "runtime/nvrtc.h"
#include "tests/codegen/codegen_graphs.h"

using namespace lj;

namespace {
void compile_all(bool fuse) {
  int compiled = 0;
  for (const Graph& g : lj_test::codegen_graphs()) {
    FusionPlan plan = plan_fusion(g, FusionOptions{fuse});
    for (const FusionGroup& grp : plan.groups) {
      if (!has_emitter(grp.kind)) continue;
      GeneratedKernel k = emit_group(g, grp);
      CHECK(emit_group(g, grp).source == k.source);  // deterministic
      for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
        auto target = rt::Target::parse(arch);
        REQUIRE(target.ok());
        rt::CompileOptions opts;
        opts.program_name = k.name + ".cu";
        opts.headers = codegen_device_headers();
        auto prog = rt::compile(k.source, opts, *target);
        INFO(g.name() << " group " << grp.id << " for " << arch << ":\n" << (prog.ok() ? "" : prog.message()));
        REQUIRE(prog.ok());
        CHECK(!prog->cubin.empty());
        ++compiled;
      }
    }
  }
  CHECK(compiled > 60);
}
}  // namespace

TEST_CASE("every fused memory-bound kernel compiles for sm_80, sm_90 and sm_90a", "[codegen]") { compile_all(true); }

TEST_CASE("every unfused memory-bound kernel compiles for sm_80, sm_90 and sm_90a", "[codegen]") { compile_all(false); }

TEST_CASE("the device headers are embedded", "[codegen]") {
  const auto& h = codegen_device_headers();
  std::vector<std::string> names;
  for (const auto& [name, text] : h) {
    names.push_back(name);
    CHECK(text.find("#pragma once") != std::string::npos);
  }
  CHECK(names == std::vector<std::string>{"layerjit/math.cuh", "layerjit/reduce.cuh", "layerjit/types.cuh", "layerjit/vec.cuh"});
}

TEST_CASE("kernels without an emitter yet are reported by group", "[codegen]") {
  Graph g = llama_prefill(LlamaConfig::small());
  FusionPlan plan = plan_fusion(g);
  const FusionGroup& mm = plan.groups[1];
  REQUIRE(mm.kind == GroupKind::Matmul);
  CHECK_THROWS_WITH(emit_group(g, mm), Catch::Contains("group 1 of @llama_small_prefill is a matmul group"));
}
