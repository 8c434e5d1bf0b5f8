// One-row prologues (FusionOptions::one_row_prologues): where the plan's sizes give a matmul one row
// of x, the rms_scale and rope_table only it reads join its group, and the GEMV computes them (the
// squares of x on the way through its dot product, each pair's angle in its epilogue). The planner
// decides by the sizes alone; the matmul family then offers only configs that compute them and
// refuses the others by name.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "codegen/emitters.h"
#include "codegen/kernel_family.h"
#include "compiler/fusion/fusion_group.h"
#include "jit/compile_kernels.h"
#include "layerjit/error.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"

using namespace lj;

namespace {

Lowered plan_at(const Graph& g, const Bindings& sizes, bool prologues = true) {
  FusionOptions fo;
  fo.sizes = sizes;
  fo.one_row_prologues = prologues;
  fo.quantize_prologues = prologues;  // (opt-in: the activation-quantize prologues are tested here)
  return lower(g, fo);
}

Bindings decode_sizes(int64_t b) {
  Bindings s;
  s.set("B", b);
  s.set("C", 4096);
  return s;
}

// Emission for sm_<sm> (sm_90a where 90) at one row's decode sizes.
EmitOptions one_row_emit(int sm) {
  EmitOptions eo;
  eo.sm = sm;
  eo.arch_specific = sm == 90;
  eo.hint = decode_sizes(1);
  return eo;
}

int per_call_kernels(const Lowered& l) {
  return static_cast<int>(std::count_if(l.plan.groups.begin(), l.plan.groups.end(), [](const FusionGroup& grp) { return !grp.prepare; }));
}

// The group holding a node of kind `k`, or null.
const FusionGroup* group_with(const Lowered& l, OpKind k) {
  for (const FusionGroup& grp : l.plan.groups)
    for (NodeId n : grp.nodes)
      if (l.graph->node(n).kind == k) return &grp;
  return nullptr;
}

// Graph @name of examples/<file> (read from the source tree).
Graph example_graph(const std::string& file, const std::string& name) {
  const Module m = parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/examples/" + file);
  for (const Graph& x : m.graphs)
    if (x.name() == name) return x;
  FAIL("examples/" << file << " has no graph @" << name);
  return m.graphs.front();
}

Graph fp8_layer(const std::string& name) { return example_graph("llama3_8b_fp8.lj", name); }

std::string emit_error(const Graph& g, const FusionGroup& grp, const EmitOptions& eo) {
  try {
    matmul_family().emit(g, grp, eo);
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("one-row prologues: at B = 1 the decode layer's factors and tables join the projections, not at B = 2 or unbound",
          "[codegen][fusion]") {
  const Graph g = llama_decode(LlamaConfig::llama3_8b());
  const Lowered one = plan_at(g, decode_sizes(1));
  REQUIRE(per_call_kernels(one) == 5);  // QKV, attention, o, gate/up, down
  const FusionGroup* qkv = group_with(one, OpKind::RopeTable);
  REQUIRE(qkv != nullptr);
  CHECK(qkv->kind == GroupKind::Matmul);
  CHECK(qkv->matmul.table >= 0);
  CHECK(qkv->matmul.rms >= 0);
  CHECK(one.graph->node(anchor_node(*one.graph, *qkv)).kind == OpKind::Matmul);
  CHECK(one.graph->node(qkv->nodes.front()).kind == OpKind::RmsScale);  // graph order: the prologue first
  // Neither the factors nor the tables reach memory.
  for (const FusionGroup& grp : one.plan.groups) {
    CHECK(grp.kind != GroupKind::RowReduce);
    CHECK(grp.kind != GroupKind::RopeKvWrite);
    for (ValueId v : grp.outputs) {
      const std::string& name = one.graph->value(v).name;
      CHECK(name != "cos");
      CHECK(name != "sin");
      CHECK(name.find(".scale") == std::string::npos);
    }
  }
  const std::string text = print_plan(*one.graph, one.plan, decode_sizes(1), &g);
  CHECK_THAT(text, Catch::Matchers::Contains("absorbed %h.scale = rms_scale (one row: each warp adds up the squares of the row of %x"));
  CHECK_THAT(text, Catch::Matchers::Contains("absorbed %cos, %sin = rope_table (one row: the epilogue computes each pair's angle from %pos"));
  CHECK_THAT(text, Catch::Matchers::Contains("with cos/sin computed in the epilogue"));

  // Two rows (the 16-row tiles, split along K), unbound sizes and the option off: the kernels stay.
  CHECK(per_call_kernels(plan_at(g, decode_sizes(2))) == 8);
  CHECK(per_call_kernels(plan_at(g, Bindings{})) == 8);
  CHECK(per_call_kernels(plan_at(g, decode_sizes(1), false)) == 8);
  // The prefill layer at T = 1 is one row too; at T = 4096 nothing changes.
  Bindings t1, t4096;
  t1.set("T", 1);
  t4096.set("T", 4096);
  const Graph pre = llama_prefill(LlamaConfig::llama3_8b());
  CHECK(per_call_kernels(plan_at(pre, t1)) + 3 == per_call_kernels(plan_at(pre, t4096)));
}

TEST_CASE("one-row prologues: the group takes only the SIMT GEMV, and a given tile config is refused by name", "[codegen][fusion]") {
  const Graph g = llama_decode(LlamaConfig::llama3_8b());
  const Lowered one = plan_at(g, decode_sizes(1));
  EmitOptions eo = one_row_emit(90);
  const FusionGroup* qkv = group_with(one, OpKind::RopeTable);
  REQUIRE(qkv != nullptr);
  std::vector<std::string> pruned;
  const std::vector<KernelConfig> cands = matmul_family().candidates(*one.graph, *qkv, eo, &pruned);
  REQUIRE(!cands.empty());
  for (const KernelConfig& c : cands) {
    INFO(c.str());
    CHECK(c.str().rfind("gemv mt=", 0) == 0);
  }
  CHECK(std::any_of(pruned.begin(), pruned.end(), [](const std::string& p) {
    return p.find("only the SIMT GEMV does: its warps read whole rows of x") != std::string::npos;
  }));
  // The default emits the factor and the angle in the kernel; it reads neither from memory.
  const GeneratedKernel k = matmul_family().emit(*one.graph, *qkv, eo);
  CHECK_THAT(k.source, Catch::Matchers::Contains("lj_gemv_pass_sq<"));
  CHECK_THAT(k.source, Catch::Matchers::Contains("rsqrtf(lj_warp_sum(ss[i]) / (float)K + 1e-05f)"));
  CHECK_THAT(k.source, Catch::Matchers::Contains("sincos((double)pos * lj_inv_freq[fq], &sd, &cd);"));
  for (const char* absent : {"p_cos", "p_sin", "p_h_scale"}) {
    INFO(absent);
    CHECK(k.source.find(absent) == std::string::npos);
  }
  EmitOptions tiles = eo;
  tiles.matmul = parse_matmul_config("mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6", nullptr);
  REQUIRE(tiles.matmul);
  CHECK_THAT(emit_error(*one.graph, *qkv, tiles), Catch::Matchers::Contains("(a one-row prologue), which only the SIMT GEMV does"));
}

TEST_CASE("one-row prologues: the fp8 layer's QKV keeps the tensor-core GEMV and computes its angles", "[codegen][fusion]") {
  const Graph g = fp8_layer("llama3_8b_fp8_decode");
  const Lowered one = plan_at(g, decode_sizes(1));
  const FusionGroup* qkv = group_with(one, OpKind::RopeTable);
  REQUIRE(qkv != nullptr);
  CHECK(qkv->kind == GroupKind::Matmul);
  CHECK(qkv->matmul.rms < 0);  // its row scale is the quantizer's, not an rms_scale
  EmitOptions eo = one_row_emit(90);
  const GeneratedKernel k = matmul_family().emit(*one.graph, *qkv, eo);
  CHECK(k.config.rfind("gemv mma", 0) == 0);
  CHECK_THAT(k.source, Catch::Matchers::Contains("sincos((double)pos * lj_inv_freq[fq], &sd, &cd);"));
  // The scales' product is a row-scale prologue at any size: read where the product was.
  CHECK(qkv->matmul.row_scale_product >= 0);
  // Its factor %h_scale comes from the activation-quantize prologue at one row (below).
  CHECK_THAT(k.source, Catch::Matchers::Contains("const float rs = xq_scale * lj_to_float(p_s_qkv[0]);  // %qkv_rs"));
  CHECK(k.source.find("p_qkv_rs") == std::string::npos);
  CHECK(k.source.find("p_h_scale") == std::string::npos);
}

TEST_CASE("activation-quantize prologues: at one row the fp8 and W8A8 GEMVs quantize x themselves, four kernels fewer",
          "[codegen][fusion]") {
  for (const auto& [file, graph, wide] : {std::tuple{"llama3_8b_fp8.lj", "llama3_8b_fp8_decode", true},
                                          std::tuple{"llama3_8b_w8a8.lj", "llama3_8b_w8a8_decode", false}}) {
    INFO(file);
    const Graph g = example_graph(file, graph);
    const Lowered one = plan_at(g, decode_sizes(1)), without = plan_at(g, decode_sizes(1), false), b2 = plan_at(g, decode_sizes(2));
    // The four quantize row kernels (two with their RMSNorm) joined the four projections, and the
    // rope_table the QKV GEMV (without prologues: 10 kernels).
    CHECK(per_call_kernels(one) == 5);
    CHECK(per_call_kernels(without) == 10);
    int quantized = 0, normed = 0;
    for (const FusionGroup& grp : one.plan.groups) {
      CHECK(grp.kind != GroupKind::RowReduce);
      if (grp.kind != GroupKind::Matmul) continue;
      REQUIRE(grp.matmul.x_quantize >= 0);
      ++quantized;
      normed += grp.matmul.x_norm >= 0;
    }
    CHECK(quantized == 4);
    CHECK(normed == 2);  // QKV and gate/up; o and down quantize the attention and SwiGLU rows
    // Two rows: the quantize kernels stay (the plan is made for the sizes).
    for (const FusionGroup& grp : b2.plan.groups) CHECK(grp.matmul.x_quantize < 0);
    for (const FusionGroup& grp : without.plan.groups) CHECK(grp.matmul.x_quantize < 0);
    // Every GEMV family takes the prologue: the tensor-core one where the target has its MMA (fp8 from
    // sm_89, i8 from sm_80), the SIMT one for fp8 on sm_80; the GEMMs are refused by name.
    for (const auto& [sm, tc] : {std::pair{90, true}, std::pair{89, true}, std::pair{80, !wide}}) {
      const EmitOptions eo = one_row_emit(sm);
      for (const FusionGroup& grp : one.plan.groups) {
        if (grp.kind != GroupKind::Matmul) continue;
        const GeneratedKernel k = matmul_family().emit(*one.graph, grp, eo);
        INFO(k.name << " (" << k.config << ") sm_" << sm);
        CHECK(k.config.rfind(tc ? "gemv mma" : "gemv", 0) == 0);
        CHECK_THAT(k.source, Catch::Matchers::Contains("xq_s[") && Catch::Matchers::Contains("lj_quant_scale<"));
        CHECK(k.source.find("_scale[m]") == std::string::npos);  // no per-row scale is read from memory
      }
    }
    const FusionGroup* qkv = group_with(one, OpKind::RopeTable);
    REQUIRE(qkv != nullptr);
    EmitOptions eo = one_row_emit(90);
    std::string bad;
    eo.matmul = parse_matmul_config("wgmma bm=64 bn=128 stages=6 gm=8", &bad);
    REQUIRE(eo.matmul);
    CHECK_THAT(emit_error(*one.graph, *qkv, eo), Catch::Matchers::Contains("quantizes its row of x in the kernel"));
  }
}

TEST_CASE("quantize prologues up to N rows: QKV, o and down quantize x themselves, gate/up keeps its row kernel, W's first steps before the wait",
          "[codegen][fusion]") {
  for (const auto& [file, graph] : {std::pair{"llama3_8b_fp8.lj", "llama3_8b_fp8_decode"}, std::pair{"llama3_8b_w8a8.lj", "llama3_8b_w8a8_decode"}}) {
    INFO(file);
    const Graph g = example_graph(file, graph);
    FusionOptions fo;
    fo.sizes = decode_sizes(1);
    fo.quantize_prologue_rows = 8192;  // QKV 6144, o and down 4096; gate/up 28672
    const Lowered l = lower(g, fo);
    fo.sizes = decode_sizes(2);
    const Lowered b2 = lower(g, fo);
    CHECK(per_call_kernels(l) == 6);  // 9 by default: the quantizes of QKV, o and down joined them
    const FusionGroup* gate_up = group_with(l, OpKind::Silu);
    REQUIRE(gate_up != nullptr);
    CHECK(gate_up->matmul.x_quantize < 0);
    int quantized = 0;
    const EmitOptions eo = one_row_emit(90);
    for (const FusionGroup& grp : l.plan.groups) {
      if (grp.kind != GroupKind::Matmul || grp.matmul.x_quantize < 0) continue;
      ++quantized;
      const GeneratedKernel k = matmul_family().emit(*l.graph, grp, eo);
      INFO(k.name);
      // The row read from L2 once into shared memory (Llama's rows fit: 4096 and 14336), the
      // weight's first steps loaded before the wait and used by the first batch.
      CHECK_THAT(k.source, Catch::Matchers::Contains("xq_x[") && Catch::Matchers::Contains("lj_gemv_mma_share") &&
                               Catch::Matchers::Contains("_pre<"));
      const size_t load_w = k.source.find("lj_gemv_mma_load_w<"), wait = k.source.find("lj_pdl_begin();"), row = k.source.find("xq_src + c");
      REQUIRE(load_w != std::string::npos);
      CHECK(load_w < wait);
      CHECK(wait < row);
    }
    CHECK(quantized == 3);
    for (const FusionGroup& grp : b2.plan.groups) CHECK(grp.matmul.x_quantize < 0);
  }
}

TEST_CASE("quantize prologues: a row too long to keep beside its codes is read from L2 once per pass, and compiles without spills",
          "[codegen][fusion]") {
  // 16384 bf16 and their codes: 48 KiB, past kQuantizePrologueSharedBytes; 14336 (Llama's down) fits.
  for (const int64_t k : {int64_t{16384}, int64_t{14336}}) {
    INFO("K = " << k);
    const Module m = parse_module(fmt::format(R"(graph @wide(%x: bf16[B, {0}], %w: param f8e4m3[200, {0}], %s: param f32[1]) -> bf16[B, 200] {{
  %xq, %xs = quantize(%x) {{dtype = f8e4m3, axis = 0}}
  %rs = mul(%xs, %s)
  %y = matmul(%xq, %w, %rs)
  return %y
}})",
                                              k),
                                  "<wide>");
    FusionOptions fo;
    fo.sizes = decode_sizes(1);
    fo.quantize_prologue_rows = 200;
    const Lowered l = lower(m.graphs.at(0), fo);
    REQUIRE(per_call_kernels(l) == 1);
    const GeneratedKernel kern = matmul_family().emit(*l.graph, l.plan.groups.back(), one_row_emit(90));
    CHECK((kern.source.find("xq_x[") != std::string::npos) == (k == 14336));
    CHECK((kern.source.find("lj_load<lj_bf16, 8>(xq_src + c, hv);") != std::string::npos) == (k == 16384));
    auto r = jit::kernel_resources(kern, *rt::Target::parse("sm_90a"));
    INFO((r.ok() ? r->str() : r.message()));
    REQUIRE(r.ok());
    CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
    CHECK(!r->spills());
  }
}

