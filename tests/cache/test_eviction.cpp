// Size cap and eviction: least recently used first by the manifest's last-used stamp, entries held
// by a reader (in this or another process) never evicted, the cap kept while readers run.
#include <fcntl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "cache/disk_cache.h"
#include "cache_test_util.h"

using namespace lj::cache;
using namespace lj::cache::test;
namespace fs = std::filesystem;

namespace {

void set_last_used(const fs::path& manifest, int64_t unix_seconds) {
  struct timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(unix_seconds), 0}};
  REQUIRE(::utimensat(AT_FDCWD, manifest.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("eviction: least recently used first, by the last-used stamp", "[cache][eviction]") {
  TempDir dir;
  auto cache = DiskCache::open(options_at(dir / "root"));
  std::vector<CacheKey> keys;
  int64_t t0 = static_cast<int64_t>(std::time(nullptr)) - 1000;
  for (int i = 0; i < 5; ++i) {
    StoreResult s = cache->store(sample_components(i), sample_cubin(i, 8192), {"k"});
    REQUIRE(s.ok);
    keys.push_back(s.key);
    set_last_used(entry_files(*cache, s.key).manifest, t0 + i);  // 0 oldest ... 4 newest
  }
  // Loading entry 0 makes it the most recently used.
  REQUIRE(cache->load(keys[0]).status == LoadStatus::kHit);
  Usage u = cache->scan();
  REQUIRE(u.entries.size() == 5);
  CHECK(u.entries.back().key == keys[0]);
  uint64_t per_entry = u.entries.front().bytes;
  EvictReport r = cache->evict_to(2 * per_entry + per_entry / 2);
  CHECK(r.evicted == 3);
  CHECK(r.bytes_after <= 2 * per_entry + per_entry / 2);
  CHECK(cache->load(keys[0]).status == LoadStatus::kHit);
  CHECK(cache->load(keys[4]).status == LoadStatus::kHit);
  for (int i : {1, 2, 3}) CHECK(cache->load(keys[i]).status == LoadStatus::kMiss);
}

TEST_CASE("eviction: entries held in this or another process are never evicted", "[cache][eviction]") {
  TempDir dir;
  auto cache = DiskCache::open(options_at(dir / "root"));
  std::vector<CacheKey> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(cache->store(sample_components(i), sample_cubin(i), {"k"}).key);

  // Key 0 held here, key 1 held by a child process until we tell it to let go.
  std::optional<EntryHold> mine = cache->hold(keys[0]);
  REQUIRE(mine);
  int to_child[2], from_child[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(from_child) == 0);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto child_cache = DiskCache::open(options_at(dir / "root"));
    auto held = child_cache->hold(keys[1]);
    char c = held ? 'h' : 'x';
    if (::write(from_child[1], &c, 1) != 1) ::_exit(2);
    if (::read(to_child[0], &c, 1) != 1) ::_exit(3);
    ::_exit(held ? 0 : 1);
  }
  char c = 0;
  REQUIRE(::read(from_child[0], &c, 1) == 1);
  REQUIRE(c == 'h');

  EvictReport r = cache->clear();
  CHECK(r.evicted == 2);
  CHECK(r.skipped_in_use == 2);
  CHECK(cache->load(keys[0]).status == LoadStatus::kHit);
  CHECK(cache->load(keys[1]).status == LoadStatus::kHit);
  CHECK(cache->load(keys[2]).status == LoadStatus::kMiss);

  // Released by both holders, they can go.
  mine.reset();
  REQUIRE(::write(to_child[1], "g", 1) == 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
  r = cache->evict_to(0);
  CHECK(r.evicted == 2);
  CHECK(files_under(dir / "root").empty());
}

TEST_CASE("eviction: the directory stays under the cap while readers run", "[cache][eviction]") {
  TempDir dir;
  constexpr uint64_t kCap = 256 * 1024;
  constexpr int kEntries = 300, kReaders = 3;
  CacheOptions opts = options_at(dir / "root");
  opts.max_bytes = kCap;
  REQUIRE(DiskCache::open(opts)->enabled());
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  std::fflush(nullptr);
  std::vector<pid_t> readers;
  for (int r = 0; r < kReaders; ++r) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(stop[1]);
      auto cache = DiskCache::open(opts);
      uint64_t x = 88172645463325252ULL + static_cast<uint64_t>(r);
      for (int round = 0;; ++round) {
        // The writer closes the pipe when done; a readable EOF ends the loop.
        if (round % 16 == 0) {
          struct timeval tv = {0, 0};
          fd_set set;
          FD_ZERO(&set);
          FD_SET(stop[0], &set);
          if (::select(stop[0] + 1, &set, nullptr, nullptr, &tv) > 0) ::_exit(0);
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int i = static_cast<int>(x % kEntries);
        LoadResult l = cache->load(compute_key(sample_components(i)));
        if (l.status == LoadStatus::kCorrupt) ::_exit(4);
        if (l.status == LoadStatus::kHit && l.entry->cubin != sample_cubin(i, 6000)) ::_exit(5);
      }
    }
    readers.push_back(pid);
  }
  ::close(stop[0]);
  auto cache = DiskCache::open(opts);
  uint64_t worst = 0;
  for (int i = 0; i < kEntries; ++i) {
    REQUIRE(cache->store(sample_components(i), sample_cubin(i, 6000), {"k"}).ok);
    worst = std::max(worst, bytes_under(dir / "root"));
  }
  ::close(stop[1]);
  std::vector<int> statuses;
  for (pid_t pid : readers) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    statuses.push_back(status);
  }
  CHECK(all_succeeded(statuses));
  CHECK(worst <= kCap);
  CHECK(bytes_under(dir / "root") <= kCap);
  // The newest entry survived and most of the others went (which ones depends on what the readers
  // touched last, so no particular old one is named here).
  CHECK(cache->load(compute_key(sample_components(kEntries - 1))).status == LoadStatus::kHit);
  CHECK(cache->scan().entries.size() < kEntries / 4);
}
