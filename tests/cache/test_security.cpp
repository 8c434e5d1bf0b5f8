// Security: a cache root another user could write to, or one reached through a symlink, is refused
// with a clear warning; the cache is then off and everything else keeps working. Entries are created
// private (0700 directories, 0600 files) whatever the umask.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cache/disk_cache.h"
#include "cache/tuning_db.h"
#include "cache_test_util.h"

using namespace lj::cache;
using namespace lj::cache::test;
namespace fs = std::filesystem;

namespace {

// Opens a cache at `root`, expects a refusal mentioning `why`, and checks the disabled cache behaves.
void expect_refused(const fs::path& root, const std::string& why, bool tuning_too = true) {
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(root, warnings));
  CHECK_FALSE(cache->enabled());
  CHECK_THAT(cache->disabled_reason(), Catch::Contains(why));
  REQUIRE(warnings->size() <= 1);  // reported once per process per root
  KeyComponents c = sample_components(1);
  CHECK(cache->load(compute_key(c)).status == LoadStatus::kDisabled);
  StoreResult s = cache->store(c, sample_cubin(1), {"k"});
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.error, Catch::Contains("disabled"));
  CHECK(cache->scan().entries.empty());
  if (tuning_too) CHECK_FALSE(TuningDb::open(options_at(root, warnings))->enabled());
}

}  // namespace

TEST_CASE("security: a root owned by another user is refused", "[cache][security]") {
  TempDir dir;
  if (::geteuid() == 0) {
    fs::create_directories(dir / "foreign");
    ::chmod((dir / "foreign").c_str(), 0700);
    REQUIRE(::chown((dir / "foreign").c_str(), 65534, 65534) == 0);
    expect_refused(dir / "foreign", "owned by uid 65534");
    CHECK_FALSE(fs::exists(dir / "foreign" / "v1"));  // nothing was written into it
  } else {
    // Not root: chown to another uid is impossible, but "/" is a directory owned by another user.
    WARN("not root: checking the foreign-owner refusal on / instead of a chown'ed directory");
    expect_refused("/", "owned by uid 0");
  }
}

TEST_CASE("security: a root writable by group or others is refused", "[cache][security]") {
  TempDir dir;
  for (mode_t mode : {0770, 0707, 0777, 01777}) {
    fs::path root = dir / fmt::format("root{:o}", mode);
    fs::create_directories(root);
    REQUIRE(::chmod(root.c_str(), mode) == 0);
    expect_refused(root, (mode & 002) ? "writable by others" : "writable by its group");
  }
  // An existing private root is accepted, and a group-writable version directory inside it is not.
  fs::path ok = dir / "ok";
  fs::create_directories(ok / "v1");
  ::chmod(ok.c_str(), 0755);
  ::chmod((ok / "v1").c_str(), 0770);
  expect_refused(ok, "writable by its group");
  ::chmod((ok / "v1").c_str(), 0700);
  CHECK(DiskCache::open(options_at(ok))->enabled());
}

TEST_CASE("security: a root reached through a symlink is refused", "[cache][security]") {
  TempDir dir;
  fs::create_directories(dir / "real");
  ::chmod((dir / "real").c_str(), 0700);
  fs::create_directory_symlink(dir / "real", dir / "link");
  expect_refused(dir / "link", "symlink");
  // Trailing separators made open() resolve the link before the check saw it: the same refusal.
  for (const char* tail : {"/", "//", "/.", "/./"}) expect_refused(fs::path((dir / "link").string() + tail), "symlink");
  // A symlink to a directory that does not exist yet is not followed to create it either.
  fs::create_directory_symlink(dir / "not-yet", dir / "dangling");
  expect_refused(dir / "dangling", "symlink");
  CHECK_FALSE(fs::exists(dir / "not-yet"));
  // Symlinks inside the cache are not followed: a kernels/ directory swapped for a link is refused.
  fs::path root = dir / "root";
  REQUIRE(DiskCache::open(options_at(root))->enabled());
  fs::remove_all(root / "v1" / "kernels");
  fs::create_directory_symlink(dir / "real", root / "v1" / "kernels");
  expect_refused(root, "symlink", /*tuning_too=*/false);  // tuning/ is a separate, intact directory
  CHECK(TuningDb::open(options_at(root))->enabled());
}

TEST_CASE("security: a manifest or payload that is a symlink is never loaded", "[cache][security]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(dir / "root", warnings));
  KeyComponents c = sample_components(9);
  CacheKey key = compute_key(c);
  REQUIRE(cache->store(c, sample_cubin(9), {"k"}).ok);
  EntryFiles f = entry_files(*cache, key);
  fs::copy_file(f.cubin, dir / "elsewhere.cubin");
  fs::remove(f.cubin);
  fs::create_symlink(dir / "elsewhere.cubin", f.cubin);
  CHECK(cache->load(key).status == LoadStatus::kCorrupt);
  REQUIRE(cache->store(c, sample_cubin(9), {"k"}).ok);
  f = entry_files(*cache, key);
  fs::copy_file(f.manifest, dir / "elsewhere.json");
  fs::remove(f.manifest);
  fs::create_symlink(dir / "elsewhere.json", f.manifest);
  LoadResult l = cache->load(key);
  CHECK(l.status != LoadStatus::kHit);
}

TEST_CASE("security: a shard directory swapped for a symlink is named, never followed, and removed by prune and clear", "[cache][security]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(dir / "root", warnings));
  KeyComponents c = sample_components(12);
  CacheKey key = compute_key(c);
  REQUIRE(cache->store(c, sample_cubin(12), {"k"}).ok);
  const fs::path shard = entry_files(*cache, key).manifest.parent_path();
  fs::rename(shard, dir / "moved");
  fs::create_directory_symlink(dir / "moved", shard);
  // Its entries were skipped with nothing said: now the scan names the shard (stats and ls print it).
  Usage u = cache->scan();
  CHECK(u.entries.empty());
  CHECK(u.other_files == 0);
  REQUIRE(u.refused_shards.size() == 1);
  CHECK(u.refused_shards[0] == shard.filename().string());
  CHECK(cache->load(key).status != LoadStatus::kHit);  // never read through the link
  SECTION("prune") { CHECK(cache->prune(false).refused_shards_removed == 1); }
  SECTION("clear") { CHECK(cache->clear().refused_shards_removed == 1); }
  CHECK_FALSE(fs::is_symlink(shard));
  CHECK(fs::exists(dir / "moved" / (key.hex() + ".json")));  // the target untouched
  CHECK(cache->scan().refused_shards.empty());
  REQUIRE(cache->store(c, sample_cubin(12), {"k"}).ok);  // the shard is made again, a real directory
  CHECK(cache->load(key).status == LoadStatus::kHit);
}

TEST_CASE("security: directories 0700 and files 0600 even under umask 0", "[cache][security]") {
  TempDir dir;
  mode_t old = ::umask(0);
  auto cache = DiskCache::open(options_at(dir / "a" / "b" / "root"));
  bool ok = cache->store(sample_components(1), sample_cubin(1), {"k"}).ok;
  auto db = TuningDb::open(options_at(dir / "a" / "b" / "root"));
  std::vector<Measured> run = {{"cfg", 1.0, 0.1}};
  bool tuned = db->record({"g", "T<=64", "sm_90a", "13.0"}, run).ok;
  ::umask(old);
  REQUIRE(ok);
  REQUIRE(tuned);
  for (auto it = fs::recursive_directory_iterator(dir / "a"); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    INFO(it->path());
    CHECK((st.st_mode & 07777) == (S_ISDIR(st.st_mode) ? 0700u : 0600u));
  }
}
