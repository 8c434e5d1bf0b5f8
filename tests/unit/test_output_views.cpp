// Returned views of larger buffers (compiler/fusion/output_views.cpp): which get copied into buffers
// of their own, by which group, and why the others stay views; the predicates behind the decisions.
#include <algorithm>

#include <catch2/catch.hpp>

#include "compiler/fusion/fusion_group.h"
#include "compiler/fusion/legality.h"
#include "compiler/fusion/tensor_layout.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

using namespace lj;

namespace {

Graph parse_one(const char* text) { return std::move(parse_module(text, "<test>").graphs.at(0)); }

ValueId value_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].name == name) return static_cast<ValueId>(i);
  FAIL("no value %" << name);
  return -1;
}

bool contains(const std::vector<ValueId>& xs, ValueId v) { return std::find(xs.begin(), xs.end(), v) != xs.end(); }

// A QKV-like projection whose RoPE kernel reads q out of %y; the graph returns views of %y (and
// whatever `extra` adds to the return list).
std::string rope_graph(const std::string& returns, const std::string& extra_ops = "") {
  return "graph @g(%x: bf16[T, 64], %w: param bf16[448, 64], %pos: i32[T]) {\n"
         "  %y = matmul(%x, %w)\n"
         "  %q, %v, %r = split(%y) {axis = 1, sizes = [256, 128, 64]}\n"
         "  %q3 = reshape(%q) {shape = [T, 4, 64]}\n"
         "  %v3 = reshape(%v) {shape = [T, 2, 64]}\n"
         "  %c, %s = rope_table(%pos) {dim = 64}\n"
         "  %qr = rope(%q3, %c, %s) {style = \"half\"}\n" +
         extra_ops + "  return %qr, " + returns + "\n}\n";
}

const OutputView& view_of(const FusionPlan& p, const Graph& g, const std::string& name) {
  for (const OutputView& ov : p.output_views)
    if (ov.value == value_named(g, name)) return ov;
  FAIL("%" << name << " is not among the returned views");
  return p.output_views.front();
}

}  // namespace

TEST_CASE("the prefill layer's returned %v is stored by the QKV projection in a buffer of its own", "[fusion][output_views]") {
  // RoPE in the projection's epilogue: %qkv never reaches memory, so %v cannot stay a view of it.
  for (const LlamaConfig& c : {LlamaConfig::llama3_8b(), LlamaConfig::small()}) {
    const Graph g = llama_prefill(c);
    const FusionPlan p = plan_fusion(g);
    const ValueId v = value_named(g, "v");
    CHECK(p.dense_views == std::vector<ValueId>{v});
    REQUIRE(p.output_views.size() == 1);
    const OutputView& ov = p.output_views[0];
    CHECK(ov.value == v);
    CHECK(ov.buffer == v);
    CHECK(ov.copied_by == -1);
    CHECK_THAT(ov.why, Catch::StartsWith("%v has a buffer of its own, stored by group 2 (matmul)"));
    for (const FusionGroup& grp : p.groups) {
      CHECK(grp.copies.empty());
      if (grp.kind == GroupKind::Matmul && contains(grp.outputs, v)) CHECK(contains(grp.internal, value_named(g, "qkv")));
      if (grp.kind == GroupKind::Attention) CHECK(contains(grp.inputs, v));
    }
  }
}

