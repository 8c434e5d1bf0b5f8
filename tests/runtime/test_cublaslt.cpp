// The tuner's cuBLASLt reference (runtime/cublaslt.h) is loaded with dlopen, never linked: on a
// machine with the CUDA toolkit its library loads with every entry point, no GPU needed (the
// readelf test in CMakeLists.txt checks that nothing links it).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "runtime/cublaslt.h"

TEST_CASE("the tuner's cuBLASLt reference loads from the toolkit at run time", "[cublaslt]") {
  if (!std::filesystem::exists("/usr/local/cuda/lib64")) {
    WARN("no CUDA toolkit at /usr/local/cuda: nothing to load");
    return;
  }
  const lj::rt::Status s = lj::rt::cublaslt_available();
  INFO((s.ok() ? std::string("loaded") : s.message()));
  CHECK(s.ok());
}
