// Every kernel generated for the Llama layers and the odd-shaped test graphs compiles with NVRTC
// for sm_80, sm_90 and sm_90a (no GPU needed), fused and unfused; the source is deterministic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "codegen/device_headers.h"
#include "codegen/attention_plan.h"
#include "codegen/kernel.h"
#include "compiler/fusion/tensor_layout.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"
#include "tests/codegen/codegen_graphs.h"

using namespace lj;

namespace {
// The fp8 GEMM as the IR spells its scales: a per-token row scale and a per-channel weight scale on
// the f32 sums, one rounding to bf16; at the Llama-3-8B QKV shape.
constexpr const char* kFp8Projection = R"(
graph @fp8_qkv(%x: f8e4m3[M, 4096], %w: param f8e4m3[6144, 4096], %xs: f32[M], %ws: param f32[6144]) {
  %acc = matmul(%x, %w, %xs) {out_dtype = f32}
  %y = mul(%acc, %ws)
  %o = cast(%y) {dtype = bf16}
  return %o
}
)";

// Compiles the jobs on every core; each must build a cubin, a failure named by `what` with NVRTC's log.
void compile_every_one(const std::vector<rt::CompileJob>& jobs, const std::vector<std::string>& what) {
  auto results = rt::compile_parallel(jobs);
  REQUIRE(results.size() == jobs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(what[i] << ":\n" << (results[i].ok() ? "" : results[i].message()));
    CHECK(results[i].ok());
    if (results[i].ok()) {
      CHECK(!results[i]->cubin.empty());
      // ptxas's notes (setmaxnreg ignored, wgmma serialized: runtime/kernel_resources.h) on no kernel.
      INFO(results[i]->log);
      CHECK(results[i]->log.find("Performance Loss") == std::string::npos);
    }
  }
}

// sm_90 builds a source again only where its build can differ from sm_80's. The device headers
// branch on __CUDA_ARCH__ in a few places, which "the device headers branch on the architecture in
// the places compile_all knows" pins: programmatic dependent launch (>= 900, the wait at the top of
// every kernel, the trigger after it in the row kernels), the fp8 conversions (>= 890) and the fp8 tensor-core GEMV (>= 890); the 4-bit
// templates' (>= 800) and wgmma's (sm_90a) guards read the same on both targets. So sm_90 builds the
// first kernel of each group kind (the headers parsed and PDL's path compiled for sm_90), every
// kernel that touches fp8, and the tensor-core GEMVs: 25 of the 352 distinct kernels, where building
// every kernel of both plans for both targets took CI ~190 s of NVRTC (now ~70).
bool differs_on_sm90(const std::string& source) {
  return source.find("e4m3") != std::string::npos || source.find("e5m2") != std::string::npos ||
         source.find("layerjit/gemv_mma.cuh") != std::string::npos;
}

// Every kernel of the odd-shaped graphs' fused (fuse) or unfused plans for sm_80, and for sm_90 as
// above. The unfused plans repeat many of the fused plans' kernels (an unfused elementwise op is the
// same kernel in both): the unfused sweep builds only the ones the fused plans do not have.
void compile_all(bool fuse) {
  std::set<std::string> fused_sources;
  if (!fuse)
    for (const Graph& g : lj_test::codegen_graphs())
      for (const FusionGroup& grp : plan_fusion(g, FusionOptions{true}).groups)
        if (has_emitter(grp.kind)) fused_sources.insert(emit_group(g, grp).source);
  std::set<std::string> seen;
  std::set<GroupKind> kinds_on_sm90;
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> what;
  int on_sm90 = 0;
  for (const Graph& g : lj_test::codegen_graphs()) {
    FusionPlan plan = plan_fusion(g, FusionOptions{fuse});
    for (const FusionGroup& grp : plan.groups) {
      if (!has_emitter(grp.kind)) continue;
      GeneratedKernel k = emit_group(g, grp);
      CHECK(emit_group(g, grp).source == k.source);  // deterministic
      if (fused_sources.count(k.source) || !seen.insert(k.source).second) continue;
      const bool sm90 = kinds_on_sm90.insert(grp.kind).second || differs_on_sm90(k.source);
      on_sm90 += sm90;
      for (const char* arch : {"sm_80", "sm_90"}) {
        if (std::string_view(arch) == "sm_90" && !sm90) continue;
        auto target = rt::Target::parse(arch);
        REQUIRE(target.ok());
        jobs.push_back(jit::compile_job(k, *target));
        what.push_back(fmt::format("{} group {} ({}) for {}", g.name(), grp.id, k.name, arch));
      }
    }
  }
  CHECK(seen.size() > (fuse ? 100u : 150u));
  CHECK(on_sm90 >= 8);
  WARN(fmt::format("{} kernels, {} of them built for sm_90 too", seen.size(), on_sm90));
  compile_every_one(jobs, what);
}
}  // namespace

TEST_CASE("every kernel and every pruned matmul config is generated, deterministically", "[codegen]") {
  // The emitters alone (no NVRTC): cheap enough for the sanitizer build, which skips the compile
  // sweeps below (their time is NVRTC's, which the sanitizers do not instrument).
  int emitted = 0;
  for (const Graph& g : lj_test::codegen_graphs())
    for (bool fuse : {true, false})
      for (const FusionGroup& grp : plan_fusion(g, FusionOptions{fuse}).groups) {
        if (!has_emitter(grp.kind)) continue;
        INFO(g.name() << " group " << grp.id);
        CHECK(emit_group(g, grp).source == emit_group(g, grp).source);
        ++emitted;
      }
  for (const auto& [g, sym, m] : {std::tuple{llama_decode(LlamaConfig::llama3_8b()), "B", 1},
                                  std::tuple{llama_prefill(LlamaConfig::llama3_8b()), "T", 4096}})
    for (const FusionGroup& grp : plan_fusion(g).groups) {
      if (grp.kind != GroupKind::Matmul) continue;
      for (bool hopper : {false, true}) {  // sm_90 and sm_90a candidate sets
        EmitOptions eo;
        eo.arch_specific = hopper;
        eo.hint.set(sym, m);
        for (const MatmulConfig& c : matmul_candidates(matmul_problem(g, grp, eo))) {
          eo.matmul = c;
          CHECK(!emit_group(g, grp, eo).source.empty());
          ++emitted;
        }
      }
    }
  // fp8 on sm_90a: every Hopper candidate of a scaled fp8 projection (the fp8 compile sweep below
  // builds the same kernels with NVRTC).
  Module fp8 = parse_module(kFp8Projection, "<fp8>");
  const Graph& f = fp8.graphs.at(0);
  const FusionPlan fplan = plan_fusion(f);
  const FusionGroup& fg = fplan.groups.at(0);
  int fp8_wgmma = 0;
  for (int64_t rows : {128, 4096}) {
    EmitOptions eo;
    eo.sm = 90, eo.arch_specific = true;
    eo.hint.set("M", rows);
    for (const MatmulConfig& c : matmul_candidates(matmul_problem(f, fg, eo))) {
      if (c.family != MatmulConfig::Family::Wgmma) continue;
      eo.matmul = c;
      CHECK(emit_group(f, fg, eo).source.find("lj_e4m3") != std::string::npos);
      ++fp8_wgmma;
    }
  }
  CHECK(fp8_wgmma >= 20);
  CHECK(emitted > 100);
}

TEST_CASE("every fused kernel compiles for sm_80 and sm_90", "[codegen]") { compile_all(true); }

TEST_CASE("every unfused kernel compiles for sm_80 and sm_90", "[codegen]") { compile_all(false); }

