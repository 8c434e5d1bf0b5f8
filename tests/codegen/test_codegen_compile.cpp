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

TEST_CASE("every fused kernel compiles for sm_80, sm_90 and sm_90a", "[codegen]") { compile_all(true); }

TEST_CASE("every unfused kernel compiles for sm_80, sm_90 and sm_90a", "[codegen]") { compile_all(false); }

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
  // Attention groups get their generator with issue 7; until then asking for one names the group.
  Graph g = llama_prefill(LlamaConfig::small());
  FusionPlan plan = plan_fusion(g);
  const FusionGroup* attn = nullptr;
  for (const FusionGroup& grp : plan.groups)
    if (grp.kind == GroupKind::Attention && !attn) attn = &grp;
  REQUIRE(attn != nullptr);
  CHECK(!has_emitter(GroupKind::Attention));
  CHECK_THROWS_WITH(emit_group(g, *attn), Catch::Contains("group " + std::to_string(attn->id) +
                                                          " of @llama_small_prefill is an attention group"));
}

TEST_CASE("matmul groups get the GEMV kernel with one warp per output column", "[codegen]") {
  Graph g = llama_decode(LlamaConfig::llama3_8b());
  FusionPlan plan = plan_fusion(g);
  int seen = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    REQUIRE(has_emitter(grp.kind));
    GeneratedKernel k = emit_group(g, grp);
    const ValueId w = g.node(grp.nodes[0]).operands[1];
    const int64_t n = g.value(w).type.shape[0].value();
    INFO(k.source);
    // grid.x = ceil(N / 8): 8 warps per CTA, each owning one column.
    CHECK(k.launch.work.constant == n);
    CHECK(k.launch.work.symbols.empty());
    CHECK(k.launch.per_block == 8);
    CHECK(k.launch.threads == 256);
    CHECK(k.source.find("constexpr int V = 8;") != std::string::npos);  // 16-byte loads of bf16
    CHECK(k.source.find("const lj_i64 M = B;") != std::string::npos);   // rows are a run-time symbol
    ++seen;
  }
  CHECK(seen == 4);  // qkv, o, gate_up, down
}
