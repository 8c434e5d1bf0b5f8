// NVRTC in worker processes: the same cubins as in-process compiles; a crash or a hang in one
// compile is that kernel's error, named, while the rest of the plan compiles; a killed worker stores
// nothing in the cache; a worker that cannot start is a clear error.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "cache/kernel_cache.h"
#include "cache/location.h"
#include "jit/compile_plan.h"
#include "layerjit/text.h"
#include "runtime/compile_workers.h"
#include "tests/scoped_temp_dir.h"

using namespace lj;

namespace {

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Four kernels: two matmuls (one with a fused epilogue), an elementwise chain, a row reduction.
const char* kGraph = R"(
graph @w(%x: bf16[T, 512], %w1: param bf16[300, 512], %w2: param bf16[200, 300], %nw: param bf16[200]) {
  %a = matmul(%x, %w1)
  %b = silu(%a)
  %c = matmul(%b, %w2)
  %d = rms_norm(%c, %nw)
  %e = relu(%d)
  %f = exp(%e)
  return %f
})";

struct Compiled {
  std::unique_ptr<Graph> graph;  // the lowered plan may point at it
  Lowered lowered;
  rt::Result<jit::CompiledPlan> plan = rt::Error{"not run"};
};

// Two kernels that compile in a fraction of a second even on a loaded machine: the hang test's
// timeout must only catch the hang.
const char* kSmallGraph = R"(
graph @s(%x: bf16[T, 512], %y: bf16[T, 300], %nw: param bf16[512]) {
  %n = rms_norm(%x, %nw)
  %b = relu(%y)
  return %n, %b
})";

Compiled compile(const std::string& cache_dir, const char* text = kGraph) {
  ScopedEnv dir("LAYERJIT_CACHE_DIR", cache_dir);
  Bindings hint;
  hint.set("T", 100);
  Compiled c;
  c.graph = std::make_unique<Graph>(parse_module(text).graphs.at(0));
  c.lowered = jit::plan(*c.graph, {}, hint);
  auto t = jit::JitTarget::of_arch("sm_80");
  REQUIRE(t.ok());
  jit::PlanCompileOptions o;
  o.hint = hint;
  c.plan = jit::compile_plan(*t, *c.lowered.graph, c.lowered.plan, o);
  return c;
}

}  // namespace

TEST_CASE("compile workers: the same cubins as compiling in this process", "[jit][workers]") {
  const lj::testing::ScopedTempDir a("workers-a"), b("workers-b");
  std::optional<Compiled> in_process, workers;
  {
    ScopedEnv off("LAYERJIT_COMPILE_WORKER", "off");
    in_process.emplace(compile(a.str()));
  }
  {
    ScopedEnv on("LAYERJIT_COMPILE_WORKER", LAYERJIT_COMPILE_WORKER_PATH);
    ScopedEnv jobs("LAYERJIT_COMPILE_JOBS", "3");
    workers.emplace(compile(b.str()));
  }
  REQUIRE(in_process->plan.ok());
  REQUIRE(workers->plan.ok());
  REQUIRE(workers->plan->groups.size() == in_process->plan->groups.size());
  CHECK(workers->plan->groups.size() >= 3);
  for (size_t i = 0; i < workers->plan->groups.size(); ++i) {
    CHECK(workers->plan->groups[i].compiled.program.cubin == in_process->plan->groups[i].compiled.program.cubin);
    CHECK(!workers->plan->groups[i].compiled.cache_hit);
  }
}