TEST_CASE("the device headers are embedded", "[codegen]") {
  const auto& h = codegen_device_headers();
  std::vector<std::string> names;
  for (const auto& [name, text] : h) {
    names.push_back(name);
    CHECK(text.find("#pragma once") != std::string::npos);
  }
  CHECK(std::is_sorted(names.begin(), names.end()));  // a stable order: the cache key covers them
  for (const char* want : {"layerjit/gemm.cuh", "layerjit/math.cuh", "layerjit/mma.cuh", "layerjit/reduce.cuh",
                           "layerjit/types.cuh", "layerjit/vec.cuh"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
}

TEST_CASE("the device headers branch on the architecture in the places compile_all knows", "[codegen]") {
  // compile_all builds for sm_90 only the kernels whose build can differ from sm_80's (differs_on_sm90,
  // and the first kernel of each group kind). A new __CUDA_ARCH__ branch in a header must be added
  // to that reasoning, and to this list. (gemv_mma.cuh's two, fp8 mma on sm_89+ and the bulk-fed
  // GEMV on sm_90+: differs_on_sm90 builds every kernel including it for sm_90.)
  std::map<std::string, int> branches;
  for (const auto& [name, text] : codegen_device_headers())
    for (size_t at = text.find("__CUDA_ARCH__"); at != std::string::npos; at = text.find("__CUDA_ARCH__", at)) {
      ++branches[name];  // one per line
      at = text.find('\n', at);
    }
  const std::map<std::string, int> known{{"layerjit/gemm_q4.cuh", 1}, {"layerjit/gemv_mma.cuh", 2},
                                         {"layerjit/gemv_q4.cuh", 1}, {"layerjit/types.cuh", 5},
                                         {"layerjit/wgmma.cuh", 1}};
  for (const auto& [name, n] : branches) {
    INFO(name << " names __CUDA_ARCH__ on " << n << " lines");
    CHECK(known.count(name));
    CHECK(n == (known.count(name) ? known.at(name) : 0));
  }
  CHECK(branches.size() == known.size());
}

TEST_CASE("a directory of device headers replaces the embedded ones of the same name", "[codegen]") {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("lj_headers_{}", std::random_device{}());
  std::filesystem::create_directories(dir / "layerjit");
  {
    std::ofstream(dir / "layerjit" / "math.cuh") << "#pragma once\n// changed math\n";
    std::ofstream(dir / "layerjit" / "unknown.cuh") << "#pragma once\n";  // no such header: ignored
  }
  DeviceHeaders h = embedded_codegen_device_headers();
  std::string error;
  CHECK(override_device_headers(h, dir.string(), &error) == 1);
  CHECK(error.empty());
  CHECK(h.size() == embedded_codegen_device_headers().size());
  for (const auto& [name, text] : h) {
    if (name == "layerjit/math.cuh") CHECK(text == "#pragma once\n// changed math\n");
    else CHECK(text != "#pragma once\n// changed math\n");
  }
  DeviceHeaders none = embedded_codegen_device_headers();
  CHECK(override_device_headers(none, (dir / "missing").string()) == 0);
  CHECK(none == embedded_codegen_device_headers());
  std::filesystem::remove_all(dir);
}

TEST_CASE("attention groups: flash prefill over query tiles, split-KV decode over key chunks", "[codegen]") {
  const Graph prefill = llama_prefill(LlamaConfig::llama3_8b());
  const Graph decode = llama_decode(LlamaConfig::llama3_8b());
  auto attention_group = [](const Graph& g) {
    for (const FusionGroup& grp : plan_fusion(g).groups)
      if (grp.kind == GroupKind::Attention) return grp;
    FAIL("no attention group");
    return FusionGroup{};
  };
  REQUIRE(has_emitter(GroupKind::Attention));
  {
    // 32 query heads over 8 KV heads: 4 heads packed per KV head, 128-row tiles of 32 tokens, 4 warps.
    GeneratedKernel k = emit_group(prefill, attention_group(prefill));
    INFO(k.source);
    CHECK(k.source.find("lj_flash_prefill<lj_bf16, 128, 128, 2, 64, 2, 4, true>") != std::string::npos);
    Bindings b;
    b.set("T", 4097);
    CHECK(k.launch.blocks(b) == (4097 + 31) / 32 * 8);
    CHECK(k.launch.threads == 128);
    CHECK(k.launch.shared_bytes == (128 + 2 * 2 * 64) * 128 * 2);
    CHECK(scratch_bytes(k, b) == 0);
  }
  {
    // One token: the 4 query rows of a KV head in one tile; at B=1 the keys split into 16 chunks of
    // 256 per KV head, CTAs of 8 warps (128 CTAs).
    EmitOptions eo;
    eo.hint.set("B", 1);
    eo.hint.set("C", 4096);
    GeneratedKernel k = emit_group(decode, attention_group(decode), eo);
    INFO(k.source);
    CHECK(k.source.find("lj_flash_decode<lj_bf16, 128, 4, 4, 16, 8, 3, 256, true>") != std::string::npos);
    CHECK(k.launch.threads == 256);
    Bindings b;
    b.set("B", 3);
    b.set("C", 4000);
    const int64_t blocks = 3 * ((4000 + 255) / 256) * 8;
    CHECK(k.launch.blocks(b) == blocks);
    CHECK(k.launch.str() == "B * ceil(C / 256) * 8");
    CHECK(scratch_bytes(k, b) == blocks * (4 * (128 + 2) * 4 + 4));
    // 16 sequences x 8 KV heads need fewer splits: chunks of 2048 keys, 4 warps; 32 none.
    eo.hint.set("B", 16);
    CHECK(emit_group(decode, attention_group(decode), eo).launch.per_block == 2048);
    CHECK(emit_group(decode, attention_group(decode), eo).launch.threads == 128);
    eo.hint.set("B", 32);
    CHECK(emit_group(decode, attention_group(decode), eo).launch.per_block == 4096);
    // On sm_80 (163 KiB) three stages of 8 warps do not fit: two.
    eo.hint.set("B", 1);
    eo.sm = 80;
    eo.max_shared_bytes = 163 * 1024;
    CHECK(emit_group(decode, attention_group(decode), eo).config == "decode bn=16 warps=8 stages=2 chunk=256");
  }
}

TEST_CASE("kernels without an emitter yet are reported by group", "[codegen]") {
  Module m = parse_module("graph @r(%x: f32[T, 7]) {\n  %y = reduce_sum(%x) {axis = 0}\n  return %y\n}\n", "<test>");
  const Graph& g = m.graphs[0];
  FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  CHECK(!has_emitter(plan.groups[0].kind));
  CHECK_THROWS_WITH(emit_group(g, plan.groups[0]), Catch::Contains("group 0 of @r is a reduce group"));
}

TEST_CASE("matmul groups at decode sizes get the GEMV kernel with one warp per output column", "[codegen]") {
  Graph g = llama_decode(LlamaConfig::llama3_8b());
  FusionPlan plan = plan_fusion(g);
  EmitOptions eo;
  eo.hint.set("B", 1);
  int seen = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    REQUIRE(has_emitter(grp.kind));
    GeneratedKernel k = emit_group(g, grp, eo);
    // Output columns: W's rows, or half of them where the SwiGLU of gate/up is fused.
    const int64_t n = g.value(grp.outputs[0]).type.shape.back().value();
    INFO(k.source);
    // grid.x = ceil(N / 8): 8 warps per CTA, each owning one column; with RoPE in the epilogue
    // (the QKV projection, storing q and the caches), one pair of columns of the [B, 6144] product.
    if (grp.nodes.size() > 1 && g.node(grp.nodes[1]).kind == OpKind::Rope)
      CHECK(k.launch.work.constant == 6144 / 2);
    else
      CHECK(k.launch.work.constant == n);
    CHECK(k.launch.work.symbols.empty());
    // 4 warps where each streams a gate and an up row (the one-row default with SwiGLU, K <= 4096).
    const bool glu = std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](NodeId id) { return g.node(id).kind == OpKind::Silu; });
    CHECK(k.launch.per_block == (glu ? 4 : 8));
    CHECK(k.launch.threads == (glu ? 128 : 256));
    CHECK(k.source.find("constexpr int V = 8;") != std::string::npos);  // 16-byte loads of bf16
    CHECK(k.source.find("const lj_i64 M = s_B;") != std::string::npos); // rows are a run-time symbol
    ++seen;
  }
  CHECK(seen == 4);  // qkv, o, gate_up, down
}

