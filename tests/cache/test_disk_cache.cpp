// The disk cache in one process: round trip, layout and modes, corruption of every kind detected,
// reported once, removed and rebuilt (never loaded), planted files ignored, the memory layer.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "cache/kernel_cache.h"
#include "cache/location.h"
#include "cache_test_util.h"

using namespace lj::cache;
using namespace lj::cache::test;
namespace fs = std::filesystem;

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void copy_private(const fs::path& from, const fs::path& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  ::chmod(to.c_str(), 0600);
}

}  // namespace

TEST_CASE("disk cache: store then load round trip, layout and modes", "[cache][disk]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(dir / "root", warnings));
  REQUIRE(cache->enabled());
  KeyComponents c = sample_components(7);
  std::string cubin = sample_cubin(7);
  KernelInfo info{"sample_7", 0.25, 32, 0};
  StoreResult s = cache->store(c, cubin, info);
  REQUIRE(s.ok);
  CHECK(s.key == compute_key(c));

  // A second cache object (as another process would open it) sees the entry.
  auto other = DiskCache::open(options_at(dir / "root", warnings));
  LoadResult l = other->load(s.key);
  REQUIRE(l.status == LoadStatus::kHit);
  CHECK(l.entry->cubin == cubin);
  CHECK(l.entry->source == c.source);
  CHECK(l.entry->manifest.info.kernel_name == "sample_7");
  CHECK(l.entry->manifest.info.registers == 32);
  CHECK(l.entry->manifest.arch == "sm_90a");
  CHECK(l.entry->manifest.options == c.options);
  CHECK(other->load(compute_key(sample_components(8))).status == LoadStatus::kMiss);

  EntryFiles f = entry_files(*cache, s.key);
  CHECK(f.manifest.parent_path() == dir / "root" / "v1" / "kernels" / s.key.hex().substr(0, 2));
  CHECK(mode_of(dir / "root") == 0700);
  CHECK(mode_of(dir / "root" / "v1") == 0700);
  CHECK(mode_of(f.manifest.parent_path()) == 0700);
  for (const fs::path& p : {f.manifest, f.cubin, f.source}) CHECK(mode_of(p) == 0600);
  CHECK(files_under(dir / "root").size() == 3);  // no temp file left behind
  CHECK(warnings->empty());
}

