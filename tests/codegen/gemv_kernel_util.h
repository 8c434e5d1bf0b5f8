// Helpers of the codegen tests that emit one matmul kernel with a given config (test_gemv_staged.cpp,
// test_gemv_bulk.cpp, test_gemm_cluster.cpp, test_gemm_half_staging.cpp): the first matmul group of a
// graph emitted for sm_90a at a row count, its PTX, and counts of instructions in it.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "codegen/device_headers.h"
#include "codegen/kernel.h"
#include "codegen/matmul_config.h"
#include "runtime/nvrtc.h"

namespace lj_test {

// `sm_count` > 0: the SMs a persistent grid is sized for (else EmitOptions' default).
inline lj::GeneratedKernel hopper_matmul(const lj::Graph& g, const std::string& config, int64_t rows, int sm_count = 0) {
  lj::EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = true;
  if (sm_count > 0) eo.sm_count = sm_count;
  eo.hint.set("M", rows);
  eo.matmul = lj::parse_matmul_config(config, nullptr);
  REQUIRE(eo.matmul.has_value());
  for (const lj::FusionGroup& grp : lj::plan_fusion(g).groups)
    if (grp.kind == lj::GroupKind::Matmul) return lj::emit_group(g, grp, eo);
  FAIL("no matmul group in @" << g.name());
  return {};
}

inline lj::GeneratedKernel one_row_matmul(const lj::Graph& g, const char* config) { return hopper_matmul(g, config, 1); }

inline std::string ptx_of(const lj::GeneratedKernel& k, const char* arch) {
  lj::rt::CompileOptions opts;
  opts.program_name = k.name + ".cu";
  opts.headers = lj::codegen_device_headers();
  opts.want_ptx = true;
  auto res = lj::rt::compile(k.source, opts, *lj::rt::Target::parse(arch));
  INFO(k.name << " for " << arch << ": " << (res.ok() ? "" : res.message()));
  REQUIRE(res.ok());
  return res->ptx;
}

inline size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace lj_test
