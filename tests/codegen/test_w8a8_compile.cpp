// INT8 W8A8 GEMMs (i8 x, i8 W, exact s32 sums returned as f32): every tensor-core config the pruner
// accepts for the Llama-3-8B projection shapes and for odd ones compiles, multiplies with the s8
// instructions (a 16-bit MMA in the PTX would mean the i8 path fell back to another dtype's) and does
// not spill registers beyond the known cases listed below; the pruner's i8 rules and the i8 defaults
// against the bf16 ones. No GPU needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "codegen/kernel.h"
#include "jit/compile_kernels.h"
#include "layerjit/text.h"
#include "runtime/kernel_resources.h"
#include "runtime/nvrtc.h"

using namespace lj;

namespace {

// A W8A8 projection as the IR spells its scales (tests/filecheck/codegen/w8a8_matmul.lj): the
// token's scale as matmul's row_scale, the per-channel weight scale and the cast in the epilogue.
Graph w8a8_projection(int64_t n, int64_t k) {
  Module m = parse_module(fmt::format("graph @w8a8_{}x{}(%x: i8[M, {}], %w: param i8[{}, {}], %xs: f32[M], %ws: param f32[{}]) {{\n"
                                      "  %acc = matmul(%x, %w, %xs) {{out_dtype = f32}}\n"
                                      "  %y = mul(%acc, %ws)\n"
                                      "  %o = cast(%y) {{dtype = bf16}}\n"
                                      "  return %o\n}}\n",
                                      n, k, k, n, k, n),
                          "<w8a8>");
  return std::move(m.graphs.at(0));
}

EmitOptions options_for(int sm, int64_t m) {  // sm = 91 stands for sm_90a
  EmitOptions eo;
  eo.sm = sm == 91 ? 90 : sm;
  eo.arch_specific = sm == 91;
  eo.hint.set("M", m);
  eo.max_shared_bytes = sm == 80 ? 163 * 1024 : 227 * 1024;  // A100, H100/H200 opt-in limits
  return eo;
}

// Candidates that spill under CUDA 13's ptxas (spill bytes stored + loaded, the most over the shapes
// below), found by this sweep. They run correctly and the tuner times them like any other; a spill
// costs speed only. `bf16` marks those whose bf16 twin (same tile and shape, bk halved for mma.sync;
// K = 1001 for element loads) spills too, compiled once by hand; the others are i8's own (why is not
// investigated). Theirs to fix are the kernels and the pruner (which might refuse them); they are
// listed here so that a new spill, above all in a default, fails.
struct KnownSpill {
  const char* config;
  bool element_loads;  // K % 16 != 0: the lj_gemm path without cp.async
  int64_t bytes;
  bool bf16;
};
constexpr KnownSpill kKnownSpills[] = {
    {"mma bm=64 bn=128 bk=64 wm=2 wn=2 stages=3 gm=8", false, 8, false},
    {"mma bm=64 bn=128 bk=64 wm=2 wn=2 stages=4 gm=8", false, 8, false},
    {"mma bm=128 bn=64 bk=64 wm=2 wn=2 stages=3 gm=8", false, 8, true},
    {"mma bm=128 bn=64 bk=64 wm=2 wn=2 stages=4 gm=8", false, 8, true},
    {"mma bm=128 bn=128 bk=128 wm=2 wn=2 stages=3 gm=8", false, 56, false},
    {"mma bm=128 bn=128 bk=128 wm=2 wn=2 stages=4 gm=8", false, 56, false},
    {"mma bm=32 bn=64 bk=128 wm=2 wn=2 stages=8 gm=8", false, 16, false},
    {"mma bm=16 bn=128 bk=128 wm=1 wn=4 stages=4 gm=8", false, 8, false},
    // The 128-row wgmma kernels spilled more (ping-pong 264-752 bytes, split-K 112-272, 16 at
    // K = 1008) while ptxas ignored their setmaxnreg; what is left is split-K's partial sums.
    {"wgmma bm=128 bn=128 stages=4 gm=8 sk=2", false, 16, false},
    {"wgmma bm=128 bn=256 stages=4 gm=8 sk=2", false, 24, false},
    // 64-row tiles keep the launch's registers (two CTAs an SM: 128 a thread).
    {"wgmma bm=64 bn=128 stages=4 gm=8", false, 308, true},
    {"wgmma bm=64 bn=96 stages=4 gm=8", false, 8, false},
    // Element loads (K % 16 != 0): i8 keeps the 16-bit bk there (matmul_config.cpp, bk_scale), so the
    // default (128 x 128, bk=32) does not spill; with bk doubled it spilled 144 bytes. These are the
    // candidates that still do (their bf16 twins not compiled).
    {"mma bm=128 bn=128 bk=64 wm=2 wn=2 stages=4 gm=8", true, 144, false},
    {"mma bm=128 bn=128 bk=64 wm=2 wn=2 stages=3 gm=8", true, 88, false},
    {"mma bm=128 bn=64 bk=32 wm=2 wn=2 stages=3 gm=8", true, 8, false},
    {"mma bm=128 bn=64 bk=32 wm=2 wn=2 stages=4 gm=8", true, 8, false},
    {"mma bm=64 bn=128 bk=32 wm=2 wn=2 stages=3 gm=8", true, 8, false},
    {"mma bm=64 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8", true, 8, false},
    // (The i8 default for 33-128 rows on sm_80, 64 x 64 with bk=128, spilled 248 bytes at K of about
    // 1024, where its 8 k tiles made NVVM unroll the whole k loop; lj_gemm no longer unrolls i8's.)
};

int64_t allowed_spill_bytes(const std::string& config, bool element_loads) {
  for (const KnownSpill& s : kKnownSpills)
    if (config == s.config && element_loads == s.element_loads) return s.bytes;
  return 0;
}

struct Shape {
  int64_t n, k;
  std::vector<int64_t> rows;  // M hints: each has its own candidate list
  bool every_candidate;       // else the defaults only
};

// Compiles the tensor-core configs of each shape: mma.sync for the first target that lists them
// (sm_80, or sm_90 for those only its larger shared memory admits; the emitter does not specialise
// mma.sync sources on the SM, so sm_90's are sm_80's), wgmma for sm_90a. The GEMV candidates (M =
// 16) are left to the bf16 and fp8 sweeps: they differ from the GEMV default in constants only. A
// kernel's source does not depend on M, only the candidate list does, so jobs are deduplicated by
// source: the rows of a shape cost only the configs that no other M lists.
// nvrtc false: the emitters alone, each source twice (deterministic), for the sanitizer build, which
// skips the compile sweeps (their time is NVRTC's, which the sanitizers do not instrument).
void compile_w8a8(const std::vector<Shape>& shapes, int min_mma, int min_wgmma, bool nvrtc = true) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<rt::CompileJob> jobs;
  std::vector<std::string> what, kernel, config;
  std::vector<bool> wgmma, element_loads;
  std::set<std::string> seen;
  for (const Shape& s : shapes) {
    const Graph g = w8a8_projection(s.n, s.k);
    const FusionPlan plan = plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    for (int64_t m : s.rows)
      for (int sm : {80, 90, 91}) {
        EmitOptions eo = options_for(sm, m);
        const MatmulProblem p = matmul_problem(g, plan.groups[0], eo);
        REQUIRE(p.dtype == DType::I8);
        REQUIRE(p.aligned == (s.k % 16 == 0));
        std::vector<MatmulConfig> configs{default_matmul_config(p)};
        if (s.every_candidate) configs = matmul_candidates(p);
        for (const MatmulConfig& c : configs) {
          if (c.family == MatmulConfig::Family::Gemv) continue;
          if (sm == 91 && c.family != MatmulConfig::Family::Wgmma) continue;  // the sm_90 sources
          eo.matmul = c;
          const GeneratedKernel k = emit_group(g, plan.groups[0], eo);
          if (!nvrtc) CHECK(emit_group(g, plan.groups[0], eo).source == k.source);
          if (!seen.insert(k.source).second) continue;
          rt::CompileJob job = jit::compile_job(k, *rt::Target::parse(sm == 80 ? "sm_80" : sm == 90 ? "sm_90" : "sm_90a"));
          job.options.want_ptx = true;
          what.push_back(fmt::format("{} (M = {}) for {}: {}", k.name, m, job.target.name(), c.str()));
          jobs.push_back(std::move(job));
          kernel.push_back(k.name);
          config.push_back(c.str());
          wgmma.push_back(c.family == MatmulConfig::Family::Wgmma);
          element_loads.push_back(!p.aligned);
        }
      }
  }
  const auto wgmma_jobs = std::count(wgmma.begin(), wgmma.end(), true);
  CHECK(static_cast<int>(jobs.size() - wgmma_jobs) >= min_mma);
  CHECK(wgmma_jobs >= min_wgmma);
  if (!nvrtc) return;
  auto results = rt::compile_parallel(jobs);
  REQUIRE(results.size() == jobs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(what[i] << "\n" << (results[i].ok() ? "" : results[i].message()));
    REQUIRE(results[i].ok());
    // Every cubin compile has ptxas report its resources (nvrtc_options): kernel_resources' figures
    // without a second compile.
    const std::optional<rt::KernelResources> r = rt::parse_ptxas_info(results[i]->log, kernel[i]);
    REQUIRE(r.has_value());
    CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
    INFO(r->str());
    CHECK(r->spill_store_bytes + r->spill_load_bytes <= allowed_spill_bytes(config[i], element_loads[i]));
    const std::string& ptx = results[i]->ptx;
    if (wgmma[i]) {
      CHECK(ptx.find("wgmma.mma_async.sync.aligned.") != std::string::npos);
      CHECK(ptx.find("k32.s32.s8.s8") != std::string::npos);
    } else {
      CHECK(ptx.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos);
    }
    CHECK(ptx.find("bf16.bf16") == std::string::npos);  // no 16-bit MMA
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN(fmt::format("{} mma.sync + {} wgmma kernels compiled in {:.0f} s", jobs.size() - wgmma_jobs, wgmma_jobs, seconds));
}

}  // namespace