TEST_CASE("disk cache: a corrupt entry is detected, reported once, removed and rebuilt", "[cache][disk]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(dir / "root", warnings));
  const KeyComponents c = sample_components(11);
  const std::string cubin = sample_cubin(11, 10000);
  const CacheKey key = compute_key(c);
  REQUIRE(cache->store(c, cubin, {"sample_11"}).ok);
  EntryFiles f = entry_files(*cache, key);

  SECTION("truncated cubin") { fs::resize_file(f.cubin, 5000); }
  SECTION("empty cubin") { fs::resize_file(f.cubin, 0); }
  SECTION("cubin with bytes appended") { std::ofstream(f.cubin, std::ios::app | std::ios::binary) << "extra"; }
  SECTION("bit flip in the middle of the cubin") { flip_bit(f.cubin, 4321); }
  SECTION("bit flip in the last byte of the cubin") { flip_bit(f.cubin, -1); }
  SECTION("bit flip in the source") { flip_bit(f.source, 10); }
  SECTION("cubin payload deleted") { fs::remove(f.cubin); }
  SECTION("truncated manifest") { fs::resize_file(f.manifest, fs::file_size(f.manifest) / 2); }
  // A FIFO would block a plain open for reading until some writer came (compile and every `cache`
  // command hung): opened without waiting, it is not a regular file, so the entry is corrupt.
  SECTION("a FIFO in place of the manifest") {
    fs::remove(f.manifest);
    REQUIRE(::mkfifo(f.manifest.c_str(), 0600) == 0);
  }
  SECTION("a FIFO in place of the cubin") {
    fs::remove(f.cubin);
    REQUIRE(::mkfifo(f.cubin.c_str(), 0600) == 0);
  }
  // A directory where a file belongs: unlink alone fails on it, so the entry was reported "removed"
  // on every run and never was. Removed whole, the files under it included.
  SECTION("a directory in place of the manifest") {
    fs::remove(f.manifest);
    fs::create_directories(f.manifest / "sub");
    std::ofstream(f.manifest / "sub" / "file") << "x";
  }
  SECTION("a directory in place of the cubin") {
    fs::remove(f.cubin);
    fs::create_directories(f.cubin);
    std::ofstream(f.cubin / "file") << "x";
  }
  SECTION("manifest checksum edited") { flip_bit(f.manifest, static_cast<long>(std::string(
      std::istreambuf_iterator<char>(std::ifstream(f.manifest).rdbuf()), {}).find("xxh3_128") + 12)); }

  LoadResult first = cache->load(key);
  CHECK(first.status == LoadStatus::kCorrupt);
  CHECK_FALSE(first.entry);
  CHECK_FALSE(first.detail.empty());
  REQUIRE(warnings->size() == 1);
  CHECK_THAT(warnings->front(), Catch::Contains(key.hex()) && Catch::Contains("corrupt"));
  CHECK_THAT(warnings->front(), Catch::Contains("removed it"));
  CHECK_FALSE(fs::exists(f.manifest));
  CHECK_FALSE(fs::is_directory(f.cubin));  // a corrupt payload directory goes with its entry
  // Removed: the next lookup is a plain miss, and a rebuild is loadable again.
  CHECK(cache->load(key).status == LoadStatus::kMiss);
  REQUIRE(cache->store(c, cubin, {"sample_11"}).ok);
  LoadResult again = cache->load(key);
  REQUIRE(again.status == LoadStatus::kHit);
  CHECK(again.entry->cubin == cubin);
  // Corrupting it again is still detected, but not reported a second time in this process.
  flip_bit(entry_files(*cache, key).cubin, 100);
  CHECK(cache->load(key).status == LoadStatus::kCorrupt);
  CHECK(warnings->size() == 1);
}

TEST_CASE("disk cache: an entry filed under the wrong key is detected", "[cache][disk]") {
  TempDir dir;
  auto warnings = std::make_shared<std::vector<std::string>>();
  auto cache = DiskCache::open(options_at(dir / "root", warnings));
  const KeyComponents a = sample_components(1);
  REQUIRE(cache->store(a, sample_cubin(1), {"a"}).ok);
  const CacheKey ka = compute_key(a);
  EntryFiles fa = entry_files(*cache, ka);

  // Find a second key in the same shard, so the copied payload names stay inside one directory.
  CacheKey kb;
  for (int i = 2;; ++i) {
    kb = compute_key(sample_components(i));
    if (kb.hex().substr(0, 2) == ka.hex().substr(0, 2)) break;
  }
  SECTION("manifest copied verbatim under another key's name") {
    copy_private(fa.manifest, fa.manifest.parent_path() / (kb.hex() + ".json"));
  }
  SECTION("manifest rewritten to claim the other key, payloads renamed to match") {
    std::ifstream in(fa.manifest);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at; (at = text.find(ka.hex())) != std::string::npos;) text.replace(at, 32, kb.hex());
    std::ofstream(fa.manifest.parent_path() / (kb.hex() + ".json")) << text;
    for (const fs::path& p : {fa.cubin, fa.source}) {
      std::string name = p.filename().string();
      copy_private(p, p.parent_path() / (kb.hex() + name.substr(32)));
    }
  }
  LoadResult l = cache->load(kb);
  CHECK(l.status == LoadStatus::kCorrupt);
  CHECK(warnings->size() == 1);
  CHECK(cache->load(kb).status == LoadStatus::kMiss);
  CHECK(cache->load(ka).status == LoadStatus::kHit);  // the genuine entry is untouched
}

