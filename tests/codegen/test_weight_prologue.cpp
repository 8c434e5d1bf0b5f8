// 4-bit weight prologues: the group-wise dequantize of a matmul's W joins its group and the kernel
// reads the codes: at decode sizes the tensor-core GEMV (templates/layerjit/gemv_q4.cuh), at more
// rows the GEMMs, which dequantize W's tiles into shared memory (gemm_q4.cuh). The planner's
// decision, the configs each family offers, and every such kernel compiled for sm_80, sm_90 and
// sm_90a without spills, with the instructions it is built on in its PTX.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel.h"
#include "codegen/matmul_config.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"
#include "tests/codegen/codegen_graphs.h"

using namespace lj;

namespace {

Lowered planned(const Graph& g, std::optional<int64_t> rows, bool packed = false) {
  FusionOptions fo;
  fo.packed_weight_gemms = packed;
  if (rows) {
    for (const char* s : {"T", "B"}) fo.sizes.set(s, *rows);
    fo.sizes.set("C", 40);
  }
  return lower(g, fo);
}

const Graph& graph_named(const std::vector<Graph>& gs, const std::string& name) {
  auto it = std::find_if(gs.begin(), gs.end(), [&](const Graph& g) { return g.name() == name; });
  REQUIRE(it != gs.end());
  return *it;
}

bool has_note(const FusionGroup& grp, const std::string& text) {
  return std::any_of(grp.why.begin(), grp.why.end(), [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The first matmul group of a weight-prologue graph planned for `rows` rows, emitted for `arch`
// with `config`.
struct Q4Case {
  Lowered l;
  rt::Target target;
  EmitOptions eo;
  const FusionGroup& group() const { return l.plan.groups.at(0); }
  MatmulProblem problem() const { return matmul_problem(*l.graph, group(), eo); }
  GeneratedKernel kernel() const { return emit_group(*l.graph, group(), eo); }
};

Q4Case q4_case(const std::vector<Graph>& gs, const std::string& name, int64_t rows, const char* arch, const char* config) {
  auto target = rt::Target::parse(arch);
  REQUIRE(target.ok());
  Q4Case c{planned(graph_named(gs, name), rows), *target, {}};
  c.eo.sm = target->sm, c.eo.arch_specific = target->arch_specific;
  c.eo.hint.set("T", rows);
  c.eo.matmul = *parse_matmul_config(config, nullptr);
  return c;
}

// The INT4 example layer's prefill graph at T = 4096 with its weights kept as codes, lowered, and
// emit options for sm_90a: the Hopper GEMMs on codes at Llama sizes. Built in place (l refers to m).
struct Int4PrefillOnCodes {
  Module m = parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/examples/llama3_8b_int4.lj");
  rt::Target target = *rt::Target::parse("sm_90a");
  EmitOptions eo = emit_options();
  Lowered l = lower(m.graphs.at(0), fusion_options());
  EmitOptions emit_options() const {
    EmitOptions e;
    e.sm = target.sm, e.arch_specific = target.arch_specific;
    e.hint.set("T", 4096);
    return e;
  }
  FusionOptions fusion_options() const {
    FusionOptions fo;
    fo.packed_weight_gemms = true;
    fo.sizes = eo.hint;
    return fo;
  }
};

// A kernel's PTX (NVRTC's message if it does not compile).
std::string ptx_of(const GeneratedKernel& k, const rt::Target& target) {
  rt::CompileJob job = jit::compile_job(k, target);
  job.options.want_ptx = true;
  auto prog = rt::compile(job.source, job.options, job.target);
  INFO((prog.ok() ? "" : prog.message()));
  REQUIRE(prog.ok());
  return prog->ptx;
}

}  // namespace

TEST_CASE("at decode sizes a 4-bit weight's dequantize joins its matmul, elsewhere it is weight preparation unless weights stay packed", "[codegen]") {
  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  const Graph& g = graph_named(gs, "q4_packed");
  for (int64_t rows : {1, 7, 16}) {
    const Lowered l = planned(g, rows);
    REQUIRE(l.plan.groups.size() == 1);
    const FusionGroup& grp = l.plan.groups[0];
    CHECK(grp.kind == GroupKind::Matmul);
    CHECK(!grp.prepare);
    CHECK(grp.nodes.size() == 2);
    CHECK(grp.matmul.dequant >= 0);
    CHECK(grp.internal.size() == 1);  // %d never reaches memory
    CHECK(has_note(grp, "absorbed %d = dequantize (weight prologue)"));
  }
  // More rows, or rows not known: weight preparation (run once when the weights are bound) for the
  // bf16 kernels; with packed weights the same group as at decode sizes, for the GEMMs.
  for (std::optional<int64_t> rows : {std::optional<int64_t>(17), std::optional<int64_t>(4096), std::optional<int64_t>()}) {
    const Lowered l = planned(g, rows);
    REQUIRE(l.plan.groups.size() == 2);
    CHECK(l.plan.groups[0].prepare);
    CHECK(l.plan.groups[1].matmul.dequant < 0);
    CHECK(has_note(l.plan.groups[1], "not absorbed %d = dequantize"));
    const Lowered packed = planned(g, rows, true);
    REQUIRE(packed.plan.groups.size() == 1);
    CHECK(!packed.plan.groups[0].prepare);
    CHECK(packed.plan.groups[0].matmul.dequant >= 0);
  }
  // Every projection of the quantized decode layers at B = 1, including the QKV projection's RoPE epilogue.
  for (const char* name : {"q4_llama_u4_decode", "q4_llama_i4_decode"}) {
    const Lowered l = planned(graph_named(gs, name), 1);
    int prologues = 0;
    for (const FusionGroup& grp : l.plan.groups) {
      CHECK(!grp.prepare);
      prologues += grp.matmul.dequant >= 0;
    }
    CHECK(prologues == 4);
  }
}

TEST_CASE("a dequantize the 4-bit GEMV cannot read stays weight preparation, and the plan says why", "[codegen]") {
  Module m = parse_module(R"(
graph @q4_odd(%x: bf16[T, 34], %w: param u4[5, 34], %s: param bf16[5, 1]) {
  %d = dequantize(%w, %s) {dtype = bf16, group = 34}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_f32(%x: f32[T, 64], %w: param u4[5, 64], %s: param f32[5, 2]) {
  %d = dequantize(%w, %s) {dtype = f32, group = 32}
  %y = matmul(%x, %d)
  return %y
}
)", "<q4>");
  const Lowered odd = planned(m.graphs.at(0), 1);
  REQUIRE(odd.plan.groups.size() == 2);
  CHECK(has_note(odd.plan.groups[1], "not absorbed %d = dequantize: K = 34 and groups of 34 must be multiples of 32"));
  const Lowered f32 = planned(m.graphs.at(1), 1);
  REQUIRE(f32.plan.groups.size() == 2);
  CHECK(has_note(f32.plan.groups[1], "not absorbed %d = dequantize: it makes f32, not bf16 or f16"));
}

TEST_CASE("the tensor-core GEMV and the GEMMs run a 4-bit weight prologue, the SIMT GEMV does not", "[codegen]") {
  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  const Graph& g = graph_named(gs, "q4_packed");
  const Lowered l = planned(g, 1);
  EmitOptions eo;
  eo.sm = 90, eo.arch_specific = true;
  eo.hint.set("T", 1);
  const MatmulProblem p = matmul_problem(*l.graph, l.plan.groups[0], eo);
  CHECK(p.weight_codes);
  CHECK(default_matmul_config(p).str() == "gemv mma u=2 warps=4");
  std::vector<std::string> pruned;
  const std::vector<MatmulConfig> cs = matmul_candidates(p, &pruned);
  CHECK(cs.size() == 6);  // K = 416: u=4 leaves each warp one batch (refused), and so do the staged rings
  CHECK(std::any_of(pruned.begin(), pruned.end(), [](const std::string& r) { return r.find("fewer than two batches") != std::string::npos; }));
  CHECK(std::any_of(pruned.begin(), pruned.end(), [](const std::string& r) { return r.find("more steps in flight than a warp's share of 1") != std::string::npos; }));
  for (const MatmulConfig& c : cs) CHECK((c.family == MatmulConfig::Family::Gemv && c.tensor_cores));
  eo.matmul = *parse_matmul_config("mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6 gm=8", nullptr);
  CHECK(emit_group(*l.graph, l.plan.groups[0], eo).source.find("lj_q4<") != std::string::npos);
  eo.matmul = *parse_matmul_config("mma bm=64 bn=64 bk=16 wm=2 wn=2 stages=4 gm=8", nullptr);
  CHECK_THROWS_WITH(emit_group(*l.graph, l.plan.groups[0], eo), Catch::Contains("bk=16 with 4-bit codes (32 or 64"));
  eo.matmul = *parse_matmul_config("gemv mt=4 u=4 warps=8", nullptr);
  CHECK_THROWS_WITH(emit_group(*l.graph, l.plan.groups[0], eo),
                    Catch::Contains("which the tensor-core GEMV (gemv mma) and the GEMMs do, not the SIMT GEMV"));
  // At 200 rows: the GEMMs' tiles, the Hopper GEMM's default on sm_90a; none past 5 stages there.
  eo.hint.set("T", 200);
  const Lowered l200 = planned(g, 200, true);
  const MatmulProblem p200 = matmul_problem(*l200.graph, l200.plan.groups[0], eo);
  CHECK(default_matmul_config(p200).family == MatmulConfig::Family::Wgmma);
  const std::vector<MatmulConfig> big = matmul_candidates(p200);
  CHECK(std::none_of(big.begin(), big.end(), [](const MatmulConfig& c) { return c.family == MatmulConfig::Family::Gemv; }));
  CHECK(std::any_of(big.begin(), big.end(), [](const MatmulConfig& c) { return c.family == MatmulConfig::Family::Mma; }));
  for (const MatmulConfig& c : big) CHECK(c.stages <= (c.family == MatmulConfig::Family::Wgmma ? 5 : 8));
}

// The one spill a 4-bit candidate shares with its bf16 twin (the same config on a bf16 W spills as
// much): a 4-byte stack slot ptxas makes for sm_90 (not sm_80) in the one-warp-row 16 x 64 tile, the
// 17-32-row default.
int64_t known_q4_spill(const std::string& config, const char* arch) {
  return config == "mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6 gm=8" && std::string(arch) != "sm_80" ? 8 : 0;
}

TEST_CASE("every 4-bit weight-prologue kernel and tuner candidate compiles for sm_80, sm_90 and sm_90a without spills", "[codegen]") {
  int compiled = 0;
  std::set<std::pair<std::string, int>> built;  // (source, sm)
  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  auto check = [&](const Graph& g, int64_t rows, const std::vector<const char*>& archs, bool candidates) {
    const Lowered l = planned(g, rows, true);
    for (const FusionGroup& grp : l.plan.groups) {
      if (grp.matmul.dequant < 0) continue;
      for (const char* arch : archs) {
        auto target = rt::Target::parse(arch);
        REQUIRE(target.ok());
        EmitOptions eo;
        eo.sm = target->sm, eo.arch_specific = target->arch_specific;
        eo.hint.set("T", rows), eo.hint.set("B", rows), eo.hint.set("C", 40);
        // Every candidate on the first projection of the graph and the default on the rest.
        std::vector<MatmulConfig> configs{default_matmul_config(matmul_problem(*l.graph, grp, eo))};
        if (candidates && (grp.id == l.plan.groups.front().id || grp.id == 0)) configs = matmul_candidates(matmul_problem(*l.graph, grp, eo));
        for (const MatmulConfig& c : configs) {
          eo.matmul = c;
          const GeneratedKernel k = emit_group(*l.graph, grp, eo);
          // sm_90a's GEMVs and mma.sync GEMMs are sm_90's text for the same SM's ptxas: built once.
          if (!built.insert({k.source, target->sm}).second) continue;
          auto r = jit::kernel_resources(k, *target);
          INFO(g.name() << " at " << rows << " rows, " << k.name << " (" << k.config << ") for " << arch << ": "
                        << (r.ok() ? r->str() : r.message()));
          REQUIRE(r.ok());
          CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
          CHECK(r->spill_store_bytes + r->spill_load_bytes <= known_q4_spill(k.config, arch));
          ++compiled;
        }
      }
    }
  };
  // One row: the GEMV, every candidate on each graph's first projection, for every arch.
  for (const Graph& g : gs) check(g, 1, {"sm_80", "sm_90", "sm_90a"}, true);
  // 9 and 200 rows: the GEMMs' defaults on every graph (the mma.sync tiles, the Hopper GEMM at 200 on
  // sm_90a), and every candidate on the first graph (with a 32-element group and i8 zero points).
  for (int64_t rows : {9, 200}) {
    for (const Graph& g : gs) check(g, rows, {"sm_80", "sm_90a"}, false);
    check(gs.front(), rows, {"sm_80", "sm_90", "sm_90a"}, true);
  }
  CHECK(compiled >= 150);
}

// At Llama-3-8B sizes the dequantizing warps hold more (64-bit offsets, more units a thread): the
// small graphs above compiled without spills while the INT4 layer's GEMMs on codes at T = 4096
// spilled 20-148 bytes in the producer warpgroup's 72 registers (2026-12-07).
TEST_CASE("the INT4 prefill layer's GEMMs on codes at T = 4096 compile for sm_90a without spills, every candidate of its QKV", "[codegen]") {
  Int4PrefillOnCodes c4;
  const Lowered& l = c4.l;
  const rt::Target* target = &c4.target;
  EmitOptions& eo = c4.eo;
  REQUIRE(c4.m.graphs.at(0).name() == "llama3_8b_int4_prefill");
  int compiled = 0, groups = 0;
  for (const FusionGroup& grp : l.plan.groups) {
    if (grp.matmul.dequant < 0) continue;
    std::vector<MatmulConfig> configs{default_matmul_config(matmul_problem(*l.graph, grp, eo))};
    if (groups++ == 0) configs = matmul_candidates(matmul_problem(*l.graph, grp, eo));
    for (const MatmulConfig& c : configs) {
      eo.matmul = c;
      const GeneratedKernel k = emit_group(*l.graph, grp, eo);
      auto r = jit::kernel_resources(k, *target);
      INFO(k.name << " (" << k.config << "): " << (r.ok() ? r->str() : r.message()));
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());
      CHECK(!r->spills());
      ++compiled;
    }
  }
  CHECK(groups == 4);
  CHECK(compiled >= 8);
}

// The Hopper GEMM on codes, one tile per CTA: the tile's W rows' scales and zero points for all of
// K are copied into shared memory once (cp.async by the dequantizing warps) where they fit beside
// the ring, instead of read from L2 every k tile; a ring too big for them, or a persistent CTA (a
// new tile's constants while the last one's are read), keeps the L2 reads.
TEST_CASE("the Hopper GEMM on 4-bit codes stages its tile's scales and zero points in shared memory where they fit", "[codegen]") {
  Int4PrefillOnCodes c4;
  const Lowered& l = c4.l;
  const rt::Target* target = &c4.target;
  EmitOptions& eo = c4.eo;
  std::vector<const FusionGroup*> q4;
  for (const FusionGroup& grp : l.plan.groups)
    if (grp.matmul.dequant >= 0) q4.push_back(&grp);
  REQUIRE(q4.size() == 4);  // qkv, o, gate/up (K = 4096: 32 groups), down (K = 14336: 112)
  auto emit = [&](const FusionGroup& grp, const char* config) {
    eo.matmul = *parse_matmul_config(config, nullptr);
    return emit_group(*l.graph, grp, eo);
  };
  // bf16 scales, u4 zero points: 128 rows x 32 groups x 2 bytes, and half a byte each.
  const int ring4 = 1024 + 4 * (256 + 128) * 128 + 4 * 128 * 32;
  const GeneratedKernel qkv = emit(*q4[0], "wgmma bm=256 bn=128 stages=4 gm=8");
  CHECK(qkv.source.find("/*STAGED*/ 128> Q;") != std::string::npos);
  CHECK(qkv.launch.shared_bytes == ring4 + 128 + 128 * 32 * 2 + 128 * 32 / 2);
  const std::string ptx = ptx_of(qkv, *target);
  CHECK(count(ptx, "cp.async.cg.shared.global") >= 2);  // the scales' and the zero points' runs
  CHECK(count(ptx, "cp.async.wait_group 0") == 1);
  // down, 3 stages: 112 groups a row fit; with 4 stages they would not (250 KB), so the L2 reads stay.
  const GeneratedKernel down3 = emit(*q4[3], "wgmma bm=256 bn=128 stages=3 gm=8");
  CHECK(down3.source.find("/*STAGED*/ 128> Q;") != std::string::npos);
  CHECK(down3.launch.shared_bytes == 1024 + 3 * (256 + 128) * 128 + 3 * 128 * 32 + 128 + 128 * 112 * 2 + 128 * 112 / 2);
  const GeneratedKernel down4 = emit(*q4[3], "wgmma bm=256 bn=128 stages=4 gm=8");
  CHECK(down4.source.find("STAGED") == std::string::npos);
  CHECK(down4.launch.shared_bytes == ring4 + 3 * 4 * 8);
  CHECK(ptx_of(down4, *target).find("cp.async.cg.shared.global") == std::string::npos);
  const GeneratedKernel pp = emit(*q4[1], "wgmma bm=128 bn=128 stages=4 gm=8 pingpong");
  CHECK(pp.source.find("STAGED") == std::string::npos);
  for (const GeneratedKernel* k : {&qkv, &down3}) {
    auto r = jit::kernel_resources(*k, *target);
    INFO(k->name << " (" << k->config << "): " << (r.ok() ? r->str() : r.message()));
    REQUIRE(r.ok());
    CHECK(!r->spills());
  }
}

// W in registers (`wreg`): the product transposed, each consumer warpgroup's A fragments
// dequantized from the slot's codes, wgmma's RS form with the x tile as B; no W tile, no
// dequantizing warps (the producer warpgroup keeps 40 registers, the consumers 232).
TEST_CASE("the Hopper GEMM on 4-bit codes with W in registers: its rules, source, PTX and resources", "[codegen]") {
  std::string error;
  auto wreg = parse_matmul_config("wgmma bm=256 bn=128 stages=5 gm=8 wreg", &error);
  REQUIRE(wreg);
  CHECK(wreg->wreg);
  CHECK(wreg->str() == "wgmma bm=256 bn=128 stages=5 gm=8 wreg");
  CHECK(!parse_matmul_config("gemv mma u=2 warps=4 wreg", &error));  // only a wgmma config has it
  MatmulProblem p;
  p.m = 4096, p.n = 4096, p.k = 4096, p.sm = 90, p.arch_specific = true, p.tma = true;
  CHECK_THAT(reject_reason(*wreg, p), Catch::Contains("not made from codes"));
  p.weight_codes = true, p.code_constant_row_bytes = 32 * 2 + 16;
  CHECK(reject_reason(*wreg, p).empty());
  // The default on codes where the pruner takes it (measured 1.36-1.45x the 256 x 128 SS tile on an
  // H100); where it does not, that tile.
  CHECK(default_matmul_config(p).str() == "wgmma bm=256 bn=128 stages=4 gm=8 wreg");
  p.row_scaled = true;
  CHECK(default_matmul_config(p).str() == "wgmma bm=256 bn=128 stages=4 gm=8");
  p.row_scaled = false;
  CHECK(wreg_shared_bytes(*wreg, 80) == 1024 + 5 * (256 * 128 + 128 * 32) + 128 + 128 * 80);
  auto w128 = parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 wreg", &error);
  CHECK_THAT(reject_reason(*w128, p), Catch::Contains("256 x 128 tiles"));
  p.row_scaled = true;
  CHECK_THAT(reject_reason(*wreg, p), Catch::Contains("per-row scales"));
  p.row_scaled = false, p.code_constant_row_bytes = 448 * 2 + 224;  // groups of 32 at K = 14336: 143 KiB
  CHECK_THAT(reject_reason(*wreg, p), Catch::Contains("KiB of shared memory"));

  Int4PrefillOnCodes c4;
  const Lowered& l = c4.l;
  const rt::Target* target = &c4.target;
  EmitOptions& eo = c4.eo;
  int emitted = 0;
  for (const FusionGroup& grp : l.plan.groups) {
    if (grp.matmul.dequant < 0) continue;
    eo.matmul.reset();
    const MatmulProblem prob = matmul_problem(*l.graph, grp, eo);
    const std::vector<MatmulConfig> cands = matmul_candidates(prob);
    CHECK(std::count_if(cands.begin(), cands.end(), [](const MatmulConfig& c) { return c.wreg; }) == 2);  // 4 and 5 stages
    eo.matmul = *wreg;
    const GeneratedKernel k = emit_group(*l.graph, grp, eo);
    INFO(k.name);
    CHECK(k.source.find("/*BM*/ 256, Q, /*CLUSTER*/ 1, /*WREG*/ true> Gemm;") != std::string::npos);
    const bool down = prob.k == 14336;
    // bf16 scales and u4 zero points of 128 rows: 32 groups a row (112 for down).
    CHECK(k.launch.shared_bytes == 1024 + 5 * (256 * 128 + 128 * 32) + 128 + 128 * (down ? 112 * 2 + 56 : 32 * 2 + 16));
    const std::string ptx = ptx_of(k, *target);
    CHECK(count(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 4);  // one per k16 step of a k tile
    CHECK(ptx.find("setmaxnreg.dec.sync.aligned.u32 40;") != std::string::npos);
    CHECK(ptx.find("setmaxnreg.inc.sync.aligned.u32 232;") != std::string::npos);
    CHECK(ptx.find("fence.proxy.async") == std::string::npos);  // no W tile written for the async proxy
    CHECK(ptx.find("prmt.b32") != std::string::npos);
    // The codes' map unswizzled (the 32-byte swizzle measured 5-7 % slower: emit_gemm.cpp), the x
    // tile's 128 as everywhere.
    for (const KernelParam& prm : k.params)
      if (prm.kind == KernelParam::Kind::TensorMap) CHECK(prm.tmap.swizzle_bytes == (prm.tmap.box_cols == 32 ? 0 : 128));
    auto r = jit::kernel_resources(k, *target);
    INFO((r.ok() ? r->str() : r.message()));
    REQUIRE(r.ok());
    CHECK(!r->spills());
    // No wgmma serialized (C7514) in o and down either: their residual reads, 8 chunks at a time,
    // walk the batches from the thread's first chunk (emit_gemm_epilogue.cpp; counted to a constant,
    // ptxas serialized them).
    CHECK(!r->performance_loss());
    const bool residual = grp.matmul.pointwise.size() > 0 && !prob.glu && !prob.rope;
    if (residual) CHECK(k.source.find("for (int i0 = Gemm::epi_thread(); i0 < 256 * CHUNKS; i0 += BATCH * Gemm::EPI_THREADS)") != std::string::npos);
    ++emitted;
  }
  CHECK(emitted == 4);
}

TEST_CASE("the 4-bit GEMV's PTX: bf16 mma.sync on dequantized codes, packed 16-bit FMAs where the scales have x's type", "[codegen]") {
  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  auto ptx = [&](const char* name, const char* arch) {
    const Q4Case c = q4_case(gs, name, 1, arch, "gemv mma u=2 warps=4");  // U = 2: the counts below
    return ptx_of(c.kernel(), c.target);
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const std::string packed = ptx("q4_packed", arch);
    // Groups of 32: U = 2 k steps of 8 mmas, unrolled; two packed FMAs per 16-bit operand register
    // (q - z, then * s).
    CHECK(count(packed, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 16);
    CHECK(count(packed, "fma.rn.bf16x2") == 128);
    CHECK(count(packed, "prmt.b32") >= 32);  // x's pairs matched to the codes' (e_i, e_i+4)
    CHECK(count(packed, "cvt.f32.f16") == 0);
    // Groups of 128: one packed FMA per register (q - z, exact), each step's sums scaled in f32.
    const std::string f16 = ptx("q4_f16", arch);
    CHECK(count(f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 16);
    CHECK(count(f16, "fma.rn.f16x2") == 64);  // 2 steps x 16 words x 2 pairs
    CHECK(count(f16, "fma.rn.f32") >= 8);
    // The same with every load unpredicated (EVEN), and with i4 codes and f16 scales on bf16 x.
    for (const char* name : {"q4_even", "q4_even_i4"}) {
      const std::string even = ptx(name, arch);
      CHECK(count(even, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 16);
      CHECK(count(even, "fma.rn.bf16x2") == 64);
      CHECK(count(even, "cvt.rn.bf16x2.f32") == 0);
      CHECK(count(even, "bra.uni") + count(even, "@%p") < 12);  // no per-load branches
    }
    // f32 scales: (q - z) * s in f32, packed to bf16 pairs as the reference rounds.
    const std::string f32 = ptx("q4_signed", arch);
    CHECK(count(f32, "cvt.rn.bf16x2.f32") >= 64);
    CHECK(count(f32, "fma.rn.bf16x2") == 0);
    // Each pair of nibbles masked and given its exponent in one LOP3 (lj_and_xor): 2 steps x 2 rows x
    // 4 words x 4 pairs; the compiler made two of each when it was written in C.
    CHECK(count(packed, "lop3.b32") == 64);
    CHECK(count(f16, "lop3.b32") == 64);
  }
}

TEST_CASE("the 4-bit GEMV loads a batch's scales and zero points of a row at once where each k step is one group",
          "[codegen]") {
  // G = 128 and whole batches per warp (EVEN): a batch's U groups are consecutive and aligned in each
  // row, one load per row (a and b) for its scales and one for its zero points; per batch also U
  // 16-byte loads of codes per row and 4 U of x. With U = 1 the same counts come from one step.
  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  struct Want {
    const char* graph;
    const char* config;
    int u;
    const char* scales;  // the load of one row's scales
    const char* zeros;   // of its zero points ("": none)
  };
  for (const Want& w : {Want{"q4_k4096", "gemv mma u=4 warps=4", 4, "ld.global.nc.v2.u32", "ld.global.nc.v2.u8"},  // bf16, u4
                        Want{"q4_k4096", "gemv mma u=2 warps=8", 2, "ld.global.nc.v2.u16", "ld.global.nc.u8"},
                        Want{"q4_run_i8", "gemv mma u=4 warps=4", 4, "ld.global.nc.v2.u32", "ld.global.nc.u32"},  // f16, i8
                        Want{"q4_run_i8", "gemv mma u=2 warps=4", 2, "ld.global.nc.v2.u16", "ld.global.nc.v2.u8"},
                        Want{"q4_run_i8", "gemv mma u=1 warps=4", 1, "ld.global.nc.u16", "ld.global.nc.u8"},
                        Want{"q4_run_f32", "gemv mma u=2 warps=4", 2, "ld.global.nc.v2.u32", ""},  // f32, i4 (no zeros)
                        Want{"q4_run_f32", "gemv mma u=4 warps=4", 4, "ld.global.nc.v4.u32", ""}})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      INFO(w.graph << ", " << w.config << ", " << arch);
      const Q4Case q = q4_case(gs, w.graph, 1, arch, w.config);
      const GeneratedKernel k = q.kernel();
      REQUIRE(k.source.find("constexpr bool EVEN = true") != std::string::npos);
      const std::string ptx = ptx_of(k, q.target);
      const int runs = std::string(w.scales) == "ld.global.nc.v4.u32" ? 2 : 0;  // f32 scales: codes' and x's form
      CHECK(count(ptx, "ld.global.nc.v4.u32") == static_cast<size_t>(2 * w.u + 4 * w.u + runs));
      if (!runs) CHECK(count(ptx, w.scales) == 2);
      if (*w.zeros) CHECK(count(ptx, w.zeros) == 2);
    }
  // Groups of 32 (q4_packed: K = 416, the last step past K): one load of a scale per step and row.
  const Q4Case q = q4_case(gs, "q4_packed", 1, "sm_90a", "gemv mma u=2 warps=4");
  CHECK(count(ptx_of(q.kernel(), q.target), "ld.global.nc.u16") >= 4);
}

TEST_CASE("the 4-bit GEMV with staged codes: cp.async into each warp's ring, one step's 8 mmas per iteration, its text and rules",
          "[codegen]") {
  // The text: "stages=S" in place of "u=U", never both.
  const std::optional<MatmulConfig> c = parse_matmul_config("gemv mma stages=8 warps=4", nullptr);
  REQUIRE(c.has_value());
  CHECK(c->code_stages == 8);
  CHECK(c->str() == "gemv mma stages=8 warps=4");
  CHECK(parse_matmul_config(c->str(), nullptr) == c);
  std::string error;
  CHECK_FALSE(parse_matmul_config("gemv mma u=2 stages=4 warps=4", &error));
  CHECK_THAT(error, Catch::Contains("u (k steps loaded into registers) and stages (k steps staged in shared memory) are alternatives"));
  CHECK_FALSE(parse_matmul_config("gemv mt=2 stages=4", &error));
  CHECK_THAT(error, Catch::Contains("unknown key 'stages' for the gemv family"));

  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  // The rules: 2-16 steps, at most 32 KiB of ring per CTA, no deeper than a share.
  const MatmulProblem p = q4_case(gs, "q4_k4096", 1, "sm_90a", "gemv mma stages=8 warps=4").problem();
  CHECK(reject_reason(*parse_matmul_config("gemv mma stages=8 warps=4", nullptr), p).empty());
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma stages=16 warps=4", nullptr), p), Catch::Contains("64 KiB of staged codes per CTA (at most 32)"));
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma stages=1 warps=4", nullptr), p), Catch::Contains("stages=1 (2 to 16"));
  MatmulProblem short_k = p;
  short_k.k = 2048;  // 16 steps: 4 per warp
  CHECK_THAT(reject_reason(*c, short_k), Catch::Contains("more steps in flight than a warp's share of 4 (K = 2048)"));
  MatmulProblem fp8 = p;
  fp8.weight_codes = false, fp8.dtype = DType::F8E4M3;
  CHECK(reject_reason(*c, fp8).empty());  // fp8 stages W and x (test_kernel_spills.cpp)
  const std::vector<MatmulConfig> cs = matmul_candidates(p);
  CHECK(std::count_if(cs.begin(), cs.end(), [](const MatmulConfig& m) { return m.code_stages > 0; }) == 3);

  // The PTX: the codes of a step come through cp.async (2 per lane: rows a and b; S - 1 steps ahead
  // before the loop, one step in it) and ld.shared, never ld.global; one step's 8 mmas per iteration.
  for (const char* name : {"q4_k4096", "q4_staged_odd"})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      INFO(name << " for " << arch);
      const Q4Case q = q4_case(gs, name, 1, arch, "gemv mma stages=4 warps=4");
      const GeneratedKernel k = q.kernel();
      CHECK(k.source.find("__shared__ lj_q4_ring<S> ring[WARPS];") != std::string::npos);
      CHECK(k.source.find("lj_gemv_q4_share_staged<") != std::string::npos);
      CHECK(k.source.find(std::string("constexpr bool EVEN = ") + (std::string(name) == "q4_k4096" ? "true" : "false")) != std::string::npos);
      const std::string ptx = ptx_of(k, q.target);
      CHECK(count(ptx, "cp.async.cg.shared.global") == 2 * 3 + 2);
      CHECK(count(ptx, "cp.async.wait_group 3") == 1);
      CHECK(count(ptx, "cp.async.wait_group 0") == 1);
      CHECK(count(ptx, "ld.shared.v4") >= 2);
      CHECK(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 8);
      auto r = jit::kernel_resources(k, q.target);
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      INFO(r->str());
      CHECK(!r->spills());
      CHECK(r->registers <= 96);  // the codes no longer wait in registers (the u=4 kernel: 124)
    }
}

TEST_CASE("the 4-bit GEMV at 9-16 rows: mt=16 multiplies each dequantized fragment by two chunks of x, the codes read once",
          "[codegen]") {
  const std::optional<MatmulConfig> c = parse_matmul_config("gemv mma u=2 warps=4 mt=16", nullptr);
  REQUIRE(c.has_value());
  CHECK(c->rows_per_pass == 16);
  CHECK(c->str() == "gemv mma u=2 warps=4 mt=16");
  CHECK(parse_matmul_config("gemv mma stages=4 warps=4 mt=16", nullptr)->str() == "gemv mma stages=4 warps=4 mt=16");
  CHECK(parse_matmul_config("gemv mma u=2 warps=4", nullptr)->rows_per_pass == 8);

  const std::vector<Graph> gs = lj_test::weight_prologue_graphs();
  MatmulProblem p = q4_case(gs, "q4_k4096", 16, "sm_90a", "gemv mma u=2 warps=4 mt=16").problem();
  CHECK(reject_reason(*c, p).empty());
  CHECK_THAT(reject_reason(*parse_matmul_config("gemv mma u=2 warps=4 mt=32", nullptr), p), Catch::Contains("mt=32 (8 or 16 rows"));
  MatmulProblem fp8 = p;
  fp8.weight_codes = false, fp8.dtype = DType::F8E4M3;
  CHECK_THAT(reject_reason(*c, fp8), Catch::Contains("take 8 rows of x per pass (mt=16 is the 4-bit GEMV's)"));
  // Candidates: three at 9-16 rows, none at 8 or fewer (a pass over more rows than exist).
  auto sixteen = [](const std::vector<MatmulConfig>& cs) {
    return std::count_if(cs.begin(), cs.end(), [](const MatmulConfig& m) { return m.rows_per_pass == 16; });
  };
  CHECK(sixteen(matmul_candidates(p)) == 3);
  MatmulProblem nine = p, eight = p;
  nine.m = 9, eight.m = 8;
  CHECK(sixteen(matmul_candidates(nine)) == 3);
  CHECK(sixteen(matmul_candidates(eight)) == 0);

  // Registers, staged or not, groups of 128 (scaled) or 32 (rounded, K past the last step): no spills.
  for (const char* name : {"q4_k4096", "q4_staged_odd", "q4_swiglu"})
    for (const char* config : {"gemv mma u=2 warps=4 mt=16", "gemv mma u=1 warps=4 mt=16", "gemv mma stages=4 warps=4 mt=16"})
      for (const char* arch : {"sm_80", "sm_90a"}) {
        const Q4Case q = q4_case(gs, name, 16, arch, config);
        if (!reject_reason(*q.eo.matmul, q.problem()).empty()) continue;  // (a ring deeper than K's share)
        INFO(name << " " << config << " for " << arch);
        const GeneratedKernel k = q.kernel();
        CHECK(k.source.find("lj_q4_xs<lj_bf16, 2>{{xr, xr2}}") != std::string::npos);
        CHECK(k.source.find("for (int e = threadIdx.x; e < ") != std::string::npos);
        const std::string ptx = ptx_of(k, q.target);
        if (std::string(name) == "q4_k4096" && std::string(config) == "gemv mma u=2 warps=4 mt=16")
          CHECK(count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 2 * 2 * 8);  // U steps x chunks x 8
        auto r = jit::kernel_resources(k, q.target);
        REQUIRE(r.ok());
        CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
        INFO(r->str());
        CHECK(!r->spills());
      }
}

TEST_CASE("the 4-bit GEMV with the rms_norm folded in: x times the norm's weight on load, its squares on the tensor cores",
          "[codegen][fusion]") {
  Graph g;
  for (Graph& x : parse_file(std::string(LAYERJIT_SOURCE_DIR) + "/examples/llama3_8b_int4.lj").graphs)
    if (x.name() == "llama3_8b_int4_decode") g = std::move(x);
  REQUIRE(g.name() == "llama3_8b_int4_decode");
  auto plan = [&](int64_t b, bool prologues) {
    FusionOptions fo;
    fo.sizes.set("B", b), fo.sizes.set("C", 4096);
    fo.one_row_prologues = fo.norm_prologues = prologues;
    return lower(g, fo);
  };
  auto normed = [](const Lowered& l) {
    int n = 0, rows = 0;
    for (const FusionGroup& grp : l.plan.groups) n += grp.matmul.x_norm >= 0, rows += grp.kind == GroupKind::RowReduce;
    return std::pair{n, rows};
  };
  // B = 1 with norm prologues (opt-in): both norms join the projections that read them (QKV,
  // gate/up), five kernels in all. Two rows, without them, or by default: the norms keep their row
  // kernels.
  const Lowered one = plan(1, true);
  CHECK(one.plan.groups.size() == 5);
  CHECK(normed(one) == std::pair{2, 0});
  CHECK(normed(plan(2, true)) == std::pair{0, 2});
  CHECK(normed(plan(1, false)) == std::pair{0, 2});
  FusionOptions by_default;
  by_default.sizes.set("B", 1), by_default.sizes.set("C", 4096);
  CHECK(normed(lower(g, by_default)) == std::pair{0, 2});

  const rt::Target sm90a = *rt::Target::parse("sm_90a");
  EmitOptions eo;
  eo.sm = 90, eo.arch_specific = true;
  eo.hint.set("B", 1), eo.hint.set("C", 4096);
  for (const FusionGroup& grp : one.plan.groups) {
    if (grp.matmul.x_norm < 0) continue;
    const Node& norm = one.graph->node(grp.matmul.x_norm);
    const std::string src = one.graph->value(norm.operands[0]).name, w = one.graph->value(norm.operands[1]).name;
    INFO("group " << grp.id << ": rms_norm(%" << src << ", %" << w << ")");
    CHECK(has_note(grp, "one row: the 4-bit GEMV multiplies the %" + src + " it loads by %" + w));
    // Only the tensor-core GEMV at 8 rows per pass: every candidate is one, the GEMMs are refused by name.
    const MatmulProblem p = matmul_problem(*one.graph, grp, eo);
    CHECK(p.norm_in_kernel);
    for (const MatmulConfig& c : matmul_candidates(p)) {
      INFO(c.str());
      CHECK((c.family == MatmulConfig::Family::Gemv && c.tensor_cores && c.rows_per_pass == 8));
    }
    MatmulConfig gemm = *parse_matmul_config("mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6", nullptr);
    CHECK_THAT(reject_reason(gemm, p), Catch::Contains("normalises x (its rms_norm, a one-row prologue)"));
    // The kernel reads the norm's input and weight, never %h, and scales the sums by the row's factor.
    const GeneratedKernel k = emit_group(*one.graph, grp, eo);
    CHECK(k.config == "gemv mma u=2 warps=4");
    CHECK_THAT(k.source, Catch::Contains(fmt::format("const lj_q4_xs<lj_bf16, 1, true> xs{{{{xr}}, p_{}, {{}}}};", w)));
    CHECK_THAT(k.source, Catch::Contains("const float rn = rsqrtf(ss * (1.f / (float)K) + EPS);"));
    CHECK(k.source.find("p_" + one.graph->value(norm.results[0]).name + " ") == std::string::npos);
    // Twice the unnormed kernel's mmas (x's squares: two per word of codes) and four packed
    // multiplies per word more (x g), under the 128-register cap without spills.
    const Lowered apart = plan(1, false);
    const FusionGroup* twin = nullptr;
    for (const FusionGroup& a : apart.plan.groups)
      if (a.kind == GroupKind::Matmul && a.matmul.dequant >= 0 &&
          apart.graph->node(a.matmul.dequant).operands[0] == one.graph->node(grp.matmul.dequant).operands[0])
        twin = &a;
    REQUIRE(twin != nullptr);
    EmitOptions same = eo;
    same.matmul = parse_matmul_config("gemv mma u=2 warps=4", nullptr);
    const std::string ptx = ptx_of(k, sm90a), twin_ptx = ptx_of(emit_group(*apart.graph, *twin, same), sm90a);
    const std::string mma = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    CHECK(count(ptx, mma) == 2 * count(twin_ptx, mma));
    CHECK(count(ptx, "fma.rn.bf16x2") == count(twin_ptx, "fma.rn.bf16x2") + 2 * 4 * 4);  // U steps x 4 words x 4 pairs
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      auto r = jit::kernel_resources(k, *rt::Target::parse(arch));
      REQUIRE(r.ok());
      CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
      INFO(arch << ": " << r->str());
      CHECK(!r->spills());
      CHECK(r->stack_bytes == 0);
    }
  }
}
