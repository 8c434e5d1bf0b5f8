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

TEST_CASE("layerjit cache export / import: tuning records move between machines, checked, kept unless --replace", "[cache][cli]") {
  TempDir dir;
  const std::string here = (dir / "here").string(), there = (dir / "there").string(), file = (dir / "tuning.json").string();
  const TuningKey k1{"matmul bf16 6144x4096", "B<=1,C<=4096", "sm_90a", "13.0"}, k2{"attention decode", "B<=32,C<=4096", "sm_90a", "13.0"};
  {
    auto db = TuningDb::open(options_at(dir / "here"));
    std::vector<Measured> r1 = {{"gemv mt=1 u=2 warps=4", 58.8, 0.3}, {"gemv mt=1 u=4 warps=8", 65.1, 0.4}};
    std::vector<Measured> r2 = {{"decode bn=16 warps=8 stages=3 chunk=256", 12.8, 0.1}};
    REQUIRE(db->record(k1, r1).ok);
    REQUIRE(db->record(k2, r2).ok);
  }
  auto [ec, eout] = run_cache({"export", file, "--dir", here});
  CHECK(ec == 0);
  CHECK_THAT(eout, Catch::Contains("exported 2 tuning record(s) to " + file));
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) CHECK_THAT(e.path().filename().string(), !Catch::Contains(".tmp-"));

  // Another machine's empty cache: both records arrive as they were measured.
  auto [ic, iout] = run_cache({"import", file, "--dir", there});
  CHECK(ic == 0);
  CHECK_THAT(iout, Catch::Contains("imported 2 tuning record(s)") && Catch::Contains("2 new, 0 replaced, 0 kept"));
  auto db = TuningDb::open(options_at(dir / "there"));
  auto got = db->lookup(k1);
  REQUIRE(got);
  CHECK(got->winner.config == "gemv mt=1 u=2 warps=4");
  CHECK(got->winner.median_us == 58.8);
  REQUIRE(got->runner_up);
  CHECK(got->runner_up->config == "gemv mt=1 u=4 warps=8");

  // A record there already is kept, unless --replace.
  std::vector<Measured> local = {{"gemv mt=1 u=8 warps=8", 5.0, 0.2}};  // clearly faster than the imported 12.8: the new winner here
  REQUIRE(db->record(k2, local).ok);
  auto [kc, kout] = run_cache({"import", file, "--dir", there});
  CHECK(kc == 0);
  CHECK_THAT(kout, Catch::Contains("0 new, 0 replaced, 2 kept"));
  CHECK(db->lookup(k2)->winner.config == "gemv mt=1 u=8 warps=8");
  auto [rc, rout] = run_cache({"import", file, "--replace", "--dir", there});
  CHECK(rc == 0);
  CHECK_THAT(rout, Catch::Contains("0 new, 2 replaced, 0 kept"));
  CHECK(db->lookup(k2)->winner.config == "decode bn=16 warps=8 stages=3 chunk=256");

  // One changed figure breaks that record's checksum: the whole file is refused, nothing stored.
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("58.8");
  REQUIRE(at != std::string::npos);
  text.replace(at, 4, "18.8");
  const std::string bad = (dir / "bad.json").string();
  std::ofstream(bad) << text;
  const std::string fresh = (dir / "fresh").string();
  CHECK_THROWS_WITH(run_cache({"import", bad, "--dir", fresh}), Catch::Contains("is not sound (checksum mismatch); nothing imported"));
  CHECK(TuningDb::open(options_at(dir / "fresh"))->list().empty());
  std::ofstream(bad) << "{\"records\": []}";
  CHECK_THROWS_WITH(run_cache({"import", bad, "--dir", fresh}), Catch::Contains("not a tuning export"));
  CHECK_THROWS_WITH(run_cache({"import", (dir / "none.json").string(), "--dir", fresh}), Catch::Contains("cannot read"));
  CHECK_THROWS_AS(run_cache({"import"}), lj::cli::UsageError);
  CHECK_THROWS_AS(run_cache({"export", file, "--replace"}), lj::cli::UsageError);
}
