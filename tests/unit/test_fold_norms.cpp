// fold_norms: RMSNorm folded into the matmuls that read it. The rewrite keeps every value id, names
// what it did and what it refused, and computes what the original graph computes (CPU reference:
// one rounding of W * w instead of one per normalised element).
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/builder.h"
#include "layerjit/llama.h"
#include "layerjit/passes.h"
#include "layerjit/reference.h"
#include "layerjit/text.h"

using namespace lj;

namespace {

ValueId id_of(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].name == name) return static_cast<ValueId>(i);
  return -1;
}

// The largest |got - want| and the largest |want|.
std::pair<double, double> max_diff(const HostTensor& got, const HostTensor& want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    worst = std::max(worst, std::fabs(got.data[i] - want.data[i]));
    scale = std::max(scale, std::fabs(want.data[i]));
  }
  return {worst, scale};
}

// Random inputs: positions 0.. for i32, norm weights in [0.5, 1.5) (not near 0), matrices in
// [-0.1, 0.1), activations in [-1, 1).
std::map<std::string, HostTensor> random_inputs(const Graph& g, const Bindings& b, uint64_t seed) {
  std::map<std::string, HostTensor> in;
  for (ValueId v : g.inputs()) {
    const ValueInfo& info = g.value(v);
    HostTensor t(info.type.dtype, resolve(info.type.shape, b));
    if (info.type.dtype == DType::I32) {
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<double>(i);
    } else if (info.is_param) {
      fill_uniform(t, ++seed, info.type.rank() == 1 ? 0.5 : -0.1, info.type.rank() == 1 ? 1.5 : 0.1);
    } else {
      fill_uniform(t, ++seed, -1.0, 1.0);
    }
    in.emplace(info.name, std::move(t));
  }
  return in;
}

Graph parse_one(const char* text) {
  Module m = parse_module(text, "<fold test>");
  return std::move(m.graphs.at(0));
}

}  // namespace

TEST_CASE("both norms of the Llama layer fold, every value keeps its id", "[passes][fold]") {
  for (const Graph& g : {llama_prefill(LlamaConfig::small()), llama_decode(LlamaConfig::small())}) {
    const NormFolding f = fold_norms(g);
    CHECK(f.folded == 2);
    REQUIRE(f.notes.size() == 2);
    CHECK(f.notes[0].find("%h = rms_norm(%x, %attn_norm) folded into %qkv (weights %w_qkv.folded = %w_qkv * %attn_norm)") == 0);
    const Graph& h = f.graph;
    CHECK(h.inputs() == g.inputs());
    CHECK(h.outputs() == g.outputs());
    REQUIRE(h.values().size() == g.values().size() + 2);  // the two folded weights
    for (size_t i = 0; i < g.values().size(); ++i) {
      const std::string& was = g.values()[i].name;
      if (was == "h" || was == "hn") continue;  // the norms' results: now their row scales
      CHECK(h.values()[i].name == was);
      CHECK(h.values()[i].type == g.values()[i].type);
    }
    const ValueId s = id_of(g, "h");
    CHECK(h.value(s).name == "h.scale");
    CHECK(h.value(s).type.dtype == DType::F32);
    const Node& qkv = h.node(h.value(id_of(h, "qkv")).producer);
    REQUIRE(qkv.operands.size() == 3);
    CHECK(qkv.operands[0] == id_of(g, "x"));
    CHECK(h.value(qkv.operands[1]).name == "w_qkv.folded");
    CHECK(qkv.operands[2] == s);
    // Nodes stay in an order that defines every operand first (the reference runs them in order).
    for (NodeId n = 0; n < static_cast<NodeId>(h.nodes().size()); ++n)
      for (ValueId v : h.node(n).operands) CHECK(h.value(v).producer < n);
  }
}

TEST_CASE("the folded graph computes what the original computes", "[passes][fold]") {
  const Graph g = llama_prefill(LlamaConfig::small());
  const Graph folded = fold_norms(g).graph;
  Bindings b;
  b.set("T", 11);
  const std::map<std::string, HostTensor> in = random_inputs(g, b, 5);
  const std::vector<HostTensor> want = run_reference(g, in, b);
  const std::vector<HostTensor> got = run_reference(folded, in, b);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const auto [worst, scale] = max_diff(got[o], want[o]);
    INFO("output " << o << ": max |diff| " << worst << " of max |value| " << scale);
    CHECK(worst > 0);  // the roundings differ: the comparison below is not vacuous
    CHECK(worst <= scale / 64);
  }
}

