// Fusion planner invariants: coverage, determinism, the unfused baseline, group boundaries.
#include <algorithm>

#include <catch2/catch.hpp>

#include <functional>

#include <fmt/format.h>

#include "compiler/fusion/fusion_group.h"
#include "compiler/fusion/legality.h"
#include "layerjit/builder.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

using namespace lj;

namespace {
// Every node is in exactly one group or is a view.
void check_cover(const Graph& g, const FusionPlan& p) {
  std::vector<int> seen(g.nodes().size(), 0);
  for (const auto& grp : p.groups)
    for (NodeId n : grp.nodes) ++seen[static_cast<size_t>(n)];
  for (NodeId n : p.views) ++seen[static_cast<size_t>(n)];
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == 1);
}

// Each group's inputs are produced by earlier groups (through views) or are graph inputs.
void check_order(const Graph& g, const FusionPlan& p) {
  std::vector<int> group_of(g.nodes().size(), -1);
  for (const auto& grp : p.groups)
    for (NodeId n : grp.nodes) group_of[static_cast<size_t>(n)] = grp.id;
  for (const auto& grp : p.groups) {
    for (ValueId v : grp.inputs) {
      ValueId src = v;
      while (g.value(src).producer >= 0 && is_view(g.node(g.value(src).producer).kind))
        src = g.node(g.value(src).producer).operands[0];
      NodeId prod = g.value(src).producer;
      if (prod >= 0) CHECK(group_of[static_cast<size_t>(prod)] < grp.id);
    }
  }
}

std::vector<Graph> llama_graphs() {
  return {llama_prefill(LlamaConfig::llama3_8b()), llama_decode(LlamaConfig::llama3_8b()),
          llama_prefill(LlamaConfig::small()), llama_decode(LlamaConfig::small())};
}
}  // namespace

TEST_CASE("fused plans cover every node once, in a valid order", "[fusion]") {
  for (const Graph& g : llama_graphs()) {
    FusionPlan p = plan_fusion(g);
    check_cover(g, p);
    check_order(g, p);
  }
}

TEST_CASE("unfused plans have one group per non-view op", "[fusion]") {
  for (const Graph& g : llama_graphs()) {
    FusionPlan p = plan_fusion(g, FusionOptions{false});
    check_cover(g, p);
    check_order(g, p);
    for (const auto& grp : p.groups) CHECK(grp.nodes.size() == 1);
    CHECK(p.groups.size() + p.views.size() == g.nodes().size());
  }
}

TEST_CASE("plans are deterministic", "[fusion]") {
  Graph g = llama_decode(LlamaConfig::llama3_8b());
  Bindings b;
  b.set("B", 4);
  b.set("C", 100);
  CHECK(print_plan(g, plan_fusion(g), b) == print_plan(g, plan_fusion(g), b));
}

TEST_CASE("fusion never moves more bytes than the unfused plan", "[fusion]") {
  Bindings b;
  b.set("T", 33);
  b.set("B", 3);
  b.set("C", 77);
  for (const Graph& g : llama_graphs()) {
    double fused = 0, unfused = 0;
    for (const auto& grp : plan_fusion(g).groups) fused += group_cost(g, grp, b).bytes;
    for (const auto& grp : plan_fusion(g, FusionOptions{false}).groups) unfused += group_cost(g, grp, b).bytes;
    CHECK(fused < unfused);
  }
}

TEST_CASE("internal values are used only inside their group", "[fusion]") {
  Graph g = llama_prefill(LlamaConfig::llama3_8b());
  UseMap uses(g);
  const FusionPlan plan = plan_fusion(g);
  // A view of an internal value (the halves of a fused gate/up projection) is internal too: its
  // readers must be in the group as well, unless the group stores the view in a buffer of its own
  // (the v heads of the QKV projection, whose epilogue applies RoPE).
  std::function<void(const FusionGroup&, ValueId)> check_readers = [&](const FusionGroup& grp, ValueId v) {
    if (std::find(plan.dense_views.begin(), plan.dense_views.end(), v) != plan.dense_views.end()) {
      CHECK(std::find(grp.outputs.begin(), grp.outputs.end(), v) != grp.outputs.end());
      return;
    }
    CHECK_FALSE(uses.is_output(v));
    for (NodeId u : uses.users(v)) {
      if (is_view(g.node(u).kind)) {
        for (ValueId r : g.node(u).results) check_readers(grp, r);
      } else {
        CHECK(std::find(grp.nodes.begin(), grp.nodes.end(), u) != grp.nodes.end());
      }
    }
  };
  int seen = 0;
  for (const auto& grp : plan.groups)
    for (ValueId v : grp.internal) {
      check_readers(grp, v);
      ++seen;
    }
  CHECK(seen >= 4);  // the QKV, o and down products, the gate/up projection and silu
  CHECK(plan.dense_views.size() == 1);  // %v
}