TEST_CASE("row tails (opt-in): at one row the norm and quantize after o and the quantize after gate/up run in those GEMVs' last CTAs",
          "[codegen][fusion]") {
  for (const auto& [file, graph] : {std::pair{"llama3_8b_fp8.lj", "llama3_8b_fp8_decode"}, std::pair{"llama3_8b_w8a8.lj", "llama3_8b_w8a8_decode"}}) {
    INFO(file);
    const Graph g = example_graph(file, graph);
    auto tails_at = [&](int64_t b, bool on) {
      FusionOptions fo;
      fo.sizes = decode_sizes(b);
      fo.row_tails = on;
      return lower(g, fo);
    };
    const Lowered one = tails_at(1, true), off = tails_at(1, false), b2 = tails_at(2, true);
    CHECK(per_call_kernels(one) == 7);  // the default plan at one row: 9 (the rope_table in QKV)
    CHECK(per_call_kernels(off) == 9);
    CHECK(per_call_kernels(b2) == 10);  // two rows: no one-row work of any kind
    std::vector<const FusionGroup*> tails;
    for (const FusionGroup& grp : one.plan.groups)
      if (grp.matmul.tail_quantize >= 0) tails.push_back(&grp);
    REQUIRE(tails.size() == 2);
    // o's tail normalises h1 and quantizes it; gate/up's quantizes the SwiGLU row. Each source is
    // stored (the tail reads it back; the residual reads h1 too), the normed row never is.
    const Graph& lg = *one.graph;
    CHECK(tails[0]->matmul.tail_norm >= 0);
    CHECK(tails[1]->matmul.tail_norm < 0);
    for (const FusionGroup* t : tails) {
      CHECK(std::count(t->outputs.begin(), t->outputs.end(), t->matmul.tail_src) == 1);
      for (ValueId r : lg.node(t->matmul.tail_quantize).results) CHECK(std::count(t->outputs.begin(), t->outputs.end(), r) == 1);
    }
    CHECK(std::count(tails[0]->internal.begin(), tails[0]->internal.end(), lg.node(tails[0]->matmul.tail_norm).results[0]) == 1);
    for (const FusionGroup& grp : b2.plan.groups) CHECK(grp.matmul.tail_quantize < 0);
    // Both GEMV families run it (the SIMT one for fp8 on sm_80): a completion count, then the row
    // read back past L1; the GEMMs are refused by name, and so are too few warps for a 14336-wide
    // row in registers.
    for (const int sm : {90, 89, 80}) {
      const EmitOptions eo = one_row_emit(sm);
      for (const FusionGroup* t : tails) {
        const GeneratedKernel k = matmul_family().emit(lg, *t, eo);
        INFO(k.name << " (" << k.config << ") sm_" << sm);
        CHECK(k.config.rfind("gemv", 0) == 0);
        CHECK_THAT(k.source, Catch::Matchers::Contains("if (!lj_arrive_last(reinterpret_cast<unsigned*>(p_scratch), gridDim.x, threadIdx.x, 0, "));
        CHECK_THAT(k.source, Catch::Matchers::Contains("lj_load_cg<lj_bf16, V>(p_"));
        CHECK_THAT(k.source, Catch::Matchers::Contains("*reinterpret_cast<unsigned*>(p_scratch) = 0u;"));
      }
    }
    EmitOptions eo = one_row_emit(90);
    std::string bad;
    eo.matmul = parse_matmul_config("wgmma bm=64 bn=128 stages=6 gm=8", &bad);
    REQUIRE(eo.matmul);
    CHECK_THAT(emit_error(lg, *tails[0], eo), Catch::Matchers::Contains("quantizes the row it stores in its last CTA (a row tail)"));
    eo.matmul = parse_matmul_config("gemv mma u=4 warps=4", &bad);
    REQUIRE(eo.matmul);
    CHECK_THAT(emit_error(lg, *tails[1], eo), Catch::Matchers::Contains("the row tail holds a row of 14336 in registers"));
    CHECK(matmul_family().emit(lg, *tails[0], eo).config == "gemv mma u=4 warps=4");  // a 4096-wide row fits 128 threads
  }
}

TEST_CASE("row-scale prologues: the fp8 prefill GEMMs multiply the two scales themselves, four kernels fewer", "[codegen][fusion]") {
  const Graph g = fp8_layer("llama3_8b_fp8_prefill");
  Bindings t;
  t.set("T", 4096);
  const Lowered l = plan_at(g, t);
  EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = true;
  eo.hint = t;
  int products = 0;
  for (const FusionGroup& grp : l.plan.groups) {
    CHECK(grp.kind != GroupKind::Elementwise);  // the four scale products were the only ones
    if (grp.kind != GroupKind::Matmul) continue;
    REQUIRE(grp.matmul.row_scale_product >= 0);
    ++products;
    const GeneratedKernel k = matmul_family().emit(*l.graph, grp, eo);
    INFO(k.name << " (" << k.config << ")");
    CHECK(k.config.rfind("wgmma", 0) == 0);
    CHECK_THAT(k.source, Catch::Matchers::Contains("return lj_to_float(p_"));
  }
  CHECK(products == 4);
}