TEST_CASE("programmatic launch: kernels of many small CTAs are marked early, tensor-core GEMMs are not, attention where it reads its cache first",
          "[codegen]") {
  // LaunchRule::early: where the CTAs of an early launch land does not matter (docs/exec.md), or the
  // decode attention streams its cache before its wait (FusionGroup::cache_before_wait).
  for (const auto& [g, sym, value] : {std::tuple{llama_decode(LlamaConfig::llama3_8b()), "B", 1},
                                      std::tuple{llama_prefill(LlamaConfig::llama3_8b()), "T", 4096}}) {
    EmitOptions eo;
    eo.arch_specific = true;
    eo.hint.set(sym, value);
    eo.hint.set("C", 4096);
    int early = 0, late = 0;
    for (const FusionGroup& grp : plan_fusion(g).groups) {
      const GeneratedKernel k = emit_group(g, grp, eo);
      INFO(k.name << " " << k.config);
      const bool gemm = grp.kind == GroupKind::Matmul && k.config.rfind("gemv", 0) != 0;
      CHECK(k.launch.early == (grp.kind == GroupKind::Attention ? grp.cache_before_wait : !gemm));
      if (grp.kind == GroupKind::Attention) CHECK(grp.cache_before_wait == (std::string_view(sym) == "B"));
      (k.launch.early ? early : late) += 1;
    }
    CHECK(early > 0);
    CHECK(late == (std::string_view(sym) == "B" ? 0 : 5));  // prefill: the attention and the four GEMMs
  }
}

TEST_CASE("matmul groups at prefill sizes get the tensor-core GEMM over a 2-D tile grid", "[codegen]") {
  Graph g = llama_prefill(LlamaConfig::llama3_8b());
  FusionPlan plan = plan_fusion(g);
  EmitOptions eo;
  eo.hint.set("T", 4096);
  int seen = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    GeneratedKernel k = emit_group(g, grp, eo);
    const int64_t n = g.value(g.node(anchor_node(g, grp)).operands[1]).type.shape[0].value();
    INFO(k.source);
    CHECK(k.source.find("lj_gemm<lj_bf16, N, K, /*BM*/ 128, /*BN*/ 128") != std::string::npos);
    // grid.x = ceil(T / 128) * ceil(N / 128); 4 stages of (128 + 128) x 32 bf16 tiles.
    CHECK(k.launch.work.symbols == std::vector<std::string>{"T"});
    CHECK(k.launch.per_block == 128);
    CHECK(k.launch.tiles_per_unit == (n + 127) / 128);
    // The QKV projection's RoPE epilogue also stages the tile rows' cos/sin beside the staged tile.
    const bool rope = grp.nodes.size() > 1 && g.node(grp.nodes[1]).kind == OpKind::Rope;
    CHECK(k.launch.shared_bytes == (rope ? 128 * 136 * 2 + 128 * 64 * 8 : 4 * 256 * 32 * 2));
    Bindings b;
    b.set("T", 4097);
    CHECK(k.launch.blocks(b) == 33 * ((n + 127) / 128));
    ++seen;
  }
  CHECK(seen == 4);
}

TEST_CASE("matmul groups at prefill sizes on sm_90a get the Hopper GEMM reading x and W through tensor maps", "[codegen]") {
  Graph g = llama_prefill(LlamaConfig::llama3_8b());
  FusionPlan plan = plan_fusion(g);
  EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = true;
  eo.hint.set("T", 4096);
  const std::vector<TensorLayout> layouts = compute_layouts(g);
  int seen = 0;
  for (const FusionGroup& grp : plan.groups) {
    if (grp.kind != GroupKind::Matmul) continue;
    GeneratedKernel k = emit_group(g, grp, eo);
    INFO(k.source);
    const Node& mm = g.node(anchor_node(g, grp));
    const int64_t n = g.value(mm.operands[1]).type.shape[0].value();
    const int64_t kk = g.value(mm.operands[1]).type.shape[1].value();
    const bool glu = k.source.find("GLU*/ true") != std::string::npos;
    CHECK(k.arch_specific);
    CHECK(k.source.find("#include \"layerjit/gemm_wgmma.cuh\"") != std::string::npos);
    CHECK(k.source.find("__launch_bounds__(384, 1)") != std::string::npos);
    CHECK(k.launch.threads == 384);
    CHECK(k.launch.per_block == 128);
    // grid: ceil(T / 128) x tiles of 256 columns (SwiGLU: 128 outputs from 128 gate + 128 up rows)
    CHECK(k.launch.tiles_per_unit == (n + 255) / 256);
    std::vector<const KernelParam*> maps;
    for (const KernelParam& p : k.params)
      if (p.kind == KernelParam::Kind::TensorMap) maps.push_back(&p);
    REQUIRE(maps.size() == 2);
    CHECK(maps[0]->buffer == layouts[static_cast<size_t>(mm.operands[0])].buffer);  // x may be a view (attention's output)
    CHECK(maps[0]->tmap.rows.symbols == std::vector<std::string>{"T"});
    CHECK(maps[0]->tmap.cols == kk);
    CHECK(maps[0]->tmap.box_rows == 128);
    CHECK(maps[0]->tmap.box_cols == 64);
    CHECK(maps[1]->buffer == mm.operands[1]);
    CHECK(maps[1]->tmap.rows.constant == n);
    CHECK(maps[1]->tmap.row_stride == kk);
    CHECK(maps[1]->tmap.box_rows == 128);
    CHECK(k.source.find(glu ? "b_hi = N_OUT + n0 / 2" : "b_hi = n0 + 128") != std::string::npos);
    ++seen;
  }
  CHECK(seen == 4);
  // Rows TMA cannot load (a 2-byte row stride that is not a multiple of 16) keep the mma.sync GEMM.
  Module m = parse_module("graph @odd(%x: bf16[M, 1001], %w: param bf16[64, 1001]) {\n  %y = matmul(%x, %w)\n  return %y\n}\n", "<odd>");
  const Graph& odd = m.graphs.at(0);
  EmitOptions oe = eo;
  oe.hint = {};
  const MatmulProblem p = matmul_problem(odd, plan_fusion(odd).groups[0], oe);
  CHECK(!p.tma);
  CHECK(default_matmul_config(p).family == MatmulConfig::Family::Mma);
  MatmulConfig forced = default_matmul_config([&] { MatmulProblem q = p; q.tma = true; return q; }());
  oe.matmul = forced;
  CHECK_THROWS_WITH(emit_group(odd, plan_fusion(odd).groups[0], oe), Catch::Contains("TMA"));
}

