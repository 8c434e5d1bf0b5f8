// jit::compile_plan: the one compile path the executable, the CLI, the tuner and the benchmarks
// share. Every check here runs without a GPU (NVRTC only).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "cache/location.h"
#include "jit/compile_plan.h"
#include "jit/tuned_config.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"

using namespace lj;

namespace {

// A projection over a run-time row count: the GEMM at T = 4096, with several configs to choose.
const char* kProjection = R"(
graph @proj(%x: bf16[T, 4096], %w: param bf16[1000, 4096]) -> bf16[T, 1000] {
  %y = matmul(%x, %w)
  return %y
})";

// A cache root of its own, named to LAYERJIT_CACHE_DIR while the test runs (compile_plan and the
// tuning DB open what the environment names).
struct ScopedCacheDir {
  std::filesystem::path dir;
  ScopedCacheDir() : dir(std::filesystem::temp_directory_path() / fmt::format("layerjit-test-jit-{}", ::getpid())) {
    std::filesystem::remove_all(dir);
    ::setenv("LAYERJIT_CACHE_DIR", dir.c_str(), 1);
  }
  ~ScopedCacheDir() {
    ::unsetenv("LAYERJIT_CACHE_DIR");
    std::filesystem::remove_all(dir);
  }
};

// Stores `config` as the tuning winner of `grp` at `hint`'s bucket on `t`, in the cache dir's DB.
void record_winner(const ScopedCacheDir& dir, const jit::JitTarget& t, const Graph& g, const FusionGroup& grp, const Bindings& hint,
                   const std::string& config) {
  cache::CacheOptions co;
  co.root = dir.dir;
  co.durable = false;
  auto db = cache::TuningDb::open(co);
  REQUIRE(db->enabled());
  const cache::Measured m{config, 100.0, 1.0};
  REQUIRE(db->record(jit::tuning_key(t, g, grp, jit::bucket(hint)), std::span(&m, 1)).ok);
}

jit::JitTarget hopper(std::string driver) {
  auto t = jit::JitTarget::of_arch("sm_90a");
  REQUIRE(t.ok());
  t->driver_version = std::move(driver);
  return *t;
}

Bindings rows(int64_t t) {
  Bindings b;
  b.set("T", t);
  return b;
}

}  // namespace

TEST_CASE("compile_plan: a given config wins, a tuned record applies where the driver matches, else the default", "[jit]") {
  ScopedCacheDir cache_dir;
  const Graph g = parse_module(kProjection).graphs.at(0);
  const Lowered l = jit::plan(g, {}, rows(3000));
  REQUIRE(l.plan.groups.size() == 1);
  const FusionGroup& mm = l.plan.groups[0];
  jit::PlanCompileOptions o;
  o.hint = rows(3000);
  o.compile = false;

  const jit::JitTarget t = hopper("13.0");
  auto plain = jit::compile_plan(t, *l.graph, l.plan, o);
  REQUIRE(plain.ok());
  const std::string def = plain->groups.at(0).kernel.config;
  CHECK(plain->groups[0].origin == jit::ConfigOrigin::Default);
  CHECK(plain->groups[0].config_source == "default");

  // A record at T = 3000's bucket (T<=4096) naming another config than the default.
  const std::string other = def == "wgmma bm=128 bn=128 stages=4 gm=8" ? "wgmma bm=128 bn=256 stages=3 gm=8" : "wgmma bm=128 bn=128 stages=4 gm=8";
  record_winner(cache_dir, t, *l.graph, mm, rows(3000), other);
  auto tuned = jit::compile_plan(t, *l.graph, l.plan, o);
  REQUIRE(tuned.ok());
  CHECK(tuned->groups[0].origin == jit::ConfigOrigin::Tuned);
  CHECK(tuned->groups[0].config_source == "tuned (T<=4096)");
  CHECK(tuned->groups[0].kernel.config == other);
  CHECK(tuned->groups[0].kernel.source != plain->groups[0].kernel.source);

  // The same sizes on another driver, or with tuning off, or with no driver at all: the default.
  for (const jit::JitTarget& u : {hopper("12.8"), hopper("")}) {
    auto r = jit::compile_plan(u, *l.graph, l.plan, o);
    REQUIRE(r.ok());
    CHECK(r->groups[0].kernel.config == def);
  }
  jit::PlanCompileOptions untuned = o;
  untuned.use_tuned = false;
  CHECK(jit::compile_plan(t, *l.graph, l.plan, untuned)->groups[0].kernel.config == def);
  // Another bucket finds no record.
  jit::PlanCompileOptions big = o;
  big.hint = rows(5000);
  CHECK(jit::compile_plan(t, *l.graph, l.plan, big)->groups[0].origin == jit::ConfigOrigin::Default);

  // A given config wins over the record.
  jit::PlanCompileOptions given = o;
  std::string why;
  given.matmul = parse_matmul_config("mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8", &why);
  REQUIRE(given.matmul);
  auto g2 = jit::compile_plan(t, *l.graph, l.plan, given);
  REQUIRE(g2.ok());
  CHECK(g2->groups[0].origin == jit::ConfigOrigin::Given);
  CHECK(g2->groups[0].kernel.config == "mma bm=128 bn=128 bk=32 wm=2 wn=2 stages=4 gm=8");
  // One the emitter refuses is the caller's error, named.
  given.matmul = parse_matmul_config("gemv mma u=4 warps=8", &why);  // fp8 only
  REQUIRE(given.matmul);
  CHECK_THROWS_WITH(jit::compile_plan(t, *l.graph, l.plan, given), Catch::Contains("gemv mma multiplies fp8 x and W"));
}