// The four projections at M = 16, 128 and 4096. qkv and down (K = 4096 and 14336) get every
// candidate; o and gate_up differ from qkv in N only (a constant of the grid and the edge masks), so
// they get their defaults: 217 kernels in 40-74 s on 2 shared cores (every candidate of all four:
// 416 in 148 s), so that this case and the odd shapes' (40-71 s) stay under 3 minutes together.
TEST_CASE("W8A8: every mma.sync and wgmma config the pruner accepts for the Llama-3-8B projections compiles with s8 MMAs", "[codegen]") {
  const std::vector<int64_t> rows{16, 128, 4096};
  compile_w8a8({{6144, 4096, rows, true}, {4096, 14336, rows, true}, {4096, 4096, rows, false}, {28672, 4096, rows, false}}, 120, 60);
}

// M = N = 1000 with K = 1008 (rows 16-byte aligned: cp.async and TMA, but K is not a multiple of
// 32, one mma k step, nor of 128, one wgmma k tile) and K = 1001 (rows not aligned: element loads,
// so no TMA and no wgmma).
TEST_CASE("W8A8: every config the pruner accepts for odd shapes compiles, K = 1008 and K = 1001 (element loads)", "[codegen]") {
  compile_w8a8({{1000, 1008, {1000}, true}, {1000, 1001, {1000}, true}}, 40, 5);
}