TEST_CASE("compile workers: a crash in one compile is that kernel's error, the rest compile, nothing torn is cached", "[jit][workers]") {
  const lj::testing::ScopedTempDir fresh("workers-crash");
  const std::string dir = fresh.str();
  ScopedEnv on("LAYERJIT_COMPILE_WORKER", LAYERJIT_COMPILE_WORKER_PATH);
  ScopedEnv jobs("LAYERJIT_COMPILE_JOBS", "2");
  std::string victim;
  {
    // The matmul with the SwiGLU-free silu epilogue: group 0's kernel.
    ScopedEnv crash("LAYERJIT_TEST_WORKER_CRASH", "_g0_matmul");
    Compiled c = compile(dir);
    REQUIRE(!c.plan.ok());
    const std::string& m = c.plan.message();
    CHECK_THAT(m, Catch::Contains("fusion group 0 (lj_w_g0_matmul"));
    CHECK_THAT(m, Catch::Contains("killed by SIGSEGV"));
    victim = "lj_w_g0_matmul";
  }
  // Every other kernel compiled and was stored; the crashed one was not: a run without the crash
  // compiles exactly that one.
  const int64_t before = rt::nvrtc_compile_count();
  {
    ScopedEnv off("LAYERJIT_COMPILE_WORKER", "off");
    Compiled again = compile(dir);
    REQUIRE(again.plan.ok());
    int hits = 0;
    for (const jit::CompiledGroup& g : again.plan->groups) {
      CHECK(g.compiled.cache_hit == (g.kernel.name != victim));
      hits += g.compiled.cache_hit ? 1 : 0;
    }
    CHECK(hits == static_cast<int>(again.plan->groups.size()) - 1);
  }
  CHECK(rt::nvrtc_compile_count() == before + 1);
}

TEST_CASE("compile workers: a hang past the timeout is killed and reported, the rest compile", "[jit][workers]") {
  ScopedEnv on("LAYERJIT_COMPILE_WORKER", LAYERJIT_COMPILE_WORKER_PATH);
  ScopedEnv jobs("LAYERJIT_COMPILE_JOBS", "2");
  ScopedEnv timeout("LAYERJIT_COMPILE_TIMEOUT", "4.5");
  ScopedEnv hang("LAYERJIT_TEST_WORKER_HANG", "_row_reduce");
  const lj::testing::ScopedTempDir fresh("workers-hang");
  const std::string dir = fresh.str();
  const auto t0 = std::chrono::steady_clock::now();
  Compiled c = compile(dir, kSmallGraph);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(!c.plan.ok());
  CHECK_THAT(c.plan.message(), Catch::Contains("fusion group 0 (lj_s_g0_row_reduce"));
  CHECK_THAT(c.plan.message(), Catch::Contains("did not finish within 4.5 s"));
  CHECK(s < 60);  // killed, not waited for
  // The other kernel compiled and was stored.
  ScopedEnv off("LAYERJIT_COMPILE_WORKER", "off");
  ScopedEnv no_hang("LAYERJIT_TEST_WORKER_HANG", "");
  Compiled again = compile(dir, kSmallGraph);
  REQUIRE(again.plan.ok());
  REQUIRE(again.plan->groups.size() == 2);
  CHECK(!again.plan->groups[0].compiled.cache_hit);  // the one that hung
  CHECK(again.plan->groups[1].compiled.cache_hit);
}

TEST_CASE("compile workers: a worker that cannot start is a clear error, and malformed settings are named", "[jit][workers]") {
  ScopedEnv on("LAYERJIT_COMPILE_WORKER", "/nonexistent/layerjit-compile-worker");
  const lj::testing::ScopedTempDir fresh("workers-missing");
  Compiled c = compile(fresh.str());
  REQUIRE(!c.plan.ok());
  CHECK_THAT(c.plan.message(), Catch::Contains("cannot start the compile worker /nonexistent/layerjit-compile-worker"));
  CHECK_THAT(c.plan.message(), Catch::Contains("'off' compiles in-process"));
  {
    ScopedEnv jobs("LAYERJIT_COMPILE_JOBS", "many");
    std::string error;
    const rt::WorkerSettings s = rt::worker_settings_from_env(&error);
    CHECK_THAT(error, Catch::Contains("LAYERJIT_COMPILE_JOBS='many'"));
    CHECK(s.jobs == 0);
  }
  {
    ScopedEnv timeout("LAYERJIT_COMPILE_TIMEOUT", "-3");
    std::string error;
    rt::worker_settings_from_env(&error);
    CHECK_THAT(error, Catch::Contains("LAYERJIT_COMPILE_TIMEOUT='-3'"));
  }
}
