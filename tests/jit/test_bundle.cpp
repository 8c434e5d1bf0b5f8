// AOT bundles on the CPU: written through the compile path, read back byte-checked, kernels served
// by key with no NVRTC call, and every kind of damage or mismatch refused with a message saying what.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cache/format.h"
#include "cache/location.h"
#include "cache/tuning_db.h"
#include "jit/bundle.h"
#include "jit/bundle_file.h"
#include "jit/compile_plan.h"
#include "jit/tuned_config.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "runtime/nvrtc.h"

using namespace lj;
namespace fs = std::filesystem;

namespace {

// A directory of its own holding the cache (named to LAYERJIT_CACHE_DIR while the test runs) and
// the bundles.
struct ScopedDir {
  fs::path dir;
  explicit ScopedDir(const char* what) : dir(fs::temp_directory_path() / fmt::format("layerjit-test-bundle-{}-{}", what, ::getpid())) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    ::setenv("LAYERJIT_CACHE_DIR", (dir / "cache").c_str(), 1);
  }
  ~ScopedDir() {
    ::unsetenv("LAYERJIT_CACHE_DIR");
    fs::remove_all(dir);
  }
  std::string path(const char* name) const { return (dir / name).string(); }
};

jit::JitTarget arch(const char* a) {
  auto t = jit::JitTarget::of_arch(a);
  REQUIRE(t.ok());
  return *t;
}

Bindings sizes(int64_t b, int64_t c) {
  Bindings out;
  out.set("B", b);
  out.set("C", c);
  return out;
}

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The small layer's decode graph at B = 2, C = 9 (odd sizes), bundled for sm_90a and sm_80.
struct SmallBundle {
  ScopedDir dir{"small"};
  Graph g = llama_decode(LlamaConfig::small());
  std::string file = dir.path("small.ljb");
  jit::BundleWriteReport report;
  SmallBundle() {
    jit::BundleWriteOptions o;
    o.targets = {arch("sm_90a"), arch("sm_80")};
    o.hint = sizes(2, 9);
    auto r = jit::write_bundle(file, std::span(&g, 1), o);
    REQUIRE(r.ok());
    report = *r;
  }
};

}  // namespace

TEST_CASE("bundle: a written bundle loads every kernel by key with no NVRTC call, identical to the compile path's", "[jit][bundle]") {
  SmallBundle sb;
  CHECK(sb.report.plans == 2);
  auto b = jit::Bundle::read(sb.file);
  REQUIRE(b.ok());
  REQUIRE(b->check_compatible().ok());
  CHECK(b->layerjit_version == cache::layerjit_version());
  REQUIRE(b->targets.size() == 2);
  CHECK(b->targets[0].arch == "sm_90a");
  CHECK(b->targets[1].arch == "sm_80");
  CHECK_THAT(b->describe(), Catch::Contains("@llama_small_decode for sm_80 at B=2,C=9"));
  // No directory entry but the bundle itself (and the cache): the temp file was renamed into place.
  for (const auto& e : fs::directory_iterator(sb.dir.dir)) CHECK((e.path().filename() == "small.ljb" || e.path().filename() == "cache"));

  for (const jit::JitTarget& t : {arch("sm_90a"), arch("sm_80")}) {
    const Lowered l = jit::plan(sb.g, {}, sizes(2, 9));
    jit::PlanCompileOptions po;
    po.hint = sizes(2, 9);
    auto compiled = jit::compile_plan(t, *l.graph, l.plan, po);  // the cache's (compiled when the bundle was written)
    REQUIRE(compiled.ok());
    po.bundle = &*b;
    const int64_t before = rt::nvrtc_compile_count();
    auto loaded = jit::compile_plan(t, *l.graph, l.plan, po);
    REQUIRE(loaded.ok());
    CHECK(rt::nvrtc_compile_count() == before);
    REQUIRE(loaded->groups.size() == compiled->groups.size());
    for (size_t i = 0; i < loaded->groups.size(); ++i) {
      const jit::CompiledGroup& x = loaded->groups[i];
      const jit::CompiledGroup& y = compiled->groups[i];
      CHECK(x.origin == jit::ConfigOrigin::Bundle);
      CHECK(x.config_source == y.config_source + " (bundle)");
      CHECK(x.kernel.source == y.kernel.source);
      CHECK(x.compiled.program.cubin == y.compiled.program.cubin);
      CHECK(!x.compiled.program.ptx.empty());
      CHECK(x.compiled.program.image() == y.compiled.program.image());
    }
    // The PTX image instead: the target is PTX-only, its image the kernel's PTX.
    po.bundle_ptx = true;
    auto ptx = jit::compile_plan(t, *l.graph, l.plan, po);
    REQUIRE(ptx.ok());
    for (const jit::CompiledGroup& cg : ptx->groups) {
      CHECK(cg.compiled.program.target.ptx_only);
      CHECK_THAT(cg.compiled.program.image(), Catch::Contains(".entry " + cg.kernel.name));
    }
  }
}