TEST_CASE("without matmul epilogues the prefill layer's returned %v is copied out of %qkv by the RoPE kernel",
          "[fusion][output_views]") {
  FusionOptions no_epilogues;
  no_epilogues.matmul_epilogues = false;
  for (const LlamaConfig& c : {LlamaConfig::llama3_8b(), LlamaConfig::small()}) {
    const Graph g = llama_prefill(c);
    const FusionPlan p = plan_fusion(g, no_epilogues);
    const ValueId v = value_named(g, "v"), qkv = value_named(g, "qkv");
    REQUIRE(p.output_views.size() == 1);
    const OutputView& ov = p.output_views[0];
    CHECK(ov.value == v);
    CHECK(ov.buffer == qkv);
    REQUIRE(ov.copied_by >= 0);
    const FusionGroup& grp = p.groups[static_cast<size_t>(ov.copied_by)];
    CHECK(grp.kind == GroupKind::RopeKvWrite);
    CHECK(grp.copies == std::vector<ValueId>{v});
    CHECK(contains(grp.inputs, v));         // read in place, in %qkv
    CHECK_FALSE(contains(grp.outputs, v));  // no node of the group makes it
    CHECK_THAT(grp.why.back(), Catch::StartsWith("copies %v (a returned view"));
    // Only the RoPE group copies; the attention kernel still reads %v where the projection left it.
    for (const FusionGroup& other : p.groups) {
      if (other.id != grp.id) CHECK(other.copies.empty());
      if (other.kind == GroupKind::Attention) CHECK(contains(other.inputs, v));
    }
  }
}

TEST_CASE("decode plans return no views: nothing to copy", "[fusion][output_views]") {
  // The decode layer returns %out and the caches (in-place writes, not views): no entry at all.
  for (const LlamaConfig& c : {LlamaConfig::llama3_8b(), LlamaConfig::small()}) {
    const FusionPlan p = plan_fusion(llama_decode(c));
    CHECK(p.output_views.empty());
    for (const FusionGroup& grp : p.groups) CHECK(grp.copies.empty());
  }
}

TEST_CASE("returned views that stay views say why", "[fusion][output_views]") {
  SECTION("a view of a graph input is the caller's memory") {
    const Graph g = parse_one(
        "graph @g(%x: bf16[T, 8]) {\n  %a, %b = split(%x) {axis = 1, sizes = [4, 4]}\n  return %a\n}\n");
    const FusionPlan p = plan_fusion(g);
    REQUIRE(p.output_views.size() == 1);
    CHECK(p.output_views[0].copied_by == -1);
    CHECK(p.output_views[0].why == "stays a view of graph input %x: the caller's memory, which a copy would not free");
  }
  SECTION("a view of a KV cache written in place is the caller's cache") {
    const Graph g = parse_one(
        "graph @g(%kc: bf16[B, 9, 2, 64], %k: bf16[B, 2, 64], %pos: i32[B]) {\n"
        "  %kn = kv_cache_write(%kc, %k, %pos)\n  %flat = reshape(%kn) {shape = [B, 1152]}\n  return %flat\n}\n");
    const FusionPlan p = plan_fusion(g);
    REQUIRE(p.output_views.size() == 1);
    CHECK(p.output_views[0].buffer == value_named(g, "kc"));
    CHECK_THAT(p.output_views[0].why, Catch::StartsWith("stays a view of graph input %kc"));
  }
  SECTION("the buffer is returned too") {
    const Graph g = parse_one(rope_graph("%v3, %y").c_str());
    const FusionPlan p = plan_fusion(g);
    const OutputView& ov = view_of(p, g, "v3");
    CHECK(ov.copied_by == -1);
    CHECK(ov.why == "stays a view of %y: %y is returned too, so its buffer lives to the end of the run anyway");
  }
  SECTION("a view that is all of its buffer frees nothing") {
    const Graph g = parse_one(rope_graph("%whole", "  %whole = reshape(%y) {shape = [T, 7, 64]}\n").c_str());
    const FusionPlan p = plan_fusion(g);
    const OutputView& ov = view_of(p, g, "whole");
    CHECK(ov.copied_by == -1);
    CHECK(ov.why == "stays a view of %y: it is all of %y (448*T elements), so a copy would free nothing");
  }
  SECTION("no kernel that copies rows reads the buffer") {
    const Graph g = parse_one(
        "graph @g(%x: bf16[T, 64], %w: param bf16[128, 64]) {\n  %y = matmul(%x, %w)\n"
        "  %a, %b = split(%y) {axis = 1, sizes = [64, 64]}\n  %e = exp(%a)\n  return %e, %b\n}\n");
    const FusionPlan p = plan_fusion(g);
    REQUIRE(p.output_views.size() == 1);
    CHECK(p.output_views[0].copied_by == -1);
    CHECK(p.output_views[0].why ==
          "stays a view of %y: no kernel that copies rows (rope_kv_write) reads %y; %y lives to the end of the run");
  }
  SECTION("the RoPE kernel reads the buffer but cannot copy a rank-4 view") {
    const Graph g = parse_one(rope_graph("%v4", "  %v4 = reshape(%v) {shape = [T, 2, 2, 32]}\n").c_str());
    const FusionPlan p = plan_fusion(g);
    const OutputView& ov = view_of(p, g, "v4");
    CHECK(ov.copied_by == -1);
    CHECK(ov.why == "stays a view of %y: group 1 (rope_kv_write) reads %y but copies only [rows, H, D] or [rows, D] views "
                    "over its T rows with constant trailing dims, and %v4 is bf16[T, 2, 2, 32]; %y lives to the end of the run");
  }
  SECTION("--no-fuse adds no copy kernels") {
    const Graph g = parse_one(rope_graph("%v3").c_str());
    const FusionPlan p = plan_fusion(g, FusionOptions{false});
    CHECK(view_of(p, g, "v3").why == "stays a view of %y: --no-fuse adds no copies; %y lives to the end of the run");
    for (const FusionGroup& grp : p.groups) CHECK(grp.copies.empty());
  }
  SECTION("copies switched off") {
    const Graph g = parse_one(rope_graph("%v3").c_str());
    FusionOptions fo;
    fo.copy_output_views = false;
    const FusionPlan p = plan_fusion(g, fo);
    CHECK(view_of(p, g, "v3").why == "stays a view of %y: copies of returned views are off; %y lives to the end of the run");
    for (const FusionGroup& grp : p.groups) CHECK(grp.copies.empty());
  }
}

