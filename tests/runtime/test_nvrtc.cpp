// NVRTC without a GPU: every test kernel compiles for sm_80, sm_90 and sm_90a; wgmma only for sm_90a;
// a broken kernel's error names the kernel and line and shows the surrounding source.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/embedded_headers.h"
#include "runtime/nvrtc.h"
#include "tests/runtime/kernels.h"

using namespace lj::rt;

namespace {

Target target(const char* name) {
  auto t = Target::parse(name);
  REQUIRE(t.ok());
  return *t;
}

bool is_elf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

}  // namespace

TEST_CASE("NVRTC compiles a kernel to a cubin for sm_80, sm_90 and sm_90a", "[nvrtc]") {
  for (const char* name : {"sm_80", "sm_90", "sm_90a"}) {
    INFO(name);
    CompileOptions opts;
    opts.want_ptx = true;
    auto r = compile(lj_test::kSaxpy, opts, target(name));
    REQUIRE(r.ok());
    CHECK(is_elf(r->cubin));
    CHECK(r->ptx.find(std::string(".target ") + name) != std::string::npos);
    CHECK(r->seconds > 0);
    // The fixed options are always there, ahead of the arch.
    REQUIRE(r->options.size() >= 5);
    CHECK(r->options[0] == "-std=c++17");
    CHECK(r->options[1] == "-default-device");
    CHECK(r->options[2] == "-lineinfo");
    CHECK(r->options[3] == std::string("--gpu-architecture=") + name);
    CHECK(r->options[4] == "--ptxas-options=-v");  // registers and spills in the log, for the cache
  }
}

TEST_CASE("every arch NVRTC reports compiles", "[nvrtc]") {
  auto archs = supported_archs();
  REQUIRE(archs.ok());
  REQUIRE(!archs->empty());
  std::vector<CompileJob> jobs;
  for (int a : *archs) jobs.push_back(CompileJob{lj_test::kSaxpy, {}, Target{a, false, false}});
  auto results = compile_parallel(jobs);
  REQUIRE(results.size() == jobs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(jobs[i].target.name());
    REQUIRE(results[i].ok());
    CHECK(results[i]->target == jobs[i].target);  // results come back in job order
    CHECK(is_elf(results[i]->cubin));
  }
}

TEST_CASE("a compute_XY target gives PTX only", "[nvrtc]") {
  auto r = compile(lj_test::kSaxpy, {}, target("compute_90"));
  REQUIRE(r.ok());
  CHECK(r->cubin.empty());
  CHECK(r->ptx.find(".target sm_90") != std::string::npos);
  CHECK(&r->image() == &r->ptx);
}

TEST_CASE("inline-PTX wgmma compiles for sm_90a and is rejected for sm_90", "[nvrtc]") {
  auto ok = compile(lj_test::kWgmma, {}, target("sm_90a"));
  REQUIRE(ok.ok());
  CHECK(is_elf(ok->cubin));
  auto bad = compile(lj_test::kWgmma, {}, target("sm_90"));
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("wgmma"));
  CHECK_THAT(bad.message(), Catch::Contains("not supported on .target 'sm_90'"));
}

TEST_CASE("embedded device headers come from memory", "[nvrtc]") {
  bool found = false;
  for (const auto& [name, text] : embedded_headers()) found |= name == "layerjit/random.cuh";
  CHECK(found);
  auto r = compile(lj_test::kUsesEmbeddedHeader, {}, target("sm_90"));
  INFO((r.ok() ? std::string() : r.message()));
  CHECK(r.ok());
}

TEST_CASE("a compile error is mapped onto the source: kernel, line, three lines either side", "[nvrtc]") {
  CompileOptions opts;
  opts.program_name = "group7_scale.cu";
  auto r = compile(lj_test::kBroken, opts, target("sm_90"));
  REQUIRE(!r.ok());
  const std::string& m = r.message();
  INFO(m);
  CHECK_THAT(m, Catch::Contains("failed to compile group7_scale.cu for sm_90: 1 error(s)"));
  CHECK_THAT(m, Catch::Contains("group7_scale.cu:6: error: identifier \"undeclared_scale\" is undefined"));
  CHECK_THAT(m, Catch::Contains("in kernel `scale_rows`"));
  // Lines 3..9 shown, line 6 marked; lines 2 and 10 are out of the window.
  CHECK_THAT(m, Catch::Contains("      3 | // line 3"));
  CHECK_THAT(m, Catch::Contains("  >     6 |   if (i < n) x[i] = x[i] * undeclared_scale;"));
  CHECK_THAT(m, Catch::Contains("      9 | // line 9"));
  CHECK_THAT(m, !Catch::Contains("fine(float* x)"));
  CHECK_THAT(m, Catch::Contains("NVRTC log:"));
}

TEST_CASE("a compile error names the kernel, not its __launch_bounds__", "[nvrtc]") {
  CompileOptions opts;
  opts.program_name = "bounded.cu";
  auto r = compile("extern \"C\" __global__ void __launch_bounds__(128, 4) lj_bounded(\n"
                   "    float* x) {\n"
                   "  x[threadIdx.x] = undeclared_value;\n"
                   "}\n",
                   opts, target("sm_90"));
  REQUIRE(!r.ok());
  INFO(r.message());
  CHECK_THAT(r.message(), Catch::Contains("in kernel `lj_bounded`"));
  CHECK_THAT(r.message(), !Catch::Contains("in kernel `__launch_bounds__`"));
}