TEST_CASE("bundle: a plan the bundle does not hold is refused, saying what it holds", "[jit][bundle]") {
  SmallBundle sb;
  auto b = jit::Bundle::read(sb.file);
  REQUIRE(b.ok());
  jit::PlanCompileOptions po;
  po.bundle = &*b;
  auto try_plan = [&](const Graph& g, const FusionOptions& fo, const Bindings& hint, const jit::JitTarget& t) {
    const Lowered l = jit::plan(g, fo, hint);
    po.hint = hint;
    return jit::compile_plan(t, *l.graph, l.plan, po);
  };
  // Other sizes: the kernels were chosen for B = 2.
  auto other_sizes = try_plan(sb.g, {}, sizes(32, 9), arch("sm_90a"));
  REQUIRE(!other_sizes.ok());
  CHECK_THAT(other_sizes.message(), Catch::Contains("has no plan of @llama_small_decode for sm_90a at B=32,C=9") &&
                                        Catch::Contains("@llama_small_decode for sm_90a at B=2,C=9\n") && !Catch::Contains("fused otherwise"));
  // One row: the one-row prologues draw the plan otherwise too; the sizes are what the listing names.
  auto one_row = try_plan(sb.g, {}, sizes(1, 9), arch("sm_90a"));
  REQUIRE(!one_row.ok());
  CHECK_THAT(one_row.message(), Catch::Contains("at B=1,C=9") && !Catch::Contains("fused otherwise"));
  // Another fusion: the same graph, grouped otherwise.
  FusionOptions unfused;
  unfused.fuse = false;
  auto other_fusion = try_plan(sb.g, unfused, sizes(2, 9), arch("sm_90a"));
  REQUIRE(!other_fusion.ok());
  CHECK_THAT(other_fusion.message(), Catch::Contains("other fusion options"));
  // An arch it was not written for.
  auto other_arch = try_plan(sb.g, {}, sizes(2, 9), arch("sm_89"));
  REQUIRE(!other_arch.ok());
  CHECK_THAT(other_arch.message(), Catch::Contains("for sm_89"));
  // Another graph.
  const Graph prefill = llama_prefill(LlamaConfig::small());
  Bindings t;
  t.set("T", 33);
  auto other_graph = try_plan(prefill, {}, t, arch("sm_90a"));
  REQUIRE(!other_graph.ok());
  CHECK_THAT(other_graph.message(), Catch::Contains("has no plan of @llama_small_prefill") && Catch::Contains("holds no plan of that graph"));
  // A graph of the same name but other shapes (another model) is named as such.
  LlamaConfig wider = LlamaConfig::small();
  wider.hidden = 128;
  wider.n_heads = 8;
  auto renamed = try_plan(llama_decode(wider), {}, sizes(2, 9), arch("sm_90a"));
  REQUIRE(!renamed.ok());
  CHECK_THAT(renamed.message(), Catch::Contains("another graph of that name"));
}

