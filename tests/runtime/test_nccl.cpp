// NCCL (runtime/nccl.h) is loaded with dlopen, never linked: from the toolkit's lib directory on a
// machine with the CUDA toolkit (no GPU needed), and a missing library is an error that says "no
// NCCL", what was tried and how to provide one (the readelf test in CMakeLists.txt checks that
// nothing links it).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "runtime/nccl.h"

TEST_CASE("NCCL loads from the toolkit at run time, and a missing one says 'no NCCL'", "[nccl]") {
  const auto missing = lj::rt::load_nccl({"/nonexistent/libnccl.so.2", "libnccl-not-here.so"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.rfind("no NCCL: libnccl could not be loaded (tried /nonexistent/libnccl.so.2, libnccl-not-here.so", 0) == 0);
  CHECK(missing.error().message.find("set LAYERJIT_NCCL") != std::string::npos);
  bool present = false;
  for (const std::string& p : lj::rt::nccl_search_path()) present = present || (p[0] == '/' && std::filesystem::exists(p));
  if (!present) {
    WARN("no libnccl in the toolkit directories: nothing to load");
    return;
  }
  const auto n = lj::rt::nccl();
  INFO((n.ok() ? (*n)->path : n.error().message));
  REQUIRE(n.ok());
  CHECK((*n)->version >= 20900);
  CHECK((*n)->version_str().find('.') != std::string::npos);
  CHECK((*n)->all_reduce != nullptr);
}