TEST_CASE("compile_plan: a record that no longer fits the group falls back to the default and says why", "[jit]") {
  ScopedCacheDir cache_dir;
  const Graph g = parse_module(kProjection).graphs.at(0);
  const Lowered l = jit::plan(g, {}, rows(4096));
  const jit::JitTarget t = hopper("13.0");
  record_winner(cache_dir, t, *l.graph, l.plan.groups[0], rows(4096), "not a config");
  jit::PlanCompileOptions o;
  o.hint = rows(4096);
  o.compile = false;
  auto r = jit::compile_plan(t, *l.graph, l.plan, o);
  REQUIRE(r.ok());
  CHECK(r->groups[0].origin == jit::ConfigOrigin::Default);
  CHECK_THAT(r->groups[0].config_source, Catch::StartsWith("default (the stored tuning 'not a config' does not apply: "));
}

TEST_CASE("compile_plan: a second compile takes every cubin from the cache and still gives the PTX", "[jit]") {
  ScopedCacheDir cache_dir;
  const Graph g = parse_module(kProjection).graphs.at(0);
  const Lowered l = jit::plan(g, {}, rows(7));
  auto t = jit::JitTarget::of_arch("sm_80");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = rows(7);
  o.want_ptx = true;
  auto cold = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(cold.ok());
  CHECK(cold->cache_hits == 0);
  const int64_t nvrtc_before_warm = rt::nvrtc_compile_count();
  auto warm = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(warm.ok());
  CHECK(rt::nvrtc_compile_count() == nvrtc_before_warm);  // the warm path reads files only: cubins and PTX
  CHECK(warm->cache_hits == static_cast<int>(warm->groups.size()));
  for (size_t i = 0; i < warm->groups.size(); ++i) {
    const jit::CompiledKernel& a = cold->groups[i].compiled;
    const jit::CompiledKernel& b = warm->groups[i].compiled;
    CHECK(b.cache_hit);
    CHECK(a.key == b.key);
    CHECK(a.program.cubin == b.program.cubin);
    CHECK(!b.program.ptx.empty());
    CHECK(a.program.ptx == b.program.ptx);  // the PTX-only compile gives the cubin compile's text
  }
  // Without the cache: NVRTC every time, nothing reported as a hit.
  o.use_cache = false;
  auto fresh = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(fresh.ok());
  CHECK(fresh->cache_hits == 0);
  CHECK(fresh->groups[0].compiled.program.cubin == cold->groups[0].compiled.program.cubin);
}

TEST_CASE("compile_plan: progress hears of every kernel once, in order of finishing, hits at once", "[jit]") {
  ScopedCacheDir cache_dir;
  const Graph g = parse_module(kProjection).graphs.at(0);
  const Lowered l = jit::plan(g, {}, rows(3));
  auto t = jit::JitTarget::of_arch("sm_80");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = rows(3);
  std::vector<jit::CompileProgress> heard;
  o.progress = [&](const jit::CompileProgress& p) { heard.push_back(p); };
  auto cold = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(cold.ok());
  REQUIRE(heard.size() == cold->groups.size());
  for (size_t i = 0; i < heard.size(); ++i) {
    CHECK(heard[i].done == i + 1);
    CHECK(heard[i].total == heard.size());
    CHECK(heard[i].ok);
    CHECK(!heard[i].cache_hit);
    CHECK(heard[i].seconds > 0);
  }
  CHECK(heard[0].name == cold->groups[0].kernel.name);  // one kernel here: its name
  heard.clear();
  auto warm = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(warm.ok());
  REQUIRE(heard.size() == warm->groups.size());
  for (const jit::CompileProgress& p : heard) CHECK(p.cache_hit);
}