// Every candidate the pruner accepts for the matmul groups of both graphs of the 8B layer, at a decode
// and a prefill bucket (the GEMV and GEMM candidate sets), compiled for one target. sm = 91 stands for
// sm_90a, where the Hopper GEMM joins the candidates: its mma.sync and GEMV kernels are the sm_90
// sources, built by the same ptxas for the same SM, so only the wgmma ones are compiled there. The
// emitter does not specialise mma.sync or GEMV sources on the SM, so most of sm_90's are sm_80's
// (the same text for another ptxas target, which the golden set and the layer sweeps build for
// sm_90): sm_90 compiles those only sm_90's larger shared memory admits, which halves CI's longest
// sweep. The tiles' k depth, stages and row grouping are template arguments of the GEMM's mainloop
// (one typedef line of the source: lj_gemm<..., BK, ..., STAGES, GROUP_M> or lj_wgmma_gemm<...>),
// which the epilogue's text does not depend on: the first matmul group of each graph is compiled
// with every candidate, the others with one candidate per tile shape (bm, bn, warps, split, ping-pong
// ...): each epilogue meets every tile it can, each mainloop every depth, for half the NVRTC time.
// One test case per target, so that ctest runs the three sweeps side by side.
namespace {
// The config with what only the mainloop's template arguments hold (k depth, stages, row grouping)
// normalised: candidates with one key have the same epilogue text.
std::string epilogue_key(const std::string& kernel, MatmulConfig c) {
  if (c.family == MatmulConfig::Family::Gemv) return kernel + " " + c.str();
  c.bk = 32, c.stages = 4, c.group_m = 8;
  return kernel + " " + c.str();
}

// Calls f(config, kernel, every) for every candidate of every matmul group of both graphs of the 8B
// layer for `sm` (91: sm_90a's wgmma candidates only); `every`: the graph's first matmul group.
template <class F>
void for_each_pruned_llama_matmul(int sm, F&& f) {
  for (const auto& [g, sym, m] : {std::tuple{llama_decode(LlamaConfig::llama3_8b()), "B", 1},
                                  std::tuple{llama_prefill(LlamaConfig::llama3_8b()), "T", 4096}}) {
    int matmuls = 0;
    for (const FusionGroup& grp : plan_fusion(g).groups) {
      if (grp.kind != GroupKind::Matmul) continue;
      const bool every = matmuls++ == 0;
      EmitOptions eo;
      eo.sm = sm == 91 ? 90 : sm;
      eo.arch_specific = sm == 91;
      eo.hint.set(sym, m);
      eo.max_shared_bytes = sm == 80 ? 163 * 1024 : 227 * 1024;  // A100, H100/H200 opt-in limits
      for (const MatmulConfig& c : matmul_candidates(matmul_problem(g, grp, eo))) {
        if (sm == 91 && c.family != MatmulConfig::Family::Wgmma) continue;
        eo.matmul = c;
        f(c, emit_group(g, grp, eo), every);
      }
    }
  }
}

void compile_pruned_llama_matmuls(int sm) {
  std::set<std::string> sm80_sources;
  if (sm == 90) for_each_pruned_llama_matmul(80, [&](const MatmulConfig&, const GeneratedKernel& k, bool) { sm80_sources.insert(k.source); });
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> what;
  std::set<std::string> seen_configs, epilogues;
  int shared_with_sm80 = 0, same_epilogue = 0;
  auto target = rt::Target::parse(sm == 80 ? "sm_80" : sm == 90 ? "sm_90" : "sm_90a");
  REQUIRE(target.ok());
  for_each_pruned_llama_matmul(sm, [&](const MatmulConfig& c, const GeneratedKernel& k, bool every) {
    seen_configs.insert(c.str());
    if (sm80_sources.count(k.source)) {
      ++shared_with_sm80;
      return;
    }
    if (!epilogues.insert(epilogue_key(k.name, c)).second && !every) {
      ++same_epilogue;
      return;
    }
    jobs.push_back(jit::compile_job(k, *target));
    what.push_back(fmt::format("{} {} {}", k.name, target->name(), c.str()));
  });
  CHECK(seen_configs.size() >= 20);
  WARN(fmt::format("{}: {} kernels compiled, {} skipped as another depth of a tile compiled with the same epilogue", target->name(),
                   jobs.size(), same_epilogue));
  if (sm == 90) {
    CHECK(shared_with_sm80 > 0);
    CHECK(!jobs.empty());  // the configs only 227 KB of shared memory admits
    WARN(fmt::format("sm_90: {} kernels compiled, {} skipped as sm_80's sources", jobs.size(), shared_with_sm80));
  }
  compile_every_one(jobs, what);
}
}  // namespace

TEST_CASE("every matmul config the pruner accepts for the Llama shapes compiles for sm_80", "[codegen]") {
  compile_pruned_llama_matmuls(80);
}

TEST_CASE("every matmul config the pruner accepts for the Llama shapes compiles for sm_90", "[codegen]") {
  compile_pruned_llama_matmuls(90);
}

TEST_CASE("every wgmma config the pruner accepts for the Llama shapes compiles for sm_90a", "[codegen]") {
  compile_pruned_llama_matmuls(91);
}

TEST_CASE("fp8 matmuls: the Hopper GEMM with k32 wgmma on sm_90a, the GEMV elsewhere, every accepted wgmma config compiles", "[codegen]") {
  Module m = parse_module(kFp8Projection, "<fp8>");
  const Graph& g = m.graphs.at(0);
  const FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> what;
  int hopper = 0;
  for (int64_t rows : {1, 16, 128, 4096})
    for (int sm : {80, 90, 91}) {
      EmitOptions eo;
      eo.sm = sm == 91 ? 90 : sm;
      eo.arch_specific = sm == 91;
      eo.hint.set("M", rows);
      eo.max_shared_bytes = sm == 80 ? 163 * 1024 : 227 * 1024;
      const MatmulProblem p = matmul_problem(g, plan.groups[0], eo);
      CHECK(p.dtype == DType::F8E4M3);
      // One row on sm_90 and sm_90a: the tensor-core GEMV (mma.sync m16n8k32 on the codes); more rows
      // the Hopper GEMM on sm_90a, the GEMV elsewhere (and on sm_80 always).
      const MatmulConfig d = default_matmul_config(p);
      INFO("M = " << rows << ", sm " << sm << ": default " << d.str());
      if (rows == 1 && sm != 80) {
        CHECK(d.str() == "gemv mma u=4 warps=8");
      } else {
        CHECK(d.family == (sm == 91 ? MatmulConfig::Family::Wgmma : MatmulConfig::Family::Gemv));
        CHECK(!d.tensor_cores);
      }
      // Every wgmma candidate (M = 16 and 128 share the list of up to 512 rows, 4096 has its own),
      // and the default besides: the GEMV candidates differ from it in constants only, and NVRTC
      // takes minutes and gigabytes over the largest (16 rows per pass, 8 loads in flight, every
      // row count unrolled).
      std::vector<MatmulConfig> configs{d};
      if (sm == 91 && rows > 16)
        for (const MatmulConfig& c : matmul_candidates(p))
          if (c.family == MatmulConfig::Family::Wgmma && !(c == d)) configs.push_back(c);
      for (const MatmulConfig& c : configs) {
        CHECK(c.family != MatmulConfig::Family::Mma);
        eo.matmul = c;
        GeneratedKernel k = emit_group(g, plan.groups[0], eo);
        rt::CompileJob job = jit::compile_job(k, *rt::Target::parse(sm == 80 ? "sm_80" : sm == 90 ? "sm_90" : "sm_90a"));
        job.options.want_ptx = c.family == MatmulConfig::Family::Wgmma;
        jobs.push_back(std::move(job));
        what.push_back(fmt::format("M={} {} {}", rows, jobs.back().target.name(), c.str()));
        hopper += c.family == MatmulConfig::Family::Wgmma;
      }
    }
  CHECK(hopper >= 20);
  auto results = rt::compile_parallel(jobs);
  REQUIRE(results.size() == jobs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(what[i] << "\n" << (results[i].ok() ? "" : results[i].message()));
    REQUIRE(results[i].ok());
    // The main loop's MMAs are fp8 ones: k32 steps of e4m3 (a 16-bit wgmma here would be wrong).
    if (jobs[i].options.want_ptx) {
      CHECK(results[i]->ptx.find(".f32.e4m3.e4m3") != std::string::npos);
      CHECK(results[i]->ptx.find("k16.f32.bf16") == std::string::npos);
    }
  }

  // The pruner: mma.sync refuses fp8 with its reason; the k tile of an fp8 wgmma is 128 elements
  // (one 128-byte swizzle row), which split-K counts and the shared memory sizes in bytes.
  MatmulProblem h;
  h.m = 4096, h.n = 6144, h.k = 256, h.sm = 90, h.arch_specific = true, h.tma = true, h.dtype = DType::F8E4M3;
  CHECK_THAT(reject_reason(MatmulConfig{}, h), Catch::Contains("mma.sync takes bf16/f16/i8 operands, not f8e4m3"));
  MatmulConfig w = *parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 sk=2", nullptr);
  CHECK(w.k_tile(1) == 128);
  CHECK(w.k_tile(2) == 64);
  CHECK(reject_reason(w, h).empty());  // 2 k tiles of 128
  w.split_k = 3;
  CHECK_THAT(reject_reason(w, h), Catch::Contains("sk=3 for 2 k tiles of 128"));
  CHECK(w.shared_bytes(1) == w.shared_bytes(2));  // a stage is 128 bytes of k either way
  // Defaults at M = 128 (the H200 sweeps, docs/perf.md): 128 x 64 tiles with 8 stages where they fit
  // one wave, split only where each CTA keeps 24 k tiles of 128 (down: 112 k tiles, split 2 ways);
  // 128 x 128 tiles unsplit get 6 stages. Unsplit 128 x 64 tiles become 64-row tiles: 64 x 64 where
  // those fit one wave (o), else 64 x 128 (qkv).
  MatmulProblem m128 = h;
  m128.m = 128, m128.k = 4096;
  CHECK(default_matmul_config(m128).str() == "wgmma bm=64 bn=128 stages=8 gm=8");
  m128.n = 4096;
  CHECK(default_matmul_config(m128).str() == "wgmma bm=64 bn=64 stages=8 gm=8");
  m128.n = 7;  // narrower W than 128 rows: unchanged
  CHECK(default_matmul_config(m128).str() == "wgmma bm=128 bn=64 stages=8 gm=8");
  m128.m = 64, m128.n = 4096;  // one row tile either way: unchanged
  CHECK(default_matmul_config(m128).str() == "wgmma bm=128 bn=64 stages=8 gm=8");
  m128.m = 128;
  m128.n = 4096, m128.k = 14336;
  CHECK(default_matmul_config(m128).str() == "wgmma bm=128 bn=64 stages=8 gm=8 sk=2");
  m128.n = 16384, m128.k = 4096;  // 256 tiles of 64 columns: two waves
  CHECK(default_matmul_config(m128).str() == "wgmma bm=128 bn=128 stages=6 gm=8");
  m128.n = 28672, m128.k = 4096;
  CHECK(default_matmul_config(m128).str() == "wgmma bm=128 bn=256 stages=4 gm=8");
  MatmulProblem int8 = h;
  int8.dtype = DType::I8;
  w.split_k = 2;  // i8 (W8A8): k32 steps of s8, k tiles of 128 elements as for fp8
  CHECK(reject_reason(w, int8).empty());
  CHECK(default_matmul_config(int8).str() == "wgmma bm=128 bn=256 stages=4 gm=8");
  MatmulProblem f32 = h;
  f32.dtype = DType::F32;  // (mixed operands)
  CHECK_THAT(reject_reason(w, f32), Catch::Contains("wgmma takes bf16, f16, f8e4m3, f8e5m2 or i8"));
}

