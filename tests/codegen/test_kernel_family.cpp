// The kernel-family interface: every group the planner forms for the Llama layers has a family
// that accepts it, emits it with the default config and answers for its candidates before any is
// emitted; a config's text round-trips through its family; and a refusal is the same text whether
// reject_reason gives it or emit throws it.
#include <catch2/catch.hpp>

#include <unordered_set>

#include "codegen/kernel_family.h"
#include "compiler/fusion/fusion_group.h"
#include "layerjit/error.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

using namespace lj;

namespace {

EmitOptions target(const char* sym, int64_t value, bool hopper) {
  EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = hopper;
  eo.hint.set(sym, value);
  if (std::string(sym) == "B") eo.hint.set("C", 4096);
  return eo;
}

// emit's UserError text, or "" if it emits.
std::string emit_error(const KernelFamily& f, const Graph& g, const FusionGroup& grp, const EmitOptions& eo) {
  try {
    f.emit(g, grp, eo);
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("families: every Llama group is accepted, emitted with its default, and its candidates pass reject_reason", "[codegen][family]") {
  const LlamaConfig cfg = LlamaConfig::llama3_8b();
  struct Case {
    Graph g;
    const char* sym;
    int64_t value;
  };
  const Case cases[] = {{llama_prefill(cfg), "T", 4096}, {llama_decode(cfg), "B", 1}, {llama_decode(cfg), "B", 32}};
  for (const Case& c : cases)
    for (bool hopper : {false, true}) {
      const EmitOptions eo = target(c.sym, c.value, hopper);
      FusionOptions fo;
      fo.sizes = eo.hint;  // as jit::plan does: B = 1 gets the one-row prologues
      const Lowered l = lower(c.g, fo);
      for (const FusionGroup& grp : l.plan.groups) {
        INFO(c.g.name() << " " << c.sym << "=" << c.value << (hopper ? " sm_90a" : " sm_90") << " group " << grp.id);
        const KernelFamily* f = kernel_family(grp.kind);
        REQUIRE(f != nullptr);
        CHECK(f->kind() == grp.kind);
        CHECK(f->name() == group_kind_name(grp.kind));
        CHECK(f->reject_reason(*l.graph, grp, eo).empty());
        const GeneratedKernel k = f->emit(*l.graph, grp, eo);
        CHECK(k.group == grp.id);
        std::vector<std::string> pruned;
        const std::vector<KernelConfig> cands = f->candidates(*l.graph, grp, eo, &pruned);
        CHECK(f->tunable() == !cands.empty());
        if (!f->tunable()) {
          CHECK(k.config.empty());
          continue;
        }
        CHECK(cands.front().str() == k.config);  // the default first
        std::unordered_set<KernelConfig> seen;
        for (const KernelConfig& kc : cands) {
          INFO(kc.str());
          CHECK(seen.insert(kc).second);  // each once
          EmitOptions ceo = eo;
          kc.apply(ceo);
          CHECK(f->reject_reason(*l.graph, grp, ceo).empty());
        }
        // What the list leaves out, the family refuses, by the reason it gives.
        for (const std::string& p : pruned) {
          INFO(p);
          const size_t colon = p.find(": ");
          REQUIRE(colon != std::string::npos);
          std::string error;
          const std::optional<KernelConfig> kc = f->parse_config(p.substr(0, colon), &error);
          REQUIRE(kc.has_value());
          CHECK(seen.count(*kc) == 0);
        }
      }
    }
}

TEST_CASE("families: configs round-trip through their family's parser, typed, equal and hashed alike", "[codegen][family]") {
  const KernelFamily& mm = *kernel_family(GroupKind::Matmul);
  const KernelFamily& at = *kernel_family(GroupKind::Attention);
  std::string error;
  for (const char* text : {"wgmma bm=128 bn=256 stages=4 gm=8 persistent", "mma bm=64 bn=64 bk=32 wm=2 wn=2 stages=3 gm=8 sk=4",
                           "gemv mt=4 u=4 warps=8", "gemv mma u=4 warps=8"}) {
    INFO(text);
    const std::optional<KernelConfig> c = mm.parse_config(text, &error);
    REQUIRE(c.has_value());
    REQUIRE(c->matmul() != nullptr);
    CHECK(c->attention() == nullptr);
    CHECK(c->str() == text);
    const std::optional<KernelConfig> again = mm.parse_config(c->str(), &error);
    REQUIRE(again.has_value());
    CHECK(*again == *c);
    CHECK(again->hash() == c->hash());
    EmitOptions eo;
    c->apply(eo);
    REQUIRE(eo.matmul.has_value());
    CHECK(eo.matmul->str() == text);
    CHECK(!eo.attention.has_value());
  }
  for (const char* text : {"128x2x64x2", "wgmma bn=128 stages=2", "decode bn=16 warps=4 stages=3 chunk=512"}) {
    INFO(text);
    const std::optional<KernelConfig> c = at.parse_config(text, &error);
    REQUIRE(c.has_value());
    REQUIRE(c->attention() != nullptr);
    CHECK(c->str() == text);
    EmitOptions eo;
    eo.matmul = MatmulConfig{};
    c->apply(eo);
    CHECK(!eo.matmul.has_value());
    REQUIRE(eo.attention.has_value());
    CHECK(eo.attention->str() == text);
    // Another family's text ("wgmma bn=N stages=S" is a matmul config's too, its other fields defaulted).
    if (!c->attention()->wgmma) CHECK(!mm.parse_config(text, &error).has_value());
  }
  CHECK(!(*mm.parse_config("gemv mt=4 u=4 warps=8", &error) == *mm.parse_config("gemv mt=2 u=4 warps=8", &error)));
  CHECK(KernelConfig().empty());
  CHECK(KernelConfig().str().empty());
  const KernelFamily& rr = *kernel_family(GroupKind::RowReduce);
  CHECK(!rr.tunable());
  CHECK(!rr.parse_config("gemv mt=4 u=4 warps=8", &error).has_value());
  CHECK_THAT(error, Catch::Contains("row_reduce groups have no configs"));
  CHECK(kernel_family(GroupKind::Reduce) == nullptr);
  CHECK(kernel_family(GroupKind::Copy) == nullptr);
}

TEST_CASE("families: reject_reason gives the text emit throws, before anything is emitted", "[codegen][family]") {
  const Module m = parse_module(R"(
graph @cols(%x: f32[T, 96]) {
  %p = softmax(%x) {axis = 0}
  return %p
}
graph @proj(%x: bf16[T, 4096], %w: param bf16[1000, 4096]) {
  %y = matmul(%x, %w)
  return %y
}
)");
  {
    const Graph& g = *m.find("cols");
    const FusionPlan plan = plan_fusion(g);
    const FusionGroup& grp = plan.groups.at(0);
    const KernelFamily& f = *kernel_family(grp.kind);
    const std::string why = f.reject_reason(g, grp, EmitOptions{});
    CHECK_THAT(why, Catch::Contains("the row kernel reduces the last axis only"));
    CHECK(emit_error(f, g, grp, EmitOptions{}) == why);
  }
  {
    const Graph& g = *m.find("proj");
    const FusionPlan plan = plan_fusion(g);
    const FusionGroup& grp = plan.groups.at(0);
    const KernelFamily& f = *kernel_family(grp.kind);
    EmitOptions eo = target("T", 4096, false);
    CHECK(f.reject_reason(g, grp, eo).empty());
    std::string error;
    f.parse_config("wgmma bm=128 bn=256 stages=4 gm=8", &error)->apply(eo);  // not on sm_90
    const std::string why = f.reject_reason(g, grp, eo);
    CHECK_THAT(why, Catch::Contains("cannot run this matmul"));
    CHECK(emit_error(f, g, grp, eo) == why);
  }
}