TEST_CASE("a returned value is written even when its only user is in the group", "[fusion]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {8});
  auto a = b.silu(x).named("a");
  auto c = b.relu(a).named("c");
  Graph g = b.finish({a, c});
  FusionPlan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].outputs == std::vector<ValueId>{a.id(), c.id()});
  CHECK(p.groups[0].internal.empty());
}

TEST_CASE("elementwise ops over different iteration spaces stay apart", "[fusion]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4, 8});
  auto s = b.input("s", DType::F32, {8});
  auto e = b.exp(s).named("e");       // iterates over [8]
  auto y = b.mul(x, e).named("y");    // iterates over [4, 8]: would recompute e per row
  Graph g = b.finish({y});
  CHECK(plan_fusion(g).groups.size() == 2);
}

TEST_CASE("cycle detection sees paths through other groups", "[fusion]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4, 8});
  auto w = b.param("w", DType::F32, {8, 8});
  auto a = b.silu(x);
  auto m = b.matmul(a, w);
  auto c = b.add(a, m);
  Graph g = b.finish({c});
  UseMap uses(g);
  CHECK(creates_cycle(g, uses, {0}, 2));        // silu + add around the matmul
  CHECK_FALSE(creates_cycle(g, uses, {0}, 1));  // silu + matmul
}

TEST_CASE("cycle detection looks forward and backward from the candidate, through views", "[fusion]") {
  // a -> split -> (p0 -> b, p1 -> q(outside) -> d): d and a around q
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4, 8});
  auto w = b.param("w", DType::F32, {4, 4});
  auto a = b.silu(x);                                 // node 0
  auto parts = b.split(a, 1, {4, 4});                 // node 1, a view
  auto e = b.exp(parts[0]);                           // node 2
  auto q = b.matmul(parts[1], w);                     // node 3, another kernel
  auto d = b.add(e, q);                               // node 4
  Graph g = b.finish({d});
  UseMap uses(g);
  CHECK_FALSE(creates_cycle(g, uses, {0}, 2));  // exp reads silu through the split: an alias, no kernel between
  CHECK(creates_cycle(g, uses, {0, 2}, 4));      // add reads the matmul, which reads the group: forward from the group
  CHECK(creates_cycle(g, uses, {4}, 0));         // silu feeds the matmul that feeds the add: backward from the candidate
  CHECK_FALSE(creates_cycle(g, uses, {3, 4}, 2));
}

TEST_CASE("group kind names", "[fusion]") {
  CHECK(group_kind_name(GroupKind::RopeKvWrite) == "rope_kv_write");
  CHECK(group_kind_name(GroupKind::RowReduce) == "row_reduce");
  CHECK(group_kind_name(GroupKind::Elementwise) == "elementwise");
}

TEST_CASE("residual add, rms_norm and a per-row dynamic quantize form one row kernel", "[fusion]") {
  GraphBuilder b("g");
  const Dim t = Dim::sym("T");
  auto x = b.input("x", DType::BF16, {t, 64});
  auto r = b.input("r", DType::BF16, {t, 64});
  auto w = b.param("w", DType::BF16, {64});
  auto h = b.add(x, r).named("h");
  auto n = b.rms_norm(h, w).named("n");
  auto [q, s] = b.dynamic_quantize(n, DType::F8E4M3, 0);
  Graph g = b.finish({h, q, s});
  FusionPlan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 1);
  const FusionGroup& grp = p.groups[0];
  CHECK(grp.kind == GroupKind::RowReduce);
  CHECK(grp.nodes.size() == 3);
  CHECK(grp.outputs == std::vector<ValueId>{h.id(), q.id(), s.id()});
  CHECK(grp.internal == std::vector<ValueId>{n.id()});  // the normalised row never reaches memory
  // Unfused: add, rms_norm and the quantize, which is a row kernel of its own.
  FusionPlan u = plan_fusion(g, FusionOptions{false});
  REQUIRE(u.groups.size() == 3);
  CHECK(u.groups[2].kind == GroupKind::RowReduce);
}