TEST_CASE("RoPE in a projection's epilogue: the default tile holds whole heads or divides one, at every M and head_dim", "[codegen]") {
  for (const bool hopper : {false, true})
    for (const int64_t d : {64, 80, 96, 128})
      for (const int64_t m : {2, 9, 16, 32, 100, 4096}) {
        MatmulProblem p;
        p.m = m, p.n = 10 * d, p.k = 720, p.rope_pair_dim = d, p.rope = true;
        p.sm = 90, p.arch_specific = hopper, p.tma = hopper, p.aligned = true;
        const MatmulConfig c = default_matmul_config(p);
        INFO("M = " << m << ", head_dim " << d << (hopper ? ", sm_90a: " : ", sm_90: ") << c.str());
        CHECK(reject_reason(c, p).empty());
        CHECK(c.family != MatmulConfig::Family::Gemv);  // a tensor-core tile always fits
        CHECK((c.bn % d == 0 || d % c.bn == 0));
      }
}

TEST_CASE("matmul configs print, parse back and are pruned with a reason", "[codegen]") {
  MatmulProblem p;
  p.m = 4096, p.n = 6144, p.k = 4096;
  std::vector<std::string> rejected;
  const auto configs = matmul_candidates(p, &rejected);
  REQUIRE(!configs.empty());
  CHECK(configs[0] == default_matmul_config(p));
  for (const MatmulConfig& c : configs) {
    std::string error;
    auto back = parse_matmul_config(c.str(), &error);
    INFO(c.str() << ": " << error);
    REQUIRE(back.has_value());
    CHECK(*back == c);
  }
  // 256x128 tiles with 64-wide k steps and 4 stages need 192 KiB: over an A100's 163 KiB, and a
  // 128x128 warp tile needs more than 255 registers.
  MatmulConfig big;
  big.bm = 256, big.bn = 128, big.bk = 64, big.warps_m = 4, big.warps_n = 2, big.stages = 4;
  p.max_shared_bytes = 163 * 1024;
  CHECK_THAT(reject_reason(big, p), Catch::Contains("KiB of shared memory"));
  MatmulConfig fat;
  fat.bm = 256, fat.bn = 128, fat.warps_m = 2, fat.warps_n = 1;
  CHECK_THAT(reject_reason(fat, p), Catch::Contains("registers"));
  p.dtype = DType::F32;
  CHECK_THAT(reject_reason(MatmulConfig{}, p), Catch::Contains("bf16/f16"));
  CHECK(default_matmul_config(p).family == MatmulConfig::Family::Gemv);
  std::string error;
  CHECK(!parse_matmul_config("mma bm=128 bq=3", &error));
  CHECK_THAT(error, Catch::Contains("unknown key 'bq'"));
  CHECK(!parse_matmul_config("hmma bm=128", &error));
  CHECK_THAT(error, Catch::Contains("unknown family 'hmma'"));
  CHECK(!parse_matmul_config("wgmma wm=2", &error));
  CHECK_THAT(error, Catch::Contains("unknown key 'wm' for the wgmma family"));

  // The Hopper family: only for sm_90a and rows TMA can load; its configs print and parse back.
  MatmulProblem h;
  h.m = 4096, h.n = 6144, h.k = 4096, h.sm = 90, h.arch_specific = true, h.tma = true;
  const MatmulConfig hd = default_matmul_config(h);
  CHECK(hd.family == MatmulConfig::Family::Wgmma);
  CHECK(hd.str() == "wgmma bm=128 bn=256 stages=4 gm=8");
  int hopper = 0;
  for (const MatmulConfig& c : matmul_candidates(h)) {
    if (c.family != MatmulConfig::Family::Wgmma) continue;
    auto back = parse_matmul_config(c.str(), &error);
    REQUIRE(back.has_value());
    CHECK(*back == c);
    ++hopper;
  }
  CHECK(hopper >= 4);
  MatmulProblem plain = h;
  plain.arch_specific = false;
  CHECK_THAT(reject_reason(hd, plain), Catch::Contains("sm_90a"));
  CHECK(default_matmul_config(plain).family == MatmulConfig::Family::Mma);
  MatmulProblem untma = h;
  untma.tma = false;
  CHECK_THAT(reject_reason(hd, untma), Catch::Contains("TMA"));
  MatmulConfig five = hd;
  five.stages = 5;  // 5 x 48 KiB
  CHECK_THAT(reject_reason(five, h), Catch::Contains("KiB of shared memory"));
  // M = 128: too few 128 x 256 tiles to fill 132 SMs but for gate_up; 128 x 64 tiles where they fit
  // one wave, split along K up to one wave (o and down: 64 tiles x 2), unsplit ones as 64 x 128
  // tiles (qkv), else 128 x 128 tiles. Up to 64 rows the mma.sync tiles.
  h.m = 128;
  auto default_for = [&](int64_t n, int64_t k) {
    MatmulProblem q = h;
    q.n = n, q.k = k;
    return default_matmul_config(q).str();
  };
  // 96 tiles of 128 x 64: a split would need 2 waves; as many 64 x 128 tiles instead.
  CHECK(default_for(6144, 4096) == "wgmma bm=64 bn=128 stages=8 gm=8");
  CHECK(default_for(4096, 4096) == "wgmma bm=128 bn=64 stages=8 gm=8 sk=2");
  CHECK(default_for(28672, 4096) == "wgmma bm=128 bn=256 stages=4 gm=8");
  CHECK(default_for(4096, 14336) == "wgmma bm=128 bn=64 stages=8 gm=8 sk=2");
  CHECK(default_for(4096, 448) == "wgmma bm=64 bn=128 stages=8 gm=8");  // 7 k tiles: no split below 4 each
  CHECK(default_for(16384, 4096) == "wgmma bm=128 bn=128 stages=4 gm=8");  // 256 narrow tiles: 2 waves
  h.m = 256;
  CHECK(default_for(6144, 4096) == "wgmma bm=128 bn=128 stages=4 gm=8");  // 2 x 96 narrow tiles
  CHECK(default_for(4096, 4096) == "wgmma bm=64 bn=128 stages=8 gm=8");
  h.m = 100;  // 64-row tiles only where they make as many CTAs: 2 x 48 against 1 x 96
  CHECK(default_for(6144, 4096) == "wgmma bm=64 bn=128 stages=8 gm=8");
  h.m = 64;
  CHECK(default_matmul_config(h).str() == "mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8");
  // Decode, 2-16 rows: one 16-row tile, split 2 ways along K where K < N and the column tiles are
  // few (qkv), else 4, a split CTA keeping 4 k tiles. 17-32 rows: a 32-row tile split 4 ways where
  // K < N, one 64-row tile over a wide W (gate_up), else 16-row tiles split 4 ways.
  for (int64_t m : {2, 16}) {
    h.m = m;
    const std::string tile = "mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=6 gm=8";
    CHECK(default_for(6144, 4096) == tile + " sk=2");
    CHECK(default_for(4096, 4096) == tile + " sk=4");
    CHECK(default_for(28672, 4096) == tile + " sk=4");
    CHECK(default_for(4096, 14336) == tile + " sk=4");
    CHECK(default_for(4096, 448) == tile);  // 7 k tiles: no split below 4 each
  }
  h.m = 32;
  CHECK(default_for(6144, 4096) == "mma bm=32 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8 sk=4");
  CHECK(default_for(4096, 4096) == "mma bm=16 bn=64 bk=64 wm=1 wn=2 stages=4 gm=8 sk=4");
  CHECK(default_for(28672, 4096) == "mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=3 gm=8");
  h.m = 128;
  CHECK(!parse_matmul_config("gemv mt=0", &error));
  CHECK_THAT(error, Catch::Contains("positive integer"));

  // Persistent: a wgmma option, printed last, parsed back; its own epilogue tile must fit too.
  h.m = 4096;
  auto pers = parse_matmul_config("wgmma bm=128 bn=256 stages=3 gm=8 persistent", &error);
  REQUIRE(pers.has_value());
  CHECK(pers->persistent);
  CHECK(pers->str() == "wgmma bm=128 bn=256 stages=3 gm=8 persistent");
  CHECK(reject_reason(*pers, h).empty());
  CHECK(pers->shared_bytes(2) == 1024 + 3 * (128 + 256) * 64 * 2 + 128 + 128 * 264 * 2);
  MatmulConfig four = *pers;
  four.stages = 4;  // 4 x 48 KiB of ring + 66 KiB of epilogue tile
  CHECK_THAT(reject_reason(four, h), Catch::Contains("with the epilogue tile"));
  MatmulProblem f32_out = h;
  f32_out.out_bytes = 4;  // the tile staged in fp32 is twice the size
  CHECK_THAT(reject_reason(*pers, f32_out), Catch::Contains("with the epilogue tile"));
  MatmulConfig mma_pers;
  mma_pers.persistent = true;
  CHECK_THAT(reject_reason(mma_pers, h), Catch::Contains("persistent is an option of the wgmma family"));
  CHECK(!parse_matmul_config("mma bm=128 persistent", &error));
  CHECK_THAT(error, Catch::Contains("'persistent' is not key=value"));
  int pingpongs = 0, clusters = 0, plain_persistent = 0;
  for (const MatmulConfig& c : matmul_candidates(h)) {
    pingpongs += c.pingpong;
    clusters += c.cluster > 1;
    if (c.persistent && !c.pingpong && !c.stream_k) {
      ++plain_persistent;
      CHECK(c.str() == pers->str());  // 128 x 256, 3 stages: the one whose epilogue tile fits
    }
  }
  CHECK(pingpongs == 3);         // 4, 5 and 6 stages (6: the epilogue tile staged a half at a time)
  CHECK(plain_persistent == 1);  // a candidate since setmaxnreg takes effect
  CHECK(clusters == 0);          // clusters of two: an explicit config only
  // A ping-pong epilogue tile is staged one m64 half at a time where the whole one would take the
  // ring past the device's shared memory; where it fits, it stays whole.
  const MatmulConfig pp6 = *parse_matmul_config("wgmma bm=128 bn=128 stages=6 gm=8 pingpong", nullptr);
  CHECK(pp6.staged_rows(2, 2, false, h.max_shared_bytes) == 64);
  CHECK(pp6.shared_bytes(2, 2, false, h.max_shared_bytes) == 1024 + 6 * 256 * 128 + 128 + 64 * 136 * 2);
  CHECK(pp6.staged_rows(2, 2, false, 0) == 128);  // no limit given: the whole tile
  CHECK(reject_reason(pp6, h).empty());
  MatmulConfig pp5 = pp6;
  pp5.stages = 5;
  CHECK(pp5.staged_rows(2, 2, false, h.max_shared_bytes) == 128);
  MatmulProblem i8 = h;  // i8 operands, the tile staged in f32: 5 stages only by halves, 6 not at all
  i8.dtype = DType::I8, i8.out_bytes = 4;
  CHECK(pp5.staged_rows(1, 4, false, i8.max_shared_bytes) == 64);
  CHECK(reject_reason(pp5, i8).empty());
  CHECK_THAT(reject_reason(pp6, i8), Catch::Contains("with half the epilogue tile"));

  // Stream-K: persistent too, printed as " streamk"; neither with ping-pong nor with split-K; not a
  // tuner candidate (on the H200 at M = 128 it ran 0.72-0.94x of the split defaults, docs/perf.md).
  auto stream = parse_matmul_config("wgmma bm=128 bn=64 stages=8 gm=8 streamk", &error);
  REQUIRE(stream.has_value());
  CHECK((stream->persistent && stream->stream_k && !stream->pingpong));
  CHECK(stream->str() == "wgmma bm=128 bn=64 stages=8 gm=8 streamk");
  CHECK(reject_reason(*stream, h).empty());
  MatmulConfig sk_pp = *stream;
  sk_pp.pingpong = true;
  CHECK_THAT(reject_reason(sk_pp, h), Catch::Contains("streamk with pingpong"));
  MatmulConfig sk_split = *stream;
  sk_split.split_k = 2;
  CHECK_THAT(reject_reason(sk_split, h), Catch::Contains("streamk splits k itself"));
  MatmulConfig sk_mma;
  sk_mma.stream_k = sk_mma.persistent = true;
  CHECK_THAT(reject_reason(sk_mma, h), Catch::Contains("is an option of the"));
  int stream_ks = 0;
  for (const MatmulConfig& c : matmul_candidates(h)) stream_ks += c.stream_k;
  CHECK(stream_ks == 0);
  MatmulProblem h128 = h;
  h128.m = 128;
  for (const MatmulConfig& c : matmul_candidates(h128)) stream_ks += c.stream_k;
  CHECK(stream_ks == 0);

  // Ping-pong: persistent too, printed as " pingpong"; two epilogue tiles; 128-column tiles only.
  auto pp = parse_matmul_config("wgmma bm=128 bn=128 stages=4 gm=8 pingpong", &error);
  REQUIRE(pp.has_value());
  CHECK(pp->persistent);
  CHECK(pp->pingpong);
  CHECK(pp->str() == "wgmma bm=128 bn=128 stages=4 gm=8 pingpong");
  CHECK(reject_reason(*pp, h).empty());
  CHECK(pp->shared_bytes(2) == 1024 + 4 * (128 + 128) * 64 * 2 + 128 + 128 * 136 * 2);  // one staging tile, shared
  MatmulConfig pp_wide = *pp;
  pp_wide.bn = 256;
  CHECK_THAT(reject_reason(pp_wide, h), Catch::Contains("pingpong with bn=256"));
  MatmulConfig pp_seven = *pp;
  pp_seven.stages = 7;  // 7 x 32 KiB of ring + 17 KiB of half the epilogue tile (6: above)
  CHECK_THAT(reject_reason(pp_seven, h), Catch::Contains("with half the epilogue tile"));
  pp_seven.stages = 5;
  CHECK(reject_reason(pp_seven, h).empty());
  MatmulConfig mma_pp;
  mma_pp.pingpong = mma_pp.persistent = true;
  CHECK_THAT(reject_reason(mma_pp, h), Catch::Contains("pingpong is an option of the wgmma family"));

  // 64-row tiles: one consumer warpgroup (256 threads), one tile per CTA, at most 128 columns.
  auto b64 = parse_matmul_config("wgmma bm=64 bn=96 stages=8 gm=8 sk=2", &error);
  REQUIRE(b64.has_value());
  CHECK(b64->str() == "wgmma bm=64 bn=96 stages=8 gm=8 sk=2");
  CHECK(reject_reason(*b64, h).empty());
  CHECK(b64->threads() == 256);
  CHECK(b64->shared_bytes(2) == 1024 + 8 * (64 + 96) * 64 * 2 + 2 * 8 * 8);
  for (const char* bad : {"wgmma bm=64 bn=128 stages=4 gm=8 persistent", "wgmma bm=64 bn=128 stages=4 gm=8 pingpong",
                          "wgmma bm=64 bn=64 stages=4 gm=8 streamk"})
    CHECK_THAT(reject_reason(*parse_matmul_config(bad, &error), h), Catch::Contains("bm=64 runs one tile per CTA"));
  MatmulConfig b64_wide = *b64;
  b64_wide.bn = 256, b64_wide.split_k = 1;
  CHECK_THAT(reject_reason(b64_wide, h), Catch::Contains("bn <= 128"));
  MatmulConfig b32 = *b64;
  b32.bm = 32;
  CHECK_THAT(reject_reason(b32, h), Catch::Contains("bm=32"));
  // 256-row tiles: two consumer warpgroups of 128 rows each, one whole tile per CTA, bn <= 128.
  auto b256 = parse_matmul_config("wgmma bm=256 bn=128 stages=4 gm=8", &error);
  REQUIRE(b256.has_value());
  CHECK(b256->str() == "wgmma bm=256 bn=128 stages=4 gm=8");
  CHECK(reject_reason(*b256, h).empty());
  CHECK(b256->threads() == 384);
  CHECK(b256->shared_bytes(2) == 1024 + 4 * (256 + 128) * 64 * 2 + 2 * 4 * 8);
  for (const char* bad : {"wgmma bm=256 bn=128 stages=4 gm=8 persistent", "wgmma bm=256 bn=128 stages=4 gm=8 pingpong",
                          "wgmma bm=256 bn=128 stages=4 gm=8 streamk", "wgmma bm=256 bn=128 stages=4 gm=8 sk=2"})
    CHECK_THAT(reject_reason(*parse_matmul_config(bad, &error), h), Catch::Contains("bm=256 runs one whole tile per CTA"));
  CHECK_THAT(reject_reason(*parse_matmul_config("wgmma bm=256 bn=256 stages=3 gm=8", &error), h), Catch::Contains("up to bn=128"));
  int bm64 = 0;  // tuner candidates at few rows only
  for (const MatmulConfig& c : matmul_candidates(h128)) bm64 += c.family == MatmulConfig::Family::Wgmma && c.bm == 64;
  CHECK(bm64 == 9);
  for (const MatmulConfig& c : matmul_candidates(h)) CHECK(!(c.family == MatmulConfig::Family::Wgmma && c.bm == 64));

  // Split-K: "sk=N" after gm, one tile per CTA, at most 16 CTAs per tile and a k tile each.
  auto sk = parse_matmul_config("wgmma bm=128 bn=256 stages=4 gm=8 sk=4", &error);
  REQUIRE(sk.has_value());
  CHECK(sk->split_k == 4);
  CHECK(sk->str() == "wgmma bm=128 bn=256 stages=4 gm=8 sk=4");
  CHECK(reject_reason(*sk, h).empty());
  MatmulConfig sk_pers = *sk;
  sk_pers.persistent = true;
  CHECK_THAT(reject_reason(sk_pers, h), Catch::Contains("one tile per CTA"));
  MatmulConfig sk_many = *sk;
  sk_many.split_k = 17;
  CHECK_THAT(reject_reason(sk_many, h), Catch::Contains("at most 16"));
  MatmulProblem short_k = h;
  short_k.k = 192;  // 3 k tiles
  CHECK_THAT(reject_reason(*sk, short_k), Catch::Contains("sk=4 for 3 k tiles of 64"));
  // The mma.sync family splits too (bk-wide k tiles); the GEMV does not.
  auto mma_sk = parse_matmul_config("mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8 sk=4", &error);
  REQUIRE(mma_sk.has_value());
  CHECK(mma_sk->str() == "mma bm=64 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8 sk=4");
  CHECK(reject_reason(*mma_sk, h).empty());
  CHECK_THAT(reject_reason(*mma_sk, short_k), Catch::Contains("sk=4 for 3 k tiles of 64"));
  MatmulConfig gemv_sk;
  gemv_sk.family = MatmulConfig::Family::Gemv;
  gemv_sk.split_k = 2;
  CHECK_THAT(reject_reason(gemv_sk, h), Catch::Contains("tensor-core families"));
  CHECK(!parse_matmul_config("gemv mt=4 sk=2", &error));
  CHECK_THAT(error, Catch::Contains("unknown key 'sk'"));
  // Candidates at M = 128 (16 tiles of 128 x 256 for N = 4096) include split-K of both families (14
  // wgmma: 128 and 256 columns split 2-8 ways, 64 and 96 columns 2 ways at 6 or 8 stages; 5
  // mma.sync); at 4096 rows none.
  MatmulProblem m128 = h;
  m128.m = 128;
  int splits = 0;
  for (const MatmulConfig& c : matmul_candidates(m128)) splits += c.split_k > 1;
  CHECK(splits == 19);
  for (const MatmulConfig& c : matmul_candidates(h)) CHECK(c.split_k == 1);
}