TEST_CASE("a norm over rank-3 rows folds too: the row scale keeps x's leading dims", "[passes][fold]") {
  const Graph g = parse_one(R"(
graph @rank3(%x: bf16[B, 5, 48], %nw: param bf16[48], %w: param bf16[20, 48]) -> bf16[B, 5, 20] {
  %h = rms_norm(%x, %nw)
  %y = matmul(%h, %w)
  return %y
}
)");
  const NormFolding f = fold_norms(g);
  REQUIRE(f.folded == 1);
  CHECK(f.graph.value(id_of(g, "h")).type.str() == "f32[B, 5]");
  Bindings b;
  b.set("B", 3);
  const std::map<std::string, HostTensor> in = random_inputs(g, b, 40);
  const auto [worst, scale] = max_diff(run_reference(f.graph, in, b)[0], run_reference(g, in, b)[0]);
  INFO("max |diff| " << worst << " of max |value| " << scale);
  CHECK(worst > 0);
  CHECK(worst <= scale / 64);
}

TEST_CASE("norms that cannot fold stay, and the plan says why", "[passes][fold]") {
  const Graph g = parse_one(R"(
graph @refusals(%x: bf16[T, 64], %nw: param bf16[64], %act_w: bf16[64], %w: param bf16[32, 64], %wa: bf16[32, 64]) -> bf16[T, 32], bf16[T, 32], bf16[T, 64], bf16[T, 32], bf16[T, 32] {
  %a = rms_norm(%x, %act_w)
  %ya = matmul(%a, %w)
  %b = rms_norm(%x, %nw)
  %yb = matmul(%b, %w)
  %c = rms_norm(%x, %nw)
  %yc = matmul(%c, %wa)
  %d = rms_norm(%x, %nw)
  %yd = matmul(%d, %w)
  %e = add(%d, %x)
  return %ya, %yb, %e, %yc, %yd
}
)");
  const NormFolding f = fold_norms(g);
  CHECK(f.folded == 1);  // %b
  std::string all;
  for (const std::string& n : f.notes) all += n + "\n";
  CHECK(all.find("%a not folded: its weight %act_w is not a param") != std::string::npos);
  CHECK(all.find("%b = rms_norm(%x, %nw) folded into %yb") != std::string::npos);
  CHECK(all.find("%c not folded: the matmul's weight %wa is not a param") != std::string::npos);
  CHECK(all.find("%d not folded: add reads it too, and needs the normalised rows") != std::string::npos);
  // `plan` prints them; weight preparation comes first and is not counted per call.
  const Lowered l = lower(g);
  Bindings b;
  b.set("T", 8);
  const std::string text = print_plan(*l.graph, l.plan, b, &g);
  CHECK(text.find("graph: %a not folded") != std::string::npos);
  REQUIRE(!l.plan.groups.empty());
  CHECK(l.plan.groups[0].prepare);
  CHECK(text.find("weight preparation: 1 kernel once") != std::string::npos);
  // --no-fuse and fold_norms = false keep every norm.
  FusionOptions off;
  off.fold_norms = false;
  CHECK(lower(g, off).graph.get() == &g);
  CHECK(lower(g, FusionOptions{false}).graph.get() == &g);
}

TEST_CASE("matmul's row scale and rms_scale: types and errors", "[passes][fold]") {
  GraphBuilder b("rs");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 3, 64});
  auto w = b.param("w", DType::BF16, {32, 64});
  auto s = b.rms_scale(x);
  CHECK(s.type().str() == "f32[T, 3]");
  auto y = b.matmul(x, w, std::nullopt, s);
  CHECK(y.type().str() == "bf16[T, 3, 32]");
  auto bad = b.input("bad", DType::F32, {Dim::sym("T")});
  CHECK_THROWS_WITH(b.matmul(x, w, std::nullopt, bad), Catch::Contains("the row scale must have one element per row of x"));
  auto half = b.input("h16", DType::BF16, {Dim::sym("T"), 3});
  CHECK_THROWS_WITH(b.matmul(x, w, std::nullopt, half), Catch::Contains("must be f32"));
}