TEST_CASE("returned views of one buffer: each copied once, in output order", "[fusion][output_views]") {
  // %v3 twice in the return list, and the [T, 64] slice %r (a rank-2 copy).
  const Graph g = parse_one(rope_graph("%v3, %r, %v3").c_str());
  const FusionPlan p = plan_fusion(g);
  REQUIRE(p.output_views.size() == 2);
  CHECK(p.output_views[0].value == value_named(g, "v3"));
  CHECK(p.output_views[1].value == value_named(g, "r"));
  REQUIRE(p.output_views[0].copied_by == 1);
  CHECK(p.output_views[1].copied_by == 1);
  CHECK(p.groups[1].copies == std::vector<ValueId>{value_named(g, "v3"), value_named(g, "r")});
  CHECK(print_plan(g, p, {}) == print_plan(g, plan_fusion(g), {}));  // deterministic
}

TEST_CASE("memory_owner and smaller_at_every_size follow the layout rules", "[fusion][output_views]") {
  const Graph g = llama_decode(LlamaConfig::small());
  CHECK(memory_owner(g, value_named(g, "v")) == value_named(g, "qkv"));
  CHECK(memory_owner(g, value_named(g, "k_cache_new")) == value_named(g, "k_cache"));  // written in place
  CHECK(memory_owner(g, value_named(g, "qkv")) == value_named(g, "qkv"));
  CHECK(smaller_at_every_size(g, value_named(g, "v"), value_named(g, "qkv")));
  CHECK_FALSE(smaller_at_every_size(g, value_named(g, "qkv"), value_named(g, "qkv")));
  CHECK_FALSE(smaller_at_every_size(g, value_named(g, "qkv"), value_named(g, "v")));
  // [C] is not smaller than [4, T] at every size (C may be larger): the symbols must be covered.
  const Graph h = parse_one(
      "graph @h(%a: f32[4, T], %b: f32[C]) {\n  %x = exp(%a)\n  %y = exp(%b)\n  return %x, %y\n}\n");
  CHECK_FALSE(smaller_at_every_size(h, value_named(h, "y"), value_named(h, "x")));
  CHECK(copies_rows(GroupKind::RopeKvWrite));
  CHECK_FALSE(copies_rows(GroupKind::Matmul));
  CHECK_FALSE(copies_rows(GroupKind::Attention));
}