TEST_CASE("attention at prefill sizes on sm_90a gets the wgmma flash kernel reading q, k and v through tensor maps", "[codegen]") {
  const Graph g = llama_prefill(LlamaConfig::llama3_8b());
  const FusionPlan plan = plan_fusion(g);
  const FusionGroup* attn = nullptr;
  for (const FusionGroup& grp : plan.groups)
    if (grp.kind == GroupKind::Attention) attn = &grp;
  REQUIRE(attn);
  const Node& n = g.node(attn->nodes[0]);
  const std::vector<TensorLayout> layouts = compute_layouts(g, plan.dense_views);
  EmitOptions eo;
  eo.arch_specific = true;
  GeneratedKernel k = emit_group(g, *attn, eo);
  INFO(k.source);
  CHECK(k.arch_specific);
  CHECK(k.config == "wgmma bn=128 stages=2");
  CHECK(k.source.find("lj_flash_prefill_wgmma<lj_bf16, 128, 128, 2, 4, true>") != std::string::npos);
  CHECK(k.source.find("__launch_bounds__(384, 1)") != std::string::npos);
  CHECK(k.launch.threads == 384);
  CHECK(k.launch.per_block == 32);  // 128 rows: 32 tokens of the 4 query heads of a KV head
  CHECK(k.launch.shared_bytes == 1024 + 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 9 * 8);
  std::vector<const KernelParam*> maps;
  for (const KernelParam& p : k.params)
    if (p.kind == KernelParam::Kind::TensorMap) maps.push_back(&p);
  REQUIRE(maps.size() == 3);
  CHECK(maps[0]->buffer == layouts[static_cast<size_t>(n.operands[0])].buffer);
  CHECK(maps[0]->tmap.rows.symbols == std::vector<std::string>{"T"});
  CHECK(maps[0]->tmap.cols == 32 * 128);
  CHECK(maps[0]->tmap.box_rows == 32);
  CHECK(maps[0]->tmap.box_cols == 64);
  CHECK(maps[1]->tmap.cols == 8 * 128);
  CHECK(maps[1]->tmap.box_rows == 128);
  // v is in a buffer of its own (the QKV projection's RoPE epilogue stores it there): dense rows.
  CHECK(maps[2]->buffer == layouts[static_cast<size_t>(n.operands[2])].buffer);
  CHECK(maps[2]->tmap.row_stride == 1024);
  CHECK(maps[2]->tmap.offset == 0);

  // Not on sm_90 or sm_90a without arch-specific code; a forced wgmma config there says why.
  EmitOptions plain;
  CHECK(!emit_group(g, *attn, plain).arch_specific);
  plain.attention = AttentionConfig::hopper();
  CHECK_THROWS_WITH(emit_group(g, *attn, plain), Catch::Contains("needs sm_90a"));
  // Paged caches and head_dim 32 stay on the mma.sync kernels.
  Module m = parse_module(
      "graph @paged(%q: bf16[B, 40, 8, 128], %kp: bf16[17, 16, 2, 128], %vp: bf16[17, 16, 2, 128], %pos: i32[B], %bt: i32[B, 5]) {\n"
      "  %o = attention(%q, %kp, %vp, %pos, %bt) {causal = true}\n  return %o\n}\n"
      "graph @d32(%q: bf16[T, 8, 32], %k: bf16[T, 2, 32], %v: bf16[T, 2, 32]) {\n"
      "  %o = attention(%q, %k, %v) {causal = true}\n  return %o\n}\n",
      "<wgmma attention test>");
  for (const Graph& other : m.graphs) {
    INFO(other.name());
    const FusionGroup grp = plan_fusion(other).groups.at(0);
    CHECK(!emit_group(other, grp, eo).arch_specific);
    EmitOptions forced = eo;
    forced.attention = AttentionConfig::hopper();
    CHECK_THROWS_WITH(emit_group(other, grp, forced), Catch::Contains(other.name() == "paged" ? "paged" : "head_dim is 32"));
  }
}