TEST_CASE("W8A8: every kernel of the two compile sweeps above is emitted, deterministically (no NVRTC)", "[codegen]") {
  const std::vector<int64_t> rows{16, 128, 4096};
  compile_w8a8({{6144, 4096, rows, true}, {4096, 14336, rows, true}, {4096, 4096, rows, false}, {28672, 4096, rows, false}}, 120, 60, false);
  compile_w8a8({{1000, 1008, {1000}, true}, {1000, 1001, {1000}, true}}, 40, 5, false);
}

TEST_CASE("W8A8: the pruner's k tile for i8 and the i8 defaults against the bf16 ones", "[codegen]") {
  MatmulProblem i8;
  i8.m = 4096, i8.n = 6144, i8.k = 4096, i8.sm = 80, i8.dtype = DType::I8, i8.max_shared_bytes = 163 * 1024;
  // An i8 k tile is 32, 64 or 128 elements: 32-128 bytes per tile row, as bk = 16-64 for 16-bit.
  MatmulConfig c = *parse_matmul_config("mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8", nullptr);
  for (int bk : {32, 64, 128}) {
    c.bk = bk;
    INFO(c.str());
    CHECK(reject_reason(c, i8).empty());
  }
  c.bk = 16;
  CHECK(reject_reason(c, i8) == "bk=16 (32, 64 or 128 for i8)");
  MatmulProblem bf16 = i8;
  bf16.dtype = DType::BF16;
  CHECK(reject_reason(c, bf16).empty());
  c.bk = 128;
  CHECK(reject_reason(c, bf16) == "bk=128 (16, 32 or 64)");

  // The defaults: mma.sync takes the bf16 tile with bk doubled (the same bytes per stage), wgmma the
  // same tile (its k tile is one 128-byte row either way), with two exceptions on sm_90a: the o
  // projection at M = 128, where i8 follows fp8's 1-byte rule (a split CTA keeps 24 k tiles, 32 here),
  // and 64 x 64 tiles fit one wave (bf16: 128 x 64 split 2 ways); gate_up at M = 4096, where i8 takes
  // the ping-pong 128 x 128 tiles (the s8 MMAs leave the epilogue twice the weight).
  int differ = 0;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}})
    for (const int64_t m : {16, 32, 128, 4096})
      for (const bool hopper : {false, true}) {
        MatmulProblem p;
        p.m = m, p.n = n, p.k = k, p.sm = hopper ? 90 : 80, p.arch_specific = hopper, p.tma = hopper;
        p.max_shared_bytes = hopper ? 227 * 1024 : 163 * 1024;
        MatmulProblem q = p;
        q.dtype = DType::I8;
        const MatmulConfig b = default_matmul_config(p), d = default_matmul_config(q);
        INFO(n << "x" << k << " M = " << m << (hopper ? " sm_90a" : " sm_80") << ": bf16 " << b.str() << ", i8 " << d.str());
        CHECK(d.family == b.family);
        if (hopper && m == 128 && n == 4096 && k == 4096) {
          CHECK(b.str() == "wgmma bm=128 bn=64 stages=8 gm=8 sk=2");
          CHECK(d.str() == "wgmma bm=64 bn=64 stages=8 gm=8");
          ++differ;
          continue;
        }
        if (hopper && m == 4096 && n == 28672) {
          CHECK(b.str() == "wgmma bm=128 bn=256 stages=4 gm=8");
          CHECK(d.str() == "wgmma bm=128 bn=128 stages=4 gm=8 pingpong");
          ++differ;
          continue;
        }
        MatmulConfig expect = b;
        if (b.family == MatmulConfig::Family::Mma) expect.bk *= 2;
        CHECK(d == expect);
        CHECK(d.shared_bytes(1) == b.shared_bytes(2));
      }
  CHECK(differ == 2);
}