TEST_CASE("parse_compile_log finds each diagnostic and its kernel", "[nvrtc]") {
  const char* log =
      "k.cu(6): error: identifier \"undeclared_scale\" is undefined\n"
      "    if (i < n) x[i] = x[i] * undeclared_scale;\n"
      "                             ^\n"
      "k.cu(2): warning #177-D: variable \"z\" was declared but never referenced\n"
      "layerjit/random.cuh(3): error: something in a header\n"
      "\n2 errors detected in the compilation of \"k.cu\".\n";
  auto d = parse_compile_log(log, lj_test::kBroken, "k.cu");
  REQUIRE(d.size() == 3);
  CHECK(d[0].line == 6);
  CHECK(d[0].severity == "error");
  CHECK(d[0].kernel == "scale_rows");
  CHECK(d[1].severity == "warning #177-D");
  CHECK(d[1].kernel == "fine");
  CHECK(d[2].file == "layerjit/random.cuh");
  CHECK(d[2].kernel.empty());
}

TEST_CASE("compile_parallel returns each job's own outcome in order", "[nvrtc]") {
  std::vector<CompileJob> jobs = {
      {lj_test::kSaxpy, {}, Target{90, false, false}},
      {lj_test::kBroken, {}, Target{90, false, false}},
      {lj_test::kSaxpy, {}, Target{80, false, false}},
      {lj_test::kUsesEmbeddedHeader, {}, Target{90, true, false}},
  };
  auto r = compile_parallel(jobs, 3);
  REQUIRE(r.size() == 4);
  CHECK(r[0].ok());
  CHECK(!r[1].ok());
  CHECK(r[2].ok());
  CHECK(r[3].ok());
  CHECK(default_compile_workers() >= 1);
  CHECK(default_compile_workers() <= 8);
}

TEST_CASE("compile_parallel compiles identical jobs once, each job still gets its outcome and its done call", "[nvrtc]") {
  const CompileJob saxpy90{lj_test::kSaxpy, {}, Target{90, false, false}};
  CompileJob saxpy80 = saxpy90;
  saxpy80.target = Target{80, false, false};
  CompileJob named = saxpy90;  // the same source under another name: NVRTC's log would differ
  named.options.program_name = "other.cu";
  const CompileJob broken{lj_test::kBroken, {}, Target{90, false, false}};
  const std::vector<CompileJob> jobs = {saxpy90, broken, saxpy90, saxpy80, broken, named, saxpy90};
  std::vector<int> calls(jobs.size(), 0);
  const int64_t before = nvrtc_compile_count();
  auto r = compile_parallel(jobs, 2, [&](size_t job, const Result<CompiledProgram>&) { ++calls[job]; });
  CHECK(nvrtc_compile_count() - before == 4);  // saxpy for sm_90 and sm_80, the broken one, the renamed one
  REQUIRE(r.size() == jobs.size());
  CHECK(calls == std::vector<int>(jobs.size(), 1));
  for (size_t i : {0, 2, 3, 5, 6}) REQUIRE(r[i].ok());
  CHECK(r[0]->cubin == r[2]->cubin);
  CHECK(r[0]->cubin == r[6]->cubin);
  CHECK(r[3]->target == saxpy80.target);
  CHECK(r[0]->target == saxpy90.target);
  REQUIRE(!r[1].ok());
  REQUIRE(!r[4].ok());
  CHECK(r[1].message() == r[4].message());
  CHECK_THAT(r[4].message(), Catch::Contains("error"));
}

TEST_CASE("estimated_compile_cost counts the source and each in-memory header it reaches once", "[nvrtc]") {
  CompileJob job;
  job.options.headers = {{"a.cuh", "#include \"b.cuh\"\n" + std::string(100, 'a')},
                         {"b.cuh", "#include \"a.cuh\"\n" + std::string(1000, 'b')},
                         {"unused.cuh", std::string(10000, 'u')}};
  job.source = "#include \"a.cuh\"\n#include \"b.cuh\"\n#include <cuda_fp16.h>\n#include \"elsewhere.h\"\n";
  const size_t a = job.options.headers[0].second.size(), b = job.options.headers[1].second.size();
  CHECK(estimated_compile_cost(job) == job.source.size() + a + b);  // the include cycle ends, b counts once
  job.source = "__global__ void k() {}";
  CHECK(estimated_compile_cost(job) == job.source.size());
}

TEST_CASE("compile_parallel starts the biggest translation unit first, results still in job order", "[nvrtc]") {
  CompileJob small{lj_test::kSaxpy, {}, Target{90, false, false}};
  CompileJob big = small;
  big.options.headers = {{"big.cuh", "// " + std::string(20000, 'x') + "\n"}};
  big.source = "#include \"big.cuh\"\n" + big.source;
  const std::vector<CompileJob> jobs = {small, small, big};
  std::vector<size_t> finished;
  auto r = compile_parallel(jobs, 1, [&](size_t job, const Result<CompiledProgram>&) { finished.push_back(job); });
  REQUIRE(r.size() == 3);
  for (const auto& x : r) CHECK(x.ok());
  CHECK(finished == std::vector<size_t>{2, 0, 1});  // one worker: the order it took them in
}

TEST_CASE("automatic precompiled headers (-pch) are accepted", "[nvrtc]") {
  CompileOptions opts;
  opts.pch = true;
  auto r = compile(lj_test::kUsesEmbeddedHeader, opts, target("sm_90"));
  INFO((r.ok() ? std::string() : r.message()));
  REQUIRE(r.ok());
  CHECK(is_elf(r->cubin));
}