TEST_CASE("disk cache: files without a manifest are a miss and are swept once stale", "[cache][disk]") {
  TempDir dir;
  CacheOptions o = options_at(dir / "root");
  o.dead_writer_grace_seconds = 0;
  auto cache = DiskCache::open(o);
  const KeyComponents c = sample_components(5);
  const CacheKey key = compute_key(c);
  fs::path shard = cache->version_dir() / "kernels" / key.hex().substr(0, 2);
  fs::create_directories(shard);
  ::chmod(shard.c_str(), 0700);
  // A planted cubin with a payload-style name from a writer that no longer exists, one with a plain
  // name, and an abandoned temp file.
  std::ofstream(shard / (key.hex() + "-999999999-00000000deadbeef.cubin")) << sample_cubin(5);
  std::ofstream(shard / (key.hex() + ".cubin")) << sample_cubin(5);
  std::ofstream(shard / ".tmp-999999999-0123456789abcdef") << "partial";
  CHECK(cache->load(key).status == LoadStatus::kMiss);
  Usage u = cache->scan();
  CHECK(u.entries.empty());
  CHECK(u.orphan_files == 1);
  CHECK(u.temp_files == 1);
  CHECK(u.other_files == 1);
  PruneReport p = cache->prune(true);
  CHECK(p.stale_files_removed == 2);
  CHECK_FALSE(fs::exists(shard / (key.hex() + "-999999999-00000000deadbeef.cubin")));
  CHECK(cache->load(key).status == LoadStatus::kMiss);
  // A temp file of a live writer (this process) is left alone until it is abandoned.
  std::ofstream(shard / fmt::format(".tmp-{}-0123456789abcdef", ::getpid())) << "in flight";
  CHECK(cache->prune(false).stale_files_removed == 0);
}

TEST_CASE("disk cache: republishing a key replaces the entry and drops the old payloads", "[cache][disk]") {
  TempDir dir;
  auto cache = DiskCache::open(options_at(dir / "root"));
  const KeyComponents c = sample_components(2);
  REQUIRE(cache->store(c, sample_cubin(2, 1000), {"first"}).ok);
  EntryFiles before = entry_files(*cache, compute_key(c));
  REQUIRE(cache->store(c, sample_cubin(3, 2000), {"second"}).ok);
  EntryFiles after = entry_files(*cache, compute_key(c));
  CHECK(before.cubin != after.cubin);
  CHECK_FALSE(fs::exists(before.cubin));
  CHECK_FALSE(fs::exists(before.source));
  CHECK(files_under(dir / "root").size() == 3);
  LoadResult l = cache->load(compute_key(c));
  REQUIRE(l.status == LoadStatus::kHit);
  CHECK(l.entry->manifest.info.kernel_name == "second");
  CHECK(cache->remove(compute_key(c)));
  CHECK(files_under(dir / "root").empty());
}

TEST_CASE("kernel cache: the memory layer answers repeats and survives a disabled disk", "[cache][memory]") {
  TempDir dir;
  KernelCache kc(DiskCache::open(options_at(dir / "root")));
  const KeyComponents c = sample_components(4);
  StoreResult s = kc.put(c, sample_cubin(4), {"k4"});
  REQUIRE(s.ok);
  LoadResult a = kc.get(s.key), b = kc.get(s.key);
  REQUIRE(a.status == LoadStatus::kHit);
  CHECK(a.entry.get() == b.entry.get());  // one shared object per key
  // A fresh process-level cache loads from disk once, then from memory.
  KernelCache fresh(DiskCache::open(options_at(dir / "root")));
  REQUIRE(fresh.get(s.key).status == LoadStatus::kHit);
  fs::remove_all(dir / "root" / "v1" / "kernels");
  CHECK(fresh.get(s.key).status == LoadStatus::kHit);

  fs::create_directories(dir / "open");
  ::chmod((dir / "open").c_str(), 0777);
  KernelCache off(DiskCache::open(options_at(dir / "open")));
  CHECK_FALSE(off.disk().enabled());
  StoreResult put = off.put(c, sample_cubin(4), {"k4"});
  CHECK_FALSE(put.ok);
  CHECK(off.get(put.key).status == LoadStatus::kHit);
  CHECK(off.disk().load(put.key).status == LoadStatus::kDisabled);
}

