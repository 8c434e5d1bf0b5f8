// ptxas resource reports: parsing (pure) and a real compile of a small kernel with a known spill-free
// footprint. Generated kernels are checked for spills in tests/codegen.
#include <catch2/catch.hpp>

#include <regex>

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

TEST_CASE("ptxas performance-loss notes count against the kernels they concern", "[runtime][resources]") {
  // CUDA 13.0's ptxas writes them ahead of the entries; C7507 names no function, C7511 does.
  const std::string tail =
      "ptxas info    : Compiling entry function 'gemm' for 'sm_90a'\n"
      "ptxas info    : Function properties for gemm\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 16 barriers\n";
  const std::string c7507 =
      "ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum register requirements.\n";
  auto ignored = rt::parse_ptxas_info(c7507 + tail, "gemm");
  REQUIRE(ignored.has_value());
  CHECK(ignored->setmaxnreg_ignored);
  CHECK(!ignored->wgmma_serialized);
  CHECK(ignored->performance_loss());
  CHECK(!ignored->spills());
  CHECK(ignored->str() == "168 registers, no spills, 0 bytes stack, 0 bytes static shared memory, 16 barriers; setmaxnreg ignored by ptxas");
  const std::string c7511 =
      "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient "
      "register resources for the wgmma pipeline in the function 'gemm2'\n";
  auto other = rt::parse_ptxas_info(c7511 + tail, "gemm");  // another function's note
  REQUIRE(other.has_value());
  CHECK(!other->performance_loss());
  auto serialized = rt::parse_ptxas_info(c7511 + std::regex_replace(tail, std::regex("gemm"), "gemm2"), "gemm2");
  REQUIRE(serialized.has_value());
  CHECK(serialized->wgmma_serialized);
  CHECK(serialized->str().ends_with("; wgmma serialized by ptxas"));
  auto clean = rt::parse_ptxas_info(tail, "gemm");
  REQUIRE(clean.has_value());
  CHECK(!clean->performance_loss());
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