TEST_CASE("bundle: a flipped, cut or appended byte anywhere is refused, naming the damage", "[jit][bundle]") {
  SmallBundle sb;
  const std::string good = read_file(sb.file);
  REQUIRE(jit::decode_bundle(good, "x").ok());
  const std::string bad = sb.dir.path("bad.ljb");
  auto refused = [&](const std::string& bytes) {
    write_file(bad, bytes);
    auto r = jit::Bundle::read(bad);
    REQUIRE(!r.ok());
    CHECK_THAT(r.message(), Catch::StartsWith("bundle " + bad + ": "));
    return r.message();
  };
  std::string flipped = good;
  flipped[good.size() - 100] ^= 0x01;  // inside the last payload
  CHECK_THAT(refused(flipped), Catch::Contains("does not match its checksum"));
  flipped = good;
  flipped[80] ^= 0x20;  // inside the manifest
  CHECK_THAT(refused(flipped), Catch::Contains("the manifest's checksum does not match"));
  CHECK_THAT(refused(good.substr(0, good.size() - 1)), Catch::Contains("truncated"));
  CHECK_THAT(refused(good.substr(0, 40)), Catch::Contains("not a layerjit bundle"));
  CHECK_THAT(refused(good + "x"), Catch::Contains("1 byte(s) after the last payload"));
  CHECK_THAT(refused("PK\x03\x04 not a bundle at all, but long enough to have a header of fifty-six bytes"), Catch::Contains("not a layerjit bundle"));
  std::string future = good;
  future[8] = 9;
  CHECK_THAT(refused(future), Catch::Contains("bundle format 9, this layerjit reads format 1"));
  auto missing = jit::Bundle::read(sb.dir.path("none.ljb"));
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("cannot open"));
}

TEST_CASE("bundle: a sound file with a wrong field, version or key is refused", "[jit][bundle]") {
  SmallBundle sb;
  auto file = jit::read_bundle_file(sb.file);
  REQUIRE(file.ok());
  const std::string edited = sb.dir.path("edited.ljb");
  auto rewrite = [&](const nlohmann::json& m) {
    REQUIRE(jit::write_bundle_file(edited, m, file->payloads).ok());
    return jit::Bundle::read(edited);
  };
  // Checksums intact, schema broken.
  nlohmann::json m = file->manifest;
  m["plans"][0]["kernels"][1].erase("key");
  auto no_key = rewrite(m);
  REQUIRE(!no_key.ok());
  CHECK_THAT(no_key.message(), Catch::Contains("the manifest is malformed: plans[0].kernels[1] has no 'key'"));
  m = file->manifest;
  m["plans"][0]["kernels"][0]["cubin"] = 100000;
  auto out_of_range = rewrite(m);
  REQUIRE(!out_of_range.ok());
  CHECK_THAT(out_of_range.message(), Catch::Contains("plans[0].kernels[0].cubin = 100000 is out of range"));
  // Another layerjit version: read, but this build will not load it.
  m = file->manifest;
  m["layerjit"] = "0.0.1";
  auto old = rewrite(m);
  REQUIRE(old.ok());
  rt::Status s = old->check_compatible();
  REQUIRE(!s.ok());
  CHECK_THAT(s.message(), Catch::Contains("written by layerjit 0.0.1, this is layerjit " + std::string(cache::layerjit_version())));
  // A kernel key that is not the key of the kernel this build emits for the group.
  m = file->manifest;
  m["plans"][0]["kernels"][2]["key"] = std::string(32, '0');
  auto swapped = rewrite(m);
  REQUIRE(swapped.ok());
  const Lowered l = jit::plan(sb.g, {}, sizes(2, 9));
  jit::PlanCompileOptions po;
  po.hint = sizes(2, 9);
  po.bundle = &*swapped;
  auto r = jit::compile_plan(arch("sm_90a"), *l.graph, l.plan, po);
  REQUIRE(!r.ok());
  CHECK_THAT(r.message(), Catch::Contains(fmt::format("fusion group {}", l.plan.groups[2].id)) &&
                              Catch::Contains("generates another kernel here than the bundle holds"));
  // A directory that does not exist: an error, nothing written.
  auto nowhere = jit::write_bundle_file(sb.dir.path("no/such/dir.ljb"), file->manifest, file->payloads);
  REQUIRE(!nowhere.ok());
  CHECK_THAT(nowhere.message(), Catch::Contains("cannot write"));
}