TEST_CASE("compile_plans: several plans in one batch give each plan what compile_plan gives it, progress over the batch", "[jit]") {
  ScopedCacheDir cache_dir;
  const Module m = parse_module(R"(
graph @proj(%x: bf16[T, 4096], %w: param bf16[1000, 4096]) -> bf16[T, 1000] {
  %y = matmul(%x, %w)
  return %y
}
graph @norm(%x: bf16[T, 300], %g: param bf16[300]) -> bf16[T, 300] {
  %y = rms_norm(%x, %g) {eps = 1e-05}
  return %y
})");
  const Lowered a = jit::plan(m.graphs.at(0), {}, rows(9));
  const Lowered b = jit::plan(m.graphs.at(1), {}, rows(9));
  auto t = jit::JitTarget::of_arch("sm_80");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = rows(9);
  o.use_cache = false;  // NVRTC for both: the batch is what is compared
  std::vector<jit::CompileProgress> heard;
  o.progress = [&](const jit::CompileProgress& p) { heard.push_back(p); };
  const std::vector<jit::PlanToCompile> both = {{a.graph.get(), &a.plan}, {b.graph.get(), &b.plan}};
  auto batch = jit::compile_plans(*t, both, o);
  REQUIRE(batch.size() == 2);
  REQUIRE(batch[0].ok());
  REQUIRE(batch[1].ok());
  const size_t kernels = batch[0]->groups.size() + batch[1]->groups.size();
  REQUIRE(heard.size() == kernels);
  for (const jit::CompileProgress& p : heard) CHECK(p.total == kernels);
  CHECK(heard.back().done == kernels);
  o.progress = nullptr;
  const Lowered* each[] = {&a, &b};
  for (size_t i = 0; i < 2; ++i) {
    auto alone = jit::compile_plan(*t, *each[i]->graph, each[i]->plan, o);
    REQUIRE(alone.ok());
    REQUIRE(alone->groups.size() == batch[i]->groups.size());
    for (size_t k = 0; k < alone->groups.size(); ++k) {
      CHECK(batch[i]->groups[k].kernel.name == alone->groups[k].kernel.name);
      CHECK(batch[i]->groups[k].kernel.source == alone->groups[k].kernel.source);
      CHECK(batch[i]->groups[k].compiled.program.cubin == alone->groups[k].compiled.program.cubin);
    }
  }
  CHECK(batch[0]->compile_seconds == batch[1]->compile_seconds);  // the batch's wall time, in each
}

TEST_CASE("compile_plan: the PTX of a cubin cached without it is compiled once, then read from the cache", "[jit]") {
  ScopedCacheDir cache_dir;
  const Graph g = parse_module(kProjection).graphs.at(0);
  const Lowered l = jit::plan(g, {}, rows(5));
  auto t = jit::JitTarget::of_arch("sm_90");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = rows(5);
  auto cubins = jit::compile_plan(*t, *l.graph, l.plan, o);  // no PTX asked for: none cached
  REQUIRE(cubins.ok());
  const int64_t groups = static_cast<int64_t>(cubins->groups.size());
  o.want_ptx = true;
  int64_t before = rt::nvrtc_compile_count();
  auto first = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(first.ok());
  CHECK(rt::nvrtc_compile_count() == before + groups);  // one PTX-only compile per kernel, no cubin
  CHECK(first->cache_hits == groups);
  before = rt::nvrtc_compile_count();
  auto second = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(second.ok());
  CHECK(rt::nvrtc_compile_count() == before);
  for (size_t i = 0; i < second->groups.size(); ++i) {
    CHECK(!second->groups[i].compiled.program.ptx.empty());
    CHECK(second->groups[i].compiled.program.ptx == first->groups[i].compiled.program.ptx);
  }
  // A PTX-only target (a GPU newer than NVRTC) is cached too: its image is the PTX.
  jit::JitTarget ptx_target = *t;
  ptx_target.target.ptx_only = true;  // compute_90, as choose_target picks for such a GPU
  o.want_ptx = false;
  auto jit_ptx = jit::compile_plan(ptx_target, *l.graph, l.plan, o);
  REQUIRE(jit_ptx.ok());
  before = rt::nvrtc_compile_count();
  auto jit_ptx_again = jit::compile_plan(ptx_target, *l.graph, l.plan, o);
  REQUIRE(jit_ptx_again.ok());
  CHECK(rt::nvrtc_compile_count() == before);
  CHECK(jit_ptx_again->cache_hits == groups);
  CHECK(jit_ptx_again->groups[0].compiled.program.image() == jit_ptx->groups[0].compiled.program.image());
  CHECK(jit_ptx_again->groups[0].compiled.program.image().find(".target sm_90") != std::string::npos);
}

TEST_CASE("compile_plan: a group without a kernel generator is an error naming it, or listed when skipped", "[jit]") {
  const Graph g = parse_module(R"(
graph @r(%x: f32[T, 7]) {
  %y = reduce_sum(%x) {axis = 0}
  return %y
})").graphs.at(0);
  const Lowered l = jit::plan(g, {});
  auto t = jit::JitTarget::of_arch("sm_90");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.compile = false;
  CHECK_THROWS_WITH(jit::compile_plan(*t, *l.graph, l.plan, o), Catch::Contains("group 0 of @r is a reduce group"));
  o.skip_ungenerated = true;
  auto r = jit::compile_plan(*t, *l.graph, l.plan, o);
  REQUIRE(r.ok());
  CHECK(r->groups.empty());
  REQUIRE(r->not_generated.size() == 1);
  CHECK(r->not_generated[0].kind == GroupKind::Reduce);
  CHECK(!jit::JitTarget::of_arch("compute_90").ok());  // the JIT writes cubins
}