TEST_CASE("a dynamic quantize joins its row kernel even when the row is also read elsewhere", "[fusion]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {Dim::sym("T"), 16});
  auto sm = b.softmax(x).named("p");
  auto c = b.cast(sm, DType::BF16).named("c");
  auto [q, s] = b.dynamic_quantize(c, DType::I8, 0);
  auto e = b.exp(c).named("e");
  Graph g = b.finish({q, s, e});
  FusionPlan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[0].kind == GroupKind::RowReduce);
  CHECK(p.groups[0].nodes.size() == 3);  // softmax, its cast epilogue, the quantize
  CHECK(std::find(p.groups[0].outputs.begin(), p.groups[0].outputs.end(), c.id()) != p.groups[0].outputs.end());
  CHECK(p.groups[1].kind == GroupKind::Elementwise);
}

TEST_CASE("dynamic quantizes that are not per row are not pointwise and get no row kernel", "[fusion]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {Dim::sym("T"), 16});
  auto a = b.silu(x).named("a");
  auto [qt, st] = b.dynamic_quantize(a, DType::F8E4M3);     // one scale for the whole tensor
  auto [qc, sc] = b.dynamic_quantize(x, DType::I8, 1);      // one scale per column
  auto [qr, sr] = b.dynamic_quantize(a, DType::F8E5M2, 0);  // per row, with the silu as prologue
  Graph g = b.finish({qt, st, qc, sc, qr, sr});
  CHECK_FALSE(is_pointwise(g.node(1)));
  CHECK(is_row_quantize(g, g.node(3)));
  CHECK_FALSE(is_row_quantize(g, g.node(1)));
  CHECK_FALSE(is_row_quantize(g, g.node(2)));
  FusionPlan p = plan_fusion(g);
  std::vector<GroupKind> kinds;
  for (const auto& grp : p.groups) kinds.push_back(grp.kind);
  CHECK(kinds == std::vector<GroupKind>{GroupKind::RowReduce, GroupKind::Reduce, GroupKind::Reduce});
  CHECK(p.groups[0].nodes == std::vector<NodeId>{0, 3});
}

// Qwen3's per-head norms: an rms_norm over [N, H, D] heads whose only reader is a rope of the
// table's dim joins the RoPE kernel; one read elsewhere too stays a row kernel.
TEST_CASE("a per-head RMSNorm feeding only a rope joins the RoPE kernel", "[fusion]") {
  auto plan_of = [](const std::string& extra_use, int64_t d) {
    const std::string text = fmt::format(
        "graph @f(%pos: i32[N], %x: bf16[N, 4, {0}], %w: param bf16[{0}]) {{\n"
        "  %xn = rms_norm(%x, %w)\n"
        "  %cos, %sin = rope_table(%pos) {{dim = {0}}}\n"
        "  %y = rope(%xn, %cos, %sin)\n"
        "{1}  return %y{2}\n}}\n",
        d, extra_use, extra_use.empty() ? "" : ", %z");
    Module m = parse_module(text, "<head norm>");
    Graph g = std::move(m.graphs.at(0));
    FusionPlan p = plan_fusion(g);
    return std::pair{std::move(g), std::move(p)};
  };
  {
    const auto [g, p] = plan_of("", 16);
    REQUIRE(p.groups.size() == 1);
    CHECK(p.groups[0].kind == GroupKind::RopeKvWrite);
    CHECK(p.groups[0].nodes.size() == 3);
  }
  {
    const auto [g, p] = plan_of("  %z = add(%xn, %xn)\n", 16);  // the normed heads are read twice
    REQUIRE(p.groups.size() >= 2);
    CHECK(std::any_of(p.groups.begin(), p.groups.end(), [](const FusionGroup& grp) { return grp.kind == GroupKind::RowReduce; }));
    bool noted = false;
    for (const FusionGroup& grp : p.groups)
      for (const std::string& why : grp.why) noted = noted || why.find("is read by more than the rope") != std::string::npos;
    CHECK(noted);
  }
}