TEST_CASE("bundle: each device runs the best image the bundle holds for it", "[jit][bundle]") {
  jit::Bundle b;
  b.path = "x.ljb";
  for (const char* a : {"sm_80", "sm_90a"}) b.targets.push_back(jit::BundleTarget{a, 132, 227 * 1024, ""});
  auto pick = [&](int cc, bool arch_specific) {
    auto c = jit::choose_bundle_target(b, cc, arch_specific);
    REQUIRE(c.ok());
    return fmt::format("{}{}", b.targets[c->target].arch, c->ptx ? " ptx" : "");
  };
  CHECK(pick(90, true) == "sm_90a");        // its own arch-specific cubin
  CHECK(pick(90, false) == "sm_80 ptx");    // arch-specific refused: sm_80's PTX (cubins do not cross majors)
  CHECK(pick(86, true) == "sm_80");         // same major, lower minor: binary compatible
  CHECK(pick(89, true) == "sm_80");
  CHECK(pick(80, true) == "sm_80");
  CHECK(pick(100, true) == "sm_80 ptx");    // newer major: PTX; the sm_90a PTX runs only on sm_90
  auto old = jit::choose_bundle_target(b, 75, true);
  REQUIRE(!old.ok());
  CHECK_THAT(old.message(), Catch::Contains("holds kernels for sm_80, sm_90a, none of which runs on this GPU (sm_75)"));
  b.targets.push_back(jit::BundleTarget{"sm_90", 132, 227 * 1024, ""});
  CHECK(pick(90, false) == "sm_90");
  CHECK(pick(90, true) == "sm_90a");
  CHECK(pick(100, true) == "sm_90 ptx");    // the highest PTX below
  auto why = jit::choose_bundle_target(b, 100, true);
  CHECK_THAT(why->why, Catch::Contains("the driver compiles it"));
}

TEST_CASE("bundle: a tuned config travels in the bundle and applies where no tuning DB has it", "[jit][bundle]") {
  ScopedDir dir("tuned");
  const Graph g = parse_module(R"(
graph @proj(%x: bf16[T, 4096], %w: param bf16[1000, 4096]) -> bf16[T, 1000] {
  %y = matmul(%x, %w)
  return %y
})").graphs.at(0);
  Bindings hint;
  hint.set("T", 4096);
  jit::JitTarget t = arch("sm_90a");
  t.driver_version = "13.0";  // as on its GPU: tuning records apply
  const Lowered l = jit::plan(g, {}, hint);
  const std::string tuned = "wgmma bm=128 bn=128 stages=3 gm=8";
  {
    cache::CacheOptions co;
    co.root = dir.dir / "cache";
    co.durable = false;
    auto db = cache::TuningDb::open(co);
    REQUIRE(db->enabled());
    const cache::Measured meas{tuned, 42.0, 0.5};
    REQUIRE(db->record(jit::tuning_key(t, *l.graph, l.plan.groups[0], jit::bucket(hint)), std::span(&meas, 1)).ok);
  }
  jit::BundleWriteOptions o;
  o.targets = {t};
  o.hint = hint;
  REQUIRE(jit::write_bundle(dir.path("p.ljb"), std::span(&g, 1), o).ok());
  fs::remove_all(dir.dir / "cache");  // no tuning DB, no kernel cache where it is loaded
  auto b = jit::Bundle::read(dir.path("p.ljb"));
  REQUIRE(b.ok());
  REQUIRE(b->plans.size() == 1);
  CHECK(b->plans[0].kernels[0].config == tuned);
  CHECK(b->plans[0].kernels[0].tuned == "42.00 us, spread 0.50 us, 1 run(s)");
  jit::PlanCompileOptions po;
  po.hint = hint;
  po.bundle = &*b;
  const int64_t before = rt::nvrtc_compile_count();
  auto r = jit::compile_plan(jit::bundle_jit_target(b->targets[0]), *l.graph, l.plan, po);
  REQUIRE(r.ok());
  CHECK(rt::nvrtc_compile_count() == before);
  CHECK(r->groups[0].kernel.config == tuned);
  CHECK(r->groups[0].config_source == "tuned (T<=4096) (bundle)");
}
