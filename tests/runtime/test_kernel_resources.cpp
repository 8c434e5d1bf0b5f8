// ptxas resource reports: parsing (pure) and a real compile of a small kernel with a known spill-free
// footprint. Generated kernels are checked for spills in tests/codegen.
#include <catch2/catch.hpp>

#include "runtime/kernel_resources.h"

using namespace lj;

TEST_CASE("ptxas verbose logs parse per entry", "[runtime][resources]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'first' for 'sm_90a'\n"
      "ptxas info    : Function properties for first\n"
      "    40 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 2 barriers, 40 bytes cumulative stack size, 1024 bytes smem, 544 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'second' for 'sm_90a'\n"
      "ptxas info    : Function properties for second\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, 380 bytes cmem[0]\n";
  auto a = rt::parse_ptxas_info(log, "first");
  REQUIRE(a.has_value());
  CHECK(a->registers == 168);
  CHECK(a->barriers == 2);
  CHECK(a->stack_bytes == 40);
  CHECK(a->spill_store_bytes == 40);
  CHECK(a->spill_load_bytes == 36);
  CHECK(a->static_shared_bytes == 1024);
  CHECK(a->spills());
  CHECK(a->str() == "168 registers, spills (40 bytes stored, 36 loaded), 40 bytes stack, 1024 bytes static shared memory, 2 barriers");
  auto b = rt::parse_ptxas_info(log, "second");
  REQUIRE(b.has_value());
  CHECK(b->registers == 32);
  CHECK(b->barriers == 0);
  CHECK(!b->spills());
  CHECK(b->str() == "32 registers, no spills, 0 bytes stack, 0 bytes static shared memory, 0 barriers");
  CHECK(!rt::parse_ptxas_info(log, "third").has_value());
  CHECK(!rt::parse_ptxas_info(log, "firs").has_value());  // names match whole, quoted
}

TEST_CASE("a compiled kernel reports its resources", "[runtime][resources]") {
  rt::CompileJob job;
  job.source =
      "extern \"C\" __global__ void lj_saxpy_resources(float* y, const float* x, float a, int n) {\n"
      "  __shared__ float tile[64];\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  tile[threadIdx.x % 64] = x[i % n];\n"
      "  __syncthreads();\n"
      "  if (i < n) y[i] = a * tile[(threadIdx.x + 1) % 64] + y[i];\n"
      "}\n";
  auto target = rt::Target::parse("sm_90");
  REQUIRE(target.ok());
  job.target = *target;
  auto r = rt::kernel_resources(job, "lj_saxpy_resources");
  REQUIRE(r.ok());
  CHECK(r->registers > 0);
  CHECK(r->registers < 64);
  CHECK(!r->spills());
  CHECK(r->static_shared_bytes == 256);
  CHECK(r->barriers == 1);
}