TEST_CASE("wgmma attention compiles for sm_90a: head_dim 64/128, GQA 1/4/8/16, bf16/f16, causal or not, over a cache", "[codegen]") {
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> what;
  auto target = rt::Target::parse("sm_90a");
  REQUIRE(target.ok());
  std::vector<std::string> graphs;
  for (int d : {64, 128})
    for (int grp : {1, 4, 8, 16})
      graphs.push_back(fmt::format("graph @a{0}_{1}(%q: {2}[T, 16, {0}], %k: {2}[T, {3}, {0}], %v: {2}[T, {3}, {0}]) {{\n"
                                   "  %o = attention(%q, %k, %v) {{causal = {4}}}\n  return %o\n}}\n",
                                   d, grp, grp == 4 ? "f16" : "bf16", 16 / grp, grp == 8 ? "false" : "true"));
  graphs.push_back(
      "graph @cache(%q: bf16[B, 40, 8, 128], %kc: bf16[B, C, 2, 128], %vc: bf16[B, C, 2, 128], %pos: i32[B]) {\n"
      "  %o = attention(%q, %kc, %vc, %pos) {causal = true}\n  return %o\n}\n");
  for (const std::string& text : graphs) {
    Module m = parse_module(text, "<wgmma attention>");
    const Graph& g = m.graphs.at(0);
    for (int bn : {64, 128}) {
      EmitOptions eo;
      eo.arch_specific = true;
      eo.attention = AttentionConfig::hopper();
      eo.attention->bn = bn;
      GeneratedKernel k = emit_group(g, plan_fusion(g).groups.at(0), eo);
      REQUIRE(k.arch_specific);
      jobs.push_back(jit::compile_job(k, *target));
      what.push_back(fmt::format("{} {}", g.name(), eo.attention->str()));
    }
  }
  compile_every_one(jobs, what);
}

