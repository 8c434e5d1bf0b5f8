// `layerjit cache` (tools/cmd_cache.cpp) called in-process with its output captured: every action,
// sizes and ages in the output, a refused directory and a bad command line.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <catch2/catch.hpp>

#include "cache/disk_cache.h"
#include "cache/tuning_db.h"
#include "cache_test_util.h"
#include "layerjit/error.h"
#include "tools/cmd_cache.h"

using namespace lj::cache;
using namespace lj::cache::test;

namespace {

// Runs cmd_cache with stdout redirected to a file; returns (exit code, output).
std::pair<int, std::string> run_cache(const std::vector<std::string>& args) {
  std::fflush(stdout);
  TempDir out_dir;
  std::string path = (out_dir / "out.txt").string();
  int saved = ::dup(1);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 1);
  ::close(fd);
  int code = -1;
  try {
    code = lj::cli::cmd_cache(args);
  } catch (...) {
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
    throw;
  }
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  std::ifstream in(path);
  return {code, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

}  // namespace

TEST_CASE("layerjit cache: stats, ls, show, prune, clear", "[cache][cli]") {
  TempDir dir;
  std::string root = (dir / "root").string();
  auto cache = DiskCache::open(options_at(dir / "root"));
  StoreResult a = cache->store(sample_components(1), sample_cubin(1, 3000), {"kernel_one", 0.5, 40, 0});
  StoreResult b = cache->store(sample_components(2), sample_cubin(2, 5000), {"kernel_two"});
  REQUIRE((a.ok && b.ok));
  std::vector<Measured> run = {{"cfg", 1.0, 0.1}};
  REQUIRE(TuningDb::open(options_at(dir / "root"))->record({"g", "T<=64", "sm_90a", "13.0"}, run).ok);

  auto [code, out] = run_cache({"stats", "--dir", root});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("entries        2, ") && Catch::Contains("KiB of 2.0 GiB cap") &&
                      Catch::Contains("s ago") && Catch::Contains("tuning records 1"));

  std::tie(code, out) = run_cache({"ls", "--dir=" + root});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains(a.key.hex()) && Catch::Contains("kernel_one") && Catch::Contains("sm_90a") &&
                      Catch::Contains("2 entries"));

  std::tie(code, out) = run_cache({"show", a.key.hex().substr(0, 8), "--dir", root});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("kernel         kernel_one") && Catch::Contains("registers      40") &&
                      Catch::Contains("compile time   500.0 ms") && Catch::Contains("integrity      ok") &&
                      Catch::Contains("spills         0 bytes"));

  flip_bit(entry_files(*cache, b.key).cubin, 7);
  CHECK_THROWS_WITH(run_cache({"show", b.key.hex(), "--dir", root}), Catch::Contains("corrupt"));
  CHECK_THROWS_WITH(run_cache({"show", "ffffff", "--dir", root}),
                    Catch::Contains("no cache entry") || Catch::Contains("matches"));

  std::tie(code, out) = run_cache({"prune", "--dir", root, "--max-bytes", "1G"});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("verified 1 entry") && Catch::Contains("of 1.0 GiB cap"));

  std::tie(code, out) = run_cache({"clear", "--tuning", "--dir", root});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("removed 1 entry") && Catch::Contains("removed 1 tuning record"));
  CHECK(cache->scan().entries.empty());
}

TEST_CASE("layerjit cache: refused directory and bad command lines", "[cache][cli]") {
  TempDir dir;
  std::filesystem::create_directories(dir / "open");
  ::chmod((dir / "open").c_str(), 0777);
  CHECK_THROWS_AS(run_cache({"stats", "--dir", (dir / "open").string()}), lj::UserError);
  CHECK_THROWS_WITH(run_cache({"ls", "--dir", (dir / "open").string()}), Catch::Contains("writable by others"));
  CHECK_THROWS_AS(run_cache({}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"frob"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"show"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"show", "xyz"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"ls", "--tuning"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"prune", "--max-bytes", "lots"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"stats", "--dir"}), lj::cli::UsageError);
  auto [code, out] = run_cache({"--help"});
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("usage: layerjit cache"));
}
