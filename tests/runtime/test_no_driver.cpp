// The no-driver path: with LAYERJIT_LIBCUDA pointing at a missing file, every GPU entry point fails
// with one clear message instead of crashing, and `layerjit devices` exits 1. The driver outcome is
// cached per process, so every test here sets the variable before its first use of the driver.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "runtime/context.h"
#include "runtime/driver.h"
#include "tools/cmd_devices.h"

using namespace lj::rt;

namespace {

void point_at_missing_driver() { setenv("LAYERJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1); }

}  // namespace

TEST_CASE("a missing driver library gives the clear no-driver message", "[driver]") {
  point_at_missing_driver();
  auto drv = Driver::get();
  REQUIRE(!drv.ok());
  CHECK_THAT(drv.message(), Catch::StartsWith("no CUDA driver found: libcuda.so.1 could not be loaded"));
  CHECK_THAT(drv.message(), Catch::Contains("/nonexistent/libcuda.so.1"));
  // The outcome is stable, and contexts report the same.
  CHECK(!Driver::get().ok());
  auto ctx = Context::get(0);
  REQUIRE(!ctx.ok());
  CHECK_THAT(ctx.message(), Catch::StartsWith(kNoDriverMessage));
}

TEST_CASE("layerjit devices exits 1 without a driver", "[driver]") {
  point_at_missing_driver();
  char name[] = "devices";
  char* argv[] = {name, nullptr};
  CHECK(cmd_devices(1, argv) == 1);
}