TEST_CASE("attention configs print and parse back, malformed text is refused", "[codegen]") {
  for (AttentionConfig c : {AttentionConfig{}, AttentionConfig{64, 1, 64, 3}, AttentionConfig{128, 2, 32, 2},
                            AttentionConfig::hopper(), AttentionConfig{128, 1, 64, 3, true}}) {
    std::string error;
    const std::optional<AttentionConfig> back = parse_attention_config(c.str(), &error);
    REQUIRE(back.has_value());
    CHECK(back->str() == c.str());
  }
  for (const char* bad : {"128x2x64", "128x2x64x2x1", "axbxcxd", "0x1x64x2", "128x2x64x", "", "128 x2x64x2"}) {
    INFO(bad);
    std::string error;
    CHECK(!parse_attention_config(bad, &error).has_value());
    CHECK(error.find("expected BMxMTxBNxSTAGES") != std::string::npos);
  }
  for (const char* bad : {"wgmma bn=128", "wgmma bn=0 stages=2", "wgmma bn=128 stages=2x", "wgmma stages=2 bn=128"}) {
    INFO(bad);
    std::string error;
    CHECK(!parse_attention_config(bad, &error).has_value());
    CHECK(error.find("expected 'wgmma bn=N stages=S'") != std::string::npos);
  }
  // Decode tile sets: "decode bn=N warps=W stages=S" and an optional " chunk=C".
  for (const AttentionConfig& c : decode_attention_candidates()) {
    INFO(c.str());
    const std::optional<AttentionConfig> back = parse_attention_config(c.str(), nullptr);
    REQUIRE(back.has_value());
    CHECK(back->decode);
    CHECK(back->str() == c.str());
  }
  CHECK(decode_attention_candidates()[0].str() == "decode bn=16 warps=4 stages=3");
  for (const char* bad : {"decode bn=16 warps=4", "decode bn=16 warps=4 stages=3 chunk=", "decode bn=16 warps=4 stages=3 chunk=0",
                          "decode bn=16 warps=4 stages=3x", "decode bn=-16 warps=4 stages=3"}) {
    INFO(bad);
    std::string error;
    CHECK(!parse_attention_config(bad, &error).has_value());
    CHECK(error.find("expected 'decode bn=N warps=W stages=S'") != std::string::npos);
  }
  // A decode set for a prefill group (and the reverse) is refused with the reason; a chunk must be
  // whole stages.
  const Graph prefill = llama_prefill(LlamaConfig::llama3_8b());
  const Graph decode = llama_decode(LlamaConfig::llama3_8b());
  auto attention_of = [](const Graph& g) {
    for (const FusionGroup& grp : plan_fusion(g).groups)
      if (grp.kind == GroupKind::Attention) return grp;
    throw std::runtime_error("no attention group");
  };
  EmitOptions eo;
  eo.attention = AttentionConfig::decode_default();
  CHECK_THROWS_WITH(emit_group(prefill, attention_of(prefill), eo), Catch::Contains("is for decode kernels, this group is prefill"));
  eo.attention = AttentionConfig{};
  CHECK_THROWS_WITH(emit_group(decode, attention_of(decode), eo), Catch::Contains("is for prefill kernels, this group is decode"));
  eo.attention = *parse_attention_config("decode bn=16 warps=4 stages=3 chunk=96", nullptr);
  CHECK_THROWS_WITH(emit_group(decode, attention_of(decode), eo), Catch::Contains("a chunk of whole stages"));
  eo.attention = *parse_attention_config("decode bn=32 warps=4 stages=2 chunk=1024", nullptr);
  eo.hint.set("B", 1);
  const GeneratedKernel k = emit_group(decode, attention_of(decode), eo);
  CHECK(k.config == "decode bn=32 warps=4 stages=2 chunk=1024");
  CHECK(k.source.find("lj_flash_decode<lj_bf16, 128, 4, 4, 32, 4, 2, 1024, true>") != std::string::npos);
}
