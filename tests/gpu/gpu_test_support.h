// Shared by the GPU-tier tests: the device context (or a skip), and compiling a source for the GPU.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/context.h"
#include "runtime/launch.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"

namespace lj_test {

/// Exit code of a GPU test on a machine without a driver or device (ctest SKIP_RETURN_CODE).
inline constexpr int kSkipExitCode = 77;

/// Device 0's context. Without a driver or GPU, prints "skipped: no CUDA driver" and ends the process
/// with kSkipExitCode, so the skip can never be counted as a pass.
inline lj::rt::Context& gpu() {
  auto ctx = lj::rt::Context::get(0);
  if (!ctx.ok()) {
    const std::string& m = ctx.message();
    if (m.starts_with(lj::rt::kNoDriverMessage) || m.starts_with("no CUDA device")) {
      std::printf("skipped: no CUDA driver (%s)\n", m.c_str());
      std::fflush(stdout);
      std::_Exit(kSkipExitCode);
    }
    FAIL(m);  // a driver that is present but broken is a failure, not a skip
  }
  lj::rt::set_debug_launch_checks(true);
  return **ctx;
}

/// Compiles `source` for this GPU (cubin, or PTX for a GPU newer than NVRTC) and loads it;
/// `arch_specific`: for the sm_XYa target (a kernel that uses wgmma).
inline lj::rt::Module load(lj::rt::Context& ctx, const std::string& source, lj::rt::CompileOptions opts = {},
                           bool arch_specific = false) {
  auto archs = lj::rt::supported_archs();
  REQUIRE(archs.ok());
  auto choice = lj::rt::choose_target(ctx.info().cc(), arch_specific, *archs, lj::rt::nvrtc_version());
  REQUIRE(choice.ok());
  auto prog = lj::rt::compile(source, opts, choice->target);
  INFO((prog.ok() ? std::string() : prog.message()));
  REQUIRE(prog.ok());
  auto mod = lj::rt::Module::load(ctx, prog->image());
  INFO((mod.ok() ? std::string() : mod.message()));
  REQUIRE(mod.ok());
  return std::move(*mod);
}

inline lj::rt::Kernel kernel(const lj::rt::Module& mod, const char* name) {
  auto k = mod.kernel(name);
  INFO((k.ok() ? std::string() : k.message()));
  REQUIRE(k.ok());
  return *k;
}

/// REQUIRE on a Status/Result, showing its message on failure.
#define LJ_REQUIRE_OK(expr)                                      \
  do {                                                           \
    const auto& lj_ok_ = (expr);                                 \
    INFO((lj_ok_.ok() ? std::string() : lj_ok_.message()));      \
    REQUIRE(lj_ok_.ok());                                        \
  } while (0)

}  // namespace lj_test
