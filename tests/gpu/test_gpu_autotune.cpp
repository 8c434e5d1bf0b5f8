// GPU tier: the autotuner. Its measuring core must reject a candidate whose output differs from the
// default config's, survive candidates that do not compile or cannot launch, and respect a budget;
// tuning a matmul group end to end must verify every pruned config against the default (none may
// be rejected: they are all correct kernels) and store the winner in the tuning DB.
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <filesystem>

#include <fmt/format.h>

#include "cache/tuning_db.h"
#include "codegen/device_headers.h"
#include "layerjit/text.h"
#include "runtime/fill.h"
#include "tests/gpu/gpu_test_support.h"
#include "exec/executable.h"
#include "runtime/nvrtc.h"
#include "tune/tune_group.h"

using namespace lj;

namespace {

Graph matmul_graph(int64_t n, int64_t k) {
  Module m = parse_module(fmt::format("graph @tune_{}x{}(%x: bf16[M, {}], %w: param bf16[{}, {}]) {{\n"
                                      "  %y = matmul(%x, %w)\n  return %y\n}}\n",
                                      n, k, k, n, k),
                          "<autotune test>");
  return std::move(m.graphs.at(0));
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// A tuning DB of its own under the temp directory (not durable: no fsync in tests), removed after.
struct TempTuningDb {
  std::filesystem::path dir;
  std::unique_ptr<cache::TuningDb> db;
  explicit TempTuningDb(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / fmt::format("{}-{}", name, ::getpid())) {
    std::filesystem::remove_all(dir);
    cache::CacheOptions co;
    co.root = dir;
    co.durable = false;
    db = cache::TuningDb::open(co);
  }
  ~TempTuningDb() { std::filesystem::remove_all(dir); }
  // An executable built with this DB (and kernel cache) as the one LAYERJIT_CACHE_DIR names.
  rt::Result<exec::Executable> build(rt::Context& ctx, const Graph& g, const exec::BuildOptions& bo) const {
    ::setenv("LAYERJIT_CACHE_DIR", dir.c_str(), 1);
    auto e = exec::Executable::build(ctx, g, bo);
    ::unsetenv("LAYERJIT_CACHE_DIR");
    return e;
  }
};

// Tunes the single group of `g` at `b`, recording into `db`.
rt::Result<tune::GroupTuning> tune_single_group(rt::Stream& stream, const Graph& g, const Bindings& b, cache::TuningDb* db) {
  const FusionPlan plan = plan_fusion(g);
  REQUIRE(plan.groups.size() == 1);
  tune::TuneSettings s;
  s.db = db;
  return tune::tune_group(stream, g, plan.groups[0], b, s);
}

}  // namespace

TEST_CASE("the autotuner rejects a wrong candidate and survives broken ones", "[gpu][autotune]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  const Graph g = matmul_graph(129, 1000);
  const FusionPlan plan = plan_fusion(g);
  const FusionGroup& grp = plan.groups.at(0);
  Bindings b;
  b.set("M", 300);
  EmitOptions eo;
  eo.hint = b;
  GeneratedKernel k = emit_group(g, grp, eo);
  const rt::LaunchConfig lc = rt::LaunchConfig::linear(static_cast<unsigned>(k.launch.blocks(b)), static_cast<unsigned>(k.launch.threads),
                                                       static_cast<unsigned>(k.launch.shared_bytes));
  rt::TuneProblem p;
  auto archs = rt::supported_archs();
  LJ_REQUIRE_OK(archs);
  auto choice = rt::choose_target(ctx.info().cc(), false, *archs, rt::nvrtc_version());
  LJ_REQUIRE_OK(choice);
  rt::CompileJob job;
  job.options.headers = codegen_device_headers();
  job.target = choice->target;
  auto with = [&](const std::string& source) {
    rt::CompileJob j = job;
    j.source = source;
    return j;
  };
  // 0: the default. 1: the same kernel with every output 6% too large (a subtly wrong kernel).
  // 2: a syntax error. 3: asks for more shared memory than any block may have. 4: correct again.
  const std::string wrong = replace_once(k.source, "const float r = y[j];", "const float r = y[j] * 1.0625f;");
  const std::string broken = replace_once(k.source, "Gemm::tile(M, m0, n0);", "Gemm::tile(M, m0, n0)");
  rt::LaunchConfig too_big = lc;
  too_big.dynamic_smem = static_cast<unsigned>(ctx.info().max_smem_per_block_optin) + 4096;
  p.candidates = {{"default", with(k.source), k.name, lc},
                  {"wrong", with(wrong), k.name, lc},
                  {"broken", with(broken), k.name, lc},
                  {"too much shared memory", with(k.source), k.name, too_big},
                  {"default again", with(k.source), k.name, lc}};
  std::vector<rt::DeviceBuffer> bufs;
  rt::KernelArgs args;
  for (const KernelParam& prm : k.params) {
    if (prm.kind == KernelParam::Kind::Symbol) {
      args.add(static_cast<long long>(300));
      continue;
    }
    const size_t n = static_cast<size_t>(numel(resolve(g.value(prm.buffer).type.shape, b)));
    auto buf = rt::DeviceBuffer::allocate(ctx, n * 2);
    LJ_REQUIRE_OK(buf);
    LJ_REQUIRE_OK(rt::fill_random_bf16(*stream, buf->ptr(), n, 11 + bufs.size(), -1.f, 1.f));
    if (prm.written) p.outputs.push_back(rt::TuneOutput{buf->ptr(), buf->bytes(), 2});
    args.add(buf->ptr());
    bufs.push_back(std::move(*buf));
  }
  p.arg_sets = {args};
  p.compare = [](size_t, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got, std::string* why) {
    // Same kernel, same inputs: bit-identical is the bar here.
    if (want == got) return true;
    *why = "bytes differ";
    return false;
  };
  std::vector<std::string> progress;
  rt::AutotuneOptions ao;
  ao.progress = [&](const std::string& line) { progress.push_back(line); };
  auto report = rt::autotune(*stream, p, ao);
  LJ_REQUIRE_OK(report);
  REQUIRE(report->results.size() == 5);
  CHECK(report->results[0].status == rt::CandidateStatus::kTimed);
  CHECK(report->results[1].status == rt::CandidateStatus::kMismatch);
  CHECK(report->results[2].status == rt::CandidateStatus::kCompileFailed);
  CHECK_THAT(report->results[2].detail, Catch::Contains("error"));
  CHECK(report->results[3].status == rt::CandidateStatus::kLaunchFailed);
  CHECK_THAT(report->results[3].detail, Catch::Contains("shared memory"));
  CHECK(report->results[4].status == rt::CandidateStatus::kTimed);
  CHECK((report->best == 0 || report->best == 4));
  CHECK(report->results[0].timing.median_ms > 0);
  CHECK(!progress.empty());

  // A budget already spent: only the default is timed.
  ao.budget_seconds = 1e-9;
  auto rushed = rt::autotune(*stream, p, ao);
  LJ_REQUIRE_OK(rushed);
  CHECK(rushed->results[0].status == rt::CandidateStatus::kTimed);
  CHECK(rushed->results[4].status == rt::CandidateStatus::kOverBudget);
  CHECK(rushed->best == 0);

  // A broken default is an error, not a silent pick of something unverified.
  std::swap(p.candidates[0], p.candidates[2]);
  auto no_reference = rt::autotune(*stream, p, {});
  REQUIRE(!no_reference.ok());
  CHECK_THAT(no_reference.message(), Catch::Contains("the default config 'broken' does not work"));
}

TEST_CASE("tuning a matmul group verifies every pruned config and stores the winner", "[gpu][autotune]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  TempTuningDb tdb("lj-tune-test");
  cache::TuningDb* db = tdb.db.get();
  REQUIRE(db->enabled());
  // K = 1000 (a tail), N = 300 (past a tile edge), M = 700 is tuned at its bucket's top, 1024.
  const Graph g = matmul_graph(300, 1000);
  Bindings b;
  b.set("M", 700);
  auto r = tune_single_group(*stream, g, b, db);
  LJ_REQUIRE_OK(r);
  CHECK(*r->tuned_at.get("M") == 1024);
  CHECK(r->key.symbol_bucket == "M<=1024");
  CHECK(r->report.results.size() >= 10);
  for (const auto& c : r->report.results) {
    INFO(c.config << ": " << rt::to_string(c.status) << " " << c.detail);
    CHECK(c.status == rt::CandidateStatus::kTimed);
  }
  REQUIRE(r->record.has_value());
  CHECK(r->record->ok);
  CHECK(r->record->decision == cache::TuneDecision::kFirst);
  auto stored = db->lookup(r->key);
  REQUIRE(stored.has_value());
  CHECK(stored->winner.config == r->chosen);
  CHECK(stored->runner_up.has_value());

  // Tuning again compares with the stored winner instead of starting over.
  auto again = tune_single_group(*stream, g, b, db);
  LJ_REQUIRE_OK(again);
  REQUIRE(again->record.has_value());
  CHECK(again->record->decision != cache::TuneDecision::kFirst);
  CHECK(db->lookup(again->key)->runs == 2);

  // An executable built for a size of the same bucket runs the stored winner and says so.
  exec::BuildOptions bo;
  bo.hint.set("M", 900);
  auto e = tdb.build(ctx, g, bo);
  LJ_REQUIRE_OK(e);
  REQUIRE(e->kernels().size() == 1);
  CHECK(e->kernels()[0].config == db->lookup(again->key)->winner.config);
  CHECK(e->origins()[0].config_source == "tuned (M<=1024)");
  bo.use_tuned = false;
  auto plain = exec::Executable::build(ctx, g, bo);
  LJ_REQUIRE_OK(plain);
  CHECK(plain->origins()[0].config_source == "default");
}

TEST_CASE("the tuner compiles in worker processes: a crash there fails the tuning with the reason, the process goes on", "[gpu][autotune]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  TempTuningDb tdb("lj-tune-workers");
  const Graph g = matmul_graph(200, 520);
  Bindings b;
  b.set("M", 33);
  // The build tree's worker, unless the environment names one (binaries copied elsewhere).
  const char* named = std::getenv("LAYERJIT_COMPILE_WORKER");
  const std::string worker = named && *named && std::string_view(named) != "off" ? named : LAYERJIT_COMPILE_WORKER_PATH;
  ::setenv("LAYERJIT_COMPILE_WORKER", worker.c_str(), 1);
  const int64_t before = rt::nvrtc_compile_count();
  auto r = tune_single_group(*stream, g, b, tdb.db.get());
  LJ_REQUIRE_OK(r);
  CHECK(rt::nvrtc_compile_count() - before == static_cast<int64_t>(r->report.results.size()));  // counted from the workers' replies
  for (const auto& c : r->report.results) CHECK(c.status == rt::CandidateStatus::kTimed);
  // Every candidate's compile killed by SIGSEGV (the worker's test hook): an error that says so.
  ::setenv("LAYERJIT_TEST_WORKER_CRASH", "_g0_matmul", 1);
  auto crashed = tune_single_group(*stream, g, b, tdb.db.get());
  ::unsetenv("LAYERJIT_TEST_WORKER_CRASH");
  REQUIRE(!crashed.ok());
  CHECK_THAT(crashed.message(), Catch::Contains("does not work") && Catch::Contains("killed by SIGSEGV"));
  // This process is unharmed: the next tuning runs.
  auto again = tune_single_group(*stream, g, b, tdb.db.get());
  ::unsetenv("LAYERJIT_COMPILE_WORKER");
  LJ_REQUIRE_OK(again);
  CHECK(again->record.has_value());
}

TEST_CASE("tuning an attention prefill group verifies every tile set and an executable runs the winner", "[gpu][autotune]") {
  rt::Context& ctx = lj_test::gpu();
  auto stream = rt::Stream::create(ctx);
  LJ_REQUIRE_OK(stream);
  TempTuningDb tdb("lj-tune-attn");
  cache::TuningDb* db = tdb.db.get();
  REQUIRE(db->enabled());
  // 8 query heads over 2 KV heads, T = 300 (tuned at 512): causal tiles crossing the diagonal and a tail.
  Module m = parse_module("graph @attn(%q: bf16[T, 8, 128], %k: bf16[T, 2, 128], %v: bf16[T, 2, 128]) {\n"
                          "  %o = attention(%q, %k, %v) {causal = true}\n  return %o\n}\n",
                          "<tune attention>");
  const Graph& g = m.graphs.at(0);
  Bindings b;
  b.set("T", 300);
  auto r = tune_single_group(*stream, g, b, db);
  LJ_REQUIRE_OK(r);
  CHECK(r->key.symbol_bucket == "T<=512");
  CHECK(r->report.results.size() >= 5);
  CHECK(r->pruned.empty());
  for (const auto& c : r->report.results) {
    INFO(c.config << ": " << rt::to_string(c.status) << " " << c.detail);
    CHECK(c.status == rt::CandidateStatus::kTimed);  // every tile set runs and agrees with the default
  }
  if (ctx.info().cc() == 90) CHECK(r->report.results[0].config == "wgmma bn=128 stages=2");
  REQUIRE(r->record.has_value());
  CHECK(r->record->ok);

  exec::BuildOptions bo;
  bo.hint.set("T", 400);
  auto e = tdb.build(ctx, g, bo);
  LJ_REQUIRE_OK(e);
  REQUIRE(e->kernels().size() == 1);
  CHECK(e->kernels()[0].config == db->lookup(r->key)->winner.config);
  CHECK(e->origins()[0].config_source == "tuned (T<=512)");
}