TEST_CASE("memory layer: get_or_make makes once and shares", "[cache][memory]") {
  MemoryLayer<int> layer;
  int made = 0;
  auto make = [&] {
    ++made;
    return std::make_shared<int>(42);
  };
  auto a = layer.get_or_make(CacheKey{1, 2}, make);
  auto b = layer.get_or_make(CacheKey{1, 2}, make);
  CHECK(made == 1);
  CHECK(a.get() == b.get());
  CHECK(layer.insert(CacheKey{1, 2}, std::make_shared<int>(7)).get() == a.get());
  CHECK(layer.get_or_make(CacheKey{3, 4}, [] { return std::shared_ptr<int>(); }) == nullptr);
  CHECK(layer.size() == 1);
  CHECK(layer.erase(CacheKey{1, 2}));
  CHECK(layer.find(CacheKey{1, 2}) == nullptr);
}

TEST_CASE("cache options: location precedence and byte sizes", "[cache][options]") {
  CHECK(parse_byte_size("2147483648") == uint64_t{2147483648});
  CHECK(parse_byte_size("512M") == uint64_t{512} << 20);
  CHECK(parse_byte_size("2G") == uint64_t{2} << 30);
  CHECK(parse_byte_size("2GiB") == uint64_t{2} << 30);
  CHECK(parse_byte_size("1KB") == 1024u);
  CHECK_FALSE(parse_byte_size(""));
  CHECK_FALSE(parse_byte_size("G"));
  CHECK_FALSE(parse_byte_size("12Q"));
  CHECK_FALSE(parse_byte_size("-1"));
  CHECK_FALSE(parse_byte_size("99999999999T"));

  // Save and restore the three variables around the precedence checks.
  struct Saved {
    std::string name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* n : {"LAYERJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? std::optional<std::string>(v) : std::nullopt});
  }
  ::setenv("LAYERJIT_CACHE_DIR", "/a/lj", 1);
  ::setenv("XDG_CACHE_HOME", "/b/xdg", 1);
  ::setenv("HOME", "/c/home", 1);
  CHECK(default_cache_root()->path == "/a/lj");
  ::unsetenv("LAYERJIT_CACHE_DIR");
  CHECK(default_cache_root()->path == "/b/xdg/layerjit");
  ::setenv("XDG_CACHE_HOME", "", 1);  // empty counts as unset, per the XDG spec
  CHECK(default_cache_root()->path == "/c/home/.cache/layerjit");
  CHECK(default_cache_root()->chosen_by == "HOME");
  for (const Saved& s : saved) {
    if (s.value) ::setenv(s.name.c_str(), s.value->c_str(), 1);
    else ::unsetenv(s.name.c_str());
  }
}

TEST_CASE("cache options: a cap too small to keep an entry, or malformed, is an error", "[cache][options]") {
  const char* had = std::getenv("LAYERJIT_CACHE_MAX_BYTES");
  const std::optional<std::string> saved = had ? std::optional<std::string>(had) : std::nullopt;
  for (const char* tiny : {"0", "1", "1K"}) {
    ::setenv("LAYERJIT_CACHE_MAX_BYTES", tiny, 1);
    CHECK_THROWS_WITH(cache_options_from_env(),
                      Catch::Contains(std::string("LAYERJIT_CACHE_MAX_BYTES=") + tiny +
                                      ": below the 1 MiB a cache needs to keep its entries (LAYERJIT_CACHE=off turns the cache off)"));
  }
  ::setenv("LAYERJIT_CACHE_MAX_BYTES", "12Q", 1);
  CHECK_THROWS_WITH(cache_options_from_env(), "LAYERJIT_CACHE_MAX_BYTES=12Q: expected a byte count such as 2147483648 or 2G");
  ::setenv("LAYERJIT_CACHE_MAX_BYTES", "1M", 1);
  CHECK(cache_options_from_env().max_bytes == uint64_t{1} << 20);
  if (saved) ::setenv("LAYERJIT_CACHE_MAX_BYTES", saved->c_str(), 1);
  else ::unsetenv("LAYERJIT_CACHE_MAX_BYTES");
}