TEST_CASE("W8A8: one row takes the tensor-core GEMV on m16n8k32 s8, every candidate compiles for sm_80 and sm_90a without spills",
          "[codegen]") {
  // The four projections and an odd shape (N = 1000, K = 1008); the GEMV's k steps are 64 elements,
  // 16 bytes per lane, so K must be a multiple of 16 (K = 1001 keeps the SIMT GEMV).
  int compiled = 0, bulk = 0;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {1000, 1008}})
    for (const int sm : {80, 91}) {
      const Graph g = w8a8_projection(n, k);
      const FusionPlan plan = plan_fusion(g);
      EmitOptions eo = options_for(sm, 1);
      const MatmulProblem p = matmul_problem(g, plan.groups[0], eo);
      const MatmulConfig d = default_matmul_config(p);
      INFO(n << "x" << k << (sm == 91 ? " sm_90a" : " sm_80") << ": default " << d.str());
      CHECK(d.str() == "gemv mma u=4 warps=8");
      for (const MatmulConfig& c : matmul_candidates(p)) {
        if (c.family != MatmulConfig::Family::Gemv || !c.tensor_cores) continue;
        eo.matmul = c;
        const GeneratedKernel kern = emit_group(g, plan.groups[0], eo);
        INFO(c.str());
        CHECK(kern.source.find(c.code_stages > 0   ? "lj_gemv_mma_share_s8_staged<S, K>("
                               : c.bulk_stages > 0 ? "lj_gemv_mma_share_s8_bulk<S, KB, WARPS, K>("
                                                   : "lj_gemv_mma_share_s8_pre<U, K>(") != std::string::npos);
        bulk += c.bulk_stages > 0;
        auto r = jit::kernel_resources(kern, *rt::Target::parse(sm == 80 ? "sm_80" : "sm_90a"));
        REQUIRE(r.ok());
        CHECK(!r->performance_loss());  // no ptxas "Performance Loss" note
        INFO(r->str());
        CHECK(!r->spills());
        ++compiled;
      }
    }
  CHECK(compiled >= 100);  // u = 2 and 4 and staged, with 4, 8 and 16 warps (fewer where K is short)
  CHECK(bulk == 3 * 4 + 6 + 2);  // bulk on sm_90a only: 2 and 4 stages where K = 4096, 2 to 6 at 14336, 2 at 1008
  // Its PTX: s8 MMAs only, and where K is not a multiple of 16 the SIMT GEMV stays the default.
  const Graph g = w8a8_projection(4096, 4096);
  EmitOptions eo = options_for(80, 1);
  std::vector<rt::CompileJob> jobs{jit::compile_job(emit_group(g, plan_fusion(g).groups[0], eo), *rt::Target::parse("sm_80"))};
  jobs[0].options.want_ptx = true;
  auto result = rt::compile_parallel(jobs);
  REQUIRE(result.size() == 1);
  REQUIRE(result[0].ok());
  CHECK(result[0]->ptx.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos);
  CHECK(result[0]->ptx.find("f32.e4m3") == std::string::npos);
  const Graph odd = w8a8_projection(1000, 1001);
  CHECK(default_matmul_config(matmul_problem(odd, plan_fusion(odd).groups[0], options_for(80, 1))).str().rfind("gemv mt=", 0) == 0);
}
