// Many processes on one cache directory: no torn read, no exception, every read a miss or a correct
// entry; writers killed with SIGKILL mid-write leave nothing that loads, and their leftovers are swept.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cache/disk_cache.h"
#include "cache_test_util.h"

using namespace lj::cache;
using namespace lj::cache::test;

namespace {

// A cubin that checks itself: it names its key, its writer and round, and ends with the checksum of
// everything before it. Two writers of one key write different bytes, so a read mixing two writers'
// files (a torn read) could not pass both the cache's checks and this one.
std::string self_checking_cubin(const CacheKey& key, int writer, int round, size_t bytes) {
  std::string body = fmt::format("key={} writer={} round={}\n", key.hex(), writer, round);
  body += sample_cubin(writer * 1000 + round, bytes);
  return body + checksum(body);
}

bool cubin_is_valid(const std::string& cubin, const CacheKey& key) {
  if (cubin.size() < 32 || cubin.rfind("key=" + key.hex() + " ", 0) != 0) return false;
  return checksum(std::string_view(cubin).substr(0, cubin.size() - 32)) == cubin.substr(cubin.size() - 32);
}

}  // namespace

TEST_CASE("concurrency: 16 processes x 200 rounds on shared keys", "[cache][concurrency]") {
  TempDir dir;
  constexpr int kProcesses = 16, kRounds = 200, kKeys = 6;
  // Created once up front so the children race on entries, not on creating the root.
  REQUIRE(DiskCache::open(options_at(dir / "root"))->enabled());
  auto started = std::chrono::steady_clock::now();
  std::vector<int> statuses = run_children(kProcesses, [&](int writer) {
    auto warnings = std::make_shared<std::vector<std::string>>();
    auto cache = DiskCache::open(options_at(dir / "root", warnings));
    if (!cache->enabled()) return 2;
    uint64_t x = 0x2545F4914F6CDD1DULL * static_cast<uint64_t>(writer + 1);
    int hits = 0;
    for (int round = 0; round < kRounds; ++round) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      int k = static_cast<int>(x % kKeys);
      KeyComponents c = sample_components(k);
      CacheKey key = compute_key(c);
      LoadResult l = cache->load(key);
      switch (l.status) {
        case LoadStatus::kHit:
          if (!cubin_is_valid(l.entry->cubin, key) || l.entry->source != c.source) {
            std::fprintf(stderr, "writer %d round %d: wrong entry for %s\n", writer, round, key.hex().c_str());
            return 3;
          }
          ++hits;
          break;
        case LoadStatus::kMiss:
          break;
        case LoadStatus::kCorrupt:
          std::fprintf(stderr, "writer %d round %d: corrupt entry %s: %s\n", writer, round, key.hex().c_str(),
                       l.detail.c_str());
          return 4;
        case LoadStatus::kDisabled:
          return 5;
      }
      // Misses write; some hits rewrite (racing replacement) and some rounds remove, so readers
      // constantly meet entries being replaced and removed under them.
      if (l.status == LoadStatus::kMiss || x % 16 == 0) {
        size_t bytes = 512 + (x >> 20) % 16384;
        StoreResult s = cache->store(c, self_checking_cubin(key, writer, round, bytes), {"sample"});
        if (!s.ok) {
          std::fprintf(stderr, "writer %d: store failed: %s\n", writer, s.error.c_str());
          return 6;
        }
      } else if (x % 16 == 1) {
        cache->remove(key);
      }
    }
    if (!warnings->empty()) {
      std::fprintf(stderr, "writer %d: unexpected warning: %s\n", writer, warnings->front().c_str());
      return 7;
    }
    return hits > 0 ? 0 : 8;
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  WARN(fmt::format("{} processes x {} rounds: {:.2f} s", kProcesses, kRounds, seconds));
  CHECK(all_succeeded(statuses));
  // Afterwards every published entry verifies, and nothing in flight was left behind.
  auto cache = DiskCache::open(options_at(dir / "root"));
  Usage u = cache->scan();
  CHECK(u.temp_files == 0);
  CHECK(u.orphan_files == 0);
  for (const EntryStat& e : u.entries) {
    LoadResult l = cache->load(e.key);
    REQUIRE(l.status == LoadStatus::kHit);
    CHECK(cubin_is_valid(l.entry->cubin, e.key));
  }
}

TEST_CASE("concurrency: writers killed with SIGKILL mid-write leave nothing that loads", "[cache][concurrency]") {
  TempDir dir;
  CacheOptions opts = options_at(dir / "root");
  opts.dead_writer_grace_seconds = 0;
  REQUIRE(DiskCache::open(opts)->enabled());
  constexpr int kWriters = 6, kKeys = 4;
  std::fflush(nullptr);
  for (int wave = 0; wave < 4; ++wave) {
    std::vector<pid_t> pids;
    for (int w = 0; w < kWriters; ++w) {
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        auto cache = DiskCache::open(opts);
        // Large payloads so the kill lands inside a write or an fsync as often as not.
        for (int round = 0;; ++round) {
          int k = (w + round) % kKeys;
          KeyComponents c = sample_components(100 + k);
          (void)cache->store(c, self_checking_cubin(compute_key(c), w, round, size_t{2} << 20), {"big"});
        }
      }
      pids.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 40 * wave));
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);

    auto warnings = std::make_shared<std::vector<std::string>>();
    CacheOptions check_opts = opts;
    check_opts.warn = [warnings](const std::string& m) { warnings->push_back(m); };
    auto cache = DiskCache::open(check_opts);
    for (int k = 0; k < kKeys; ++k) {
      CacheKey key = compute_key(sample_components(100 + k));
      LoadResult l = cache->load(key);
      INFO("wave " << wave << " key " << k << ": " << to_string(l.status) << " " << l.detail);
      CHECK((l.status == LoadStatus::kHit || l.status == LoadStatus::kMiss));
      if (l.status == LoadStatus::kHit) CHECK(cubin_is_valid(l.entry->cubin, key));
    }
    CHECK(warnings->empty());
    // The killed writers' temp files and unpublished payloads are recovered.
    cache->prune(false);
    Usage u = cache->scan();
    CHECK(u.temp_files == 0);
    CHECK(u.orphan_files == 0);
  }
}
