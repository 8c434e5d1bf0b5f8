// What a copied returned view means below the planner, on the CPU: the RoPE kernel gets a written
// parameter for the view's own buffer while every reader still reads the view in place,
// plan_layouts moves only copied views, and a copy no kernel can make is a clear error. The Llama
// layer's %v is copied only with its matmuls planned alone: fused, the QKV projection's RoPE
// epilogue stores %v in a buffer of its own (a dense view) and %qkv never exists.
#include <algorithm>

#include <catch2/catch.hpp>

#include "codegen/kernel.h"
#include "compiler/fusion/tensor_layout.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "tests/unit/error_of.h"

using namespace lj;

namespace {

ValueId value_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].name == name) return static_cast<ValueId>(i);
  FAIL("no value %" << name);
  return -1;
}

const KernelParam* buffer_param_of(const GeneratedKernel& k, ValueId buffer) {
  for (const KernelParam& p : k.params)
    if (p.kind == KernelParam::Kind::Buffer && p.buffer == buffer) return &p;
  return nullptr;
}

FusionOptions matmuls_alone() {
  FusionOptions fo;
  fo.matmul_epilogues = false;
  return fo;
}

}  // namespace

TEST_CASE("the RoPE kernel stores the copy of %v, and attention still reads %v inside %qkv", "[exec][output_views]") {
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(g, matmuls_alone());
  const ValueId v = value_named(g, "v"), qkv = value_named(g, "qkv");
  EmitOptions eo;
  eo.hint.set("T", 4096);
  int checked = 0;
  for (const FusionGroup& grp : plan.groups) {
    const GeneratedKernel k = emit_group(g, grp, eo);
    INFO(k.source);
    if (grp.kind == GroupKind::RopeKvWrite) {
      const KernelParam* copy = buffer_param_of(k, v);
      REQUIRE(copy);
      CHECK(copy->name == "p_v");
      CHECK(copy->written);
      CHECK_FALSE(copy->read);
      REQUIRE(buffer_param_of(k, qkv));
      CHECK_FALSE(buffer_param_of(k, qkv)->written);
      // The rows of v: read 16 bytes at a time at column 5120 of %qkv, stored densely.
      CHECK(k.source.find("p_qkv + 5120LL + n * 6144LL + h * 128LL + i") != std::string::npos);
      CHECK(k.source.find("lj_store_raw<lj_bf16, 8>(p_v + n * 1024LL + h * 128LL + i, a2[it]);") != std::string::npos);
      ++checked;
    } else if (grp.kind == GroupKind::Attention) {
      CHECK_FALSE(buffer_param_of(k, v));  // reads %v in place: its kernel is as it was
      ++checked;
    }
  }
  CHECK(checked == 2);
}

TEST_CASE("plan_layouts gives copied returned views, and only those, a dense buffer of their own", "[exec][output_views]") {
  const Graph g = llama_prefill(LlamaConfig::small());
  const ValueId v = value_named(g, "v"), qkv = value_named(g, "qkv");
  const std::vector<TensorLayout> in_place = compute_layouts(g);
  const std::vector<TensorLayout> copied = plan_layouts(g, plan_fusion(g, matmuls_alone()));
  FusionOptions off = matmuls_alone();
  off.copy_output_views = false;
  const std::vector<TensorLayout> pinned = plan_layouts(g, plan_fusion(g, off));
  CHECK(in_place[static_cast<size_t>(v)].buffer == qkv);
  CHECK(pinned[static_cast<size_t>(v)].buffer == qkv);
  const TensorLayout& own = copied[static_cast<size_t>(v)];
  CHECK(own.buffer == v);
  CHECK(own.offset.constant == 0);
  CHECK(own.strides == dense_strides(g.value(v).type.shape));
  for (size_t i = 0; i < g.values().size(); ++i) {
    if (static_cast<ValueId>(i) == v) continue;
    CHECK(copied[i].buffer == in_place[i].buffer);
  }
  // Fused, %v is a dense view: the same buffer of its own, written by the QKV projection.
  const FusionPlan fused = plan_fusion(g);
  CHECK(fused.dense_views == std::vector<ValueId>{v});
  CHECK(plan_layouts(g, fused)[static_cast<size_t>(v)].buffer == v);
  CHECK(compute_layouts(g, fused.dense_views)[static_cast<size_t>(v)].strides == dense_strides(g.value(v).type.shape));
}

TEST_CASE("a copy the kernel cannot make is a clear error", "[exec][output_views]") {
  const Graph g = parse_module(
                      "graph @g(%x: bf16[T, 64], %w: param bf16[448, 64], %pos: i32[T]) {\n"
                      "  %y = matmul(%x, %w)\n"
                      "  %q, %v, %r = split(%y) {axis = 1, sizes = [256, 128, 64]}\n"
                      "  %q3 = reshape(%q) {shape = [T, 4, 64]}\n"
                      "  %v4 = reshape(%v) {shape = [T, 2, 2, 32]}\n"
                      "  %c, %s = rope_table(%pos) {dim = 64}\n"
                      "  %qr = rope(%q3, %c, %s) {style = \"half\"}\n"
                      "  return %qr, %v4\n}\n",
                      "<test>")
                      .graphs.at(0);
  const FusionPlan plan = plan_fusion(g);  // the planner leaves %v4 a view (rank 4)
  REQUIRE(plan.groups.size() == 2);
  FusionGroup rope = plan.groups[1];
  REQUIRE(rope.kind == GroupKind::RopeKvWrite);
  REQUIRE(rope.copies.empty());
  const ValueId v4 = value_named(g, "v4");
  rope.copies.push_back(v4);
  rope.inputs.push_back(v4);
  CHECK(lj_test::error_of([&] { emit_group(g, rope); }) ==
        "lj_g_g1_rope_kv_write: the kernel copies [N, H, D] or [N, D] views with constant trailing dims "
        "over its T rows; %v4 is bf16[T, 2, 2, 32]");
  // Only rope_kv_write kernels store copies: a copy listed anywhere else is a planner bug.
  FusionGroup mm = plan.groups[0];
  mm.copies.push_back(v4);
  CHECK_THROWS_AS(emit_group(g, mm), InternalError);
}
