// Helpers of the codegen tests that emit one matmul kernel with a given config (test_gemv_staged.cpp,
// test_gemv_bulk.cpp, test_gemm_cluster.cpp): the first matmul group of a graph emitted for sm_90a at
// one row, its PTX, and counts of instructions in it.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "codegen/device_headers.h"
#include "codegen/kernel.h"
#include "codegen/matmul_config.h"
#include "runtime/nvrtc.h"

namespace lj_test {

inline lj::GeneratedKernel one_row_matmul(const lj::Graph& g, const char* config) {
  lj::EmitOptions eo;
  eo.sm = 90;
  eo.arch_specific = true;
  eo.hint.set("M", 1);
  eo.matmul = lj::parse_matmul_config(config, nullptr);
  REQUIRE(eo.matmul.has_value());
  for (const lj::FusionGroup& grp : lj::plan_fusion(g).groups)
    if (grp.kind == lj::GroupKind::Matmul) return lj::emit_group(g, grp, eo);
  FAIL("no matmul group in @" << g.name());
  return {};
}

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