TEST_CASE("decode attention reads its cache before the wait only where no kernel of the graph writes the old rows", "[fusion]") {
  // %kc and %vc written at %pos by the kernel before the attention, the attention at `at` positions,
  // `extra` more nodes, `tokens` query tokens, `blocks` a block table (paged caches).
  auto plan_of = [](const std::string& at, const std::string& extra, int tokens, bool paged, bool prefetch = true) {
    const std::string cache = paged ? "[40, 16, 2, 64]" : "[B, C, 2, 64]";
    const std::string bt = paged ? ", %blocks" : "";
    const std::string text = fmt::format(
        "graph @d(%q: bf16[B, {0}, 8, 64], %kn: bf16[B, {0}, 2, 64], %vn: bf16[B, {0}, 2, 64], %kc: bf16{1}, %vc: bf16{1}, "
        "%pos: i32[B], %pos2: i32[B], %blocks: i32[B, 4]) {{\n"
        "  %kc2 = kv_cache_write(%kc, %kn, %pos{2})\n  %vc2 = kv_cache_write(%vc, %vn, %pos{2})\n{3}"
        "  %o = attention(%q, %kc2, %vc2, %{4}{2}) {{causal = true}}\n  return %o\n}}\n",
        tokens, cache, bt, extra, at);
    Module m = parse_module(text, "<cache prefetch>");
    Graph g = std::move(m.graphs.at(0));
    FusionOptions fo;
    fo.cache_prefetch = prefetch;
    FusionPlan p = plan_fusion(g, fo);
    const UseMap uses(g);
    std::string refusal;
    for (const Node& n : g.nodes())
      if (n.kind == OpKind::Attention) refusal = cache_prefetch_refusal(g, uses, n);
    return std::tuple{std::move(g), std::move(p), refusal};
  };
  auto marks = [](const FusionPlan& p) {
    int before_wait = 0, triggers = 0;
    for (size_t i = 0; i < p.groups.size(); ++i) {
      before_wait += p.groups[i].cache_before_wait;
      triggers += p.groups[i].trigger_dependents;
      // The trigger sits on the group just before the attention that reads early.
      if (p.groups[i].trigger_dependents) CHECK((i + 1 < p.groups.size() && p.groups[i + 1].cache_before_wait));
    }
    return std::pair{before_wait, triggers};
  };
  {
    const auto [g, p, refusal] = plan_of("pos", "", 1, false);
    CHECK(refusal.empty());
    CHECK(marks(p) == std::pair{1, 1});
    CHECK(p.groups.back().kind == GroupKind::Attention);
    CHECK(p.groups.back().cache_before_wait);
  }
  {
    const auto [g, p, refusal] = plan_of("pos", "", 1, false, false);  // --no-cache-prefetch
    CHECK(refusal.empty());
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    const auto [g, p, refusal] = plan_of("pos2", "", 1, false);  // the writes' rows may lie before the attention's positions
    CHECK(refusal == "%kc2 is written at positions other than the attention's");
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    const auto [g, p, refusal] = plan_of("pos", "  %kx = add(%kc, %kc)\n", 1, false);  // the cache read elsewhere too
    CHECK(refusal == "the cache %kc has other readers or writers");
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    const auto [g, p, refusal] = plan_of("pos", "", 1, true);
    CHECK(refusal == "the cache is paged (another sequence's write may land in a page this one reads)");
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    const auto [g, p, refusal] = plan_of("pos", "", 40, false);  // prefill into the cache
    CHECK(refusal == "not decode attention");
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    // No cache write: the attention is the first kernel of the call, with nothing to overlap.
    Module m = parse_module("graph @d(%q: bf16[B, 1, 8, 64], %kc: bf16[B, C, 2, 64], %vc: bf16[B, C, 2, 64], %pos: i32[B]) {\n"
                            "  %o = attention(%q, %kc, %vc, %pos) {causal = true}\n  return %o\n}\n",
                            "<first>");
    const Graph& g = m.graphs.at(0);
    const FusionPlan p = plan_fusion(g);
    CHECK(cache_prefetch_refusal(g, UseMap(g), g.node(0)).empty());
    CHECK(marks(p) == std::pair{0, 0});
  }
  {
    // The attention reads a cache that a write in the graph updates in place (through another value).
    Module m = parse_module("graph @d(%q: bf16[B, 1, 8, 64], %kn: bf16[B, 2, 64], %kc: bf16[B, C, 2, 64], %vc: bf16[B, C, 2, 64], "
                            "%pos: i32[B]) {\n  %kc2 = kv_cache_write(%kc, %kn, %pos)\n"
                            "  %o = attention(%q, %kc, %vc, %pos) {causal = true}\n  return %o, %kc2\n}\n",
                            "<in place>");
    const Graph& g = m.graphs.at(0);
    CHECK(cache_prefetch_refusal(g, UseMap(g), g.node(1)) == "%kc is also written in place by a cache write");
    CHECK(marks(plan_fusion(g)) == std::pair{0, 0});
  }
}
