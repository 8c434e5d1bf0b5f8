// The on-disk kernel cache: content-addressed entries (cubin + generated source + JSON manifest)
// under <root>/v<N>/kernels/<first two hex digits>/, shared safely by any number of processes.
//
// Protocol (docs/cache.md has the full story):
//  - publish: payloads are written to temp files, fsync'd and renamed to names unique to the writer
//    ("<key>-<pid>-<token>.cubin"); then the manifest is written the same way and renamed to
//    "<key>.json" under the shard directory's flock. That one rename publishes the entry. Payloads
//    are immutable once named, so a reader can never see a torn file.
//  - load: open the manifest, take a shared flock on it, check the name still points at the opened
//    file, read and verify everything against the checksums and the key. A mismatch is reported once,
//    removed and returned as kCorrupt (the caller recompiles); it is never returned as a hit.
//  - evict: an exclusive non-blocking flock on the manifest; a reader holding the shared lock makes
//    it fail, so an entry being read (or held with hold()) is never evicted.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key.h"
#include "cache/location.h"
#include "cache/manifest.h"
#include "cache/posix_file.h"

namespace lj::cache {

/// A verified entry, as loaded into memory.
struct CacheEntry {
  Manifest manifest;
  std::string cubin;
  std::string source;
  const CacheKey& key() const { return manifest.key; }
};

enum class LoadStatus {
  kHit,       ///< entry is set and verified
  kMiss,      ///< no published entry
  kCorrupt,   ///< an entry was there but failed verification; it was reported and removed
  kDisabled,  ///< the cache is off (refused root); see DiskCache::disabled_reason()
};
std::string_view to_string(LoadStatus s);

struct LoadResult {
  LoadStatus status = LoadStatus::kMiss;
  std::shared_ptr<const CacheEntry> entry;  ///< set exactly when status == kHit
  std::string detail;                        ///< what was wrong, for kCorrupt and kDisabled
};

struct StoreResult {
  bool ok = false;
  CacheKey key;
  std::shared_ptr<const CacheEntry> entry;  ///< the entry as published, when ok
  std::string error;                         ///< why not, when !ok
};

/// While alive, the entry's manifest carries a shared flock: eviction in any process skips it.
class EntryHold {
 public:
  EntryHold(UniqueFd fd, FlockGuard lock) : fd_(std::move(fd)), lock_(std::move(lock)) {}

 private:
  UniqueFd fd_;      // declared first, destroyed last: the lock is dropped before the close
  FlockGuard lock_;
};

/// One published entry as seen by a directory scan (no file is opened).
struct EntryStat {
  CacheKey key;
  uint64_t bytes = 0;          ///< manifest + every payload file of the key
  int64_t last_used_unix = 0;  ///< the manifest's mtime: publish time, refreshed by every load
};

/// A file in a shard directory that belongs to no published entry: a temp file, or a payload whose
/// manifest was never published (writer killed) or has gone.
struct LooseFile {
  std::string shard, name;
  uint64_t bytes = 0;
  int64_t mtime_unix = 0;
  bool temp = false;
};

struct Usage {
  std::vector<EntryStat> entries;  ///< sorted by last use, oldest first
  std::vector<LooseFile> loose;    ///< temp and orphan files
  uint64_t entry_bytes = 0;
  uint64_t temp_files = 0, temp_bytes = 0;      ///< in-flight or abandoned ".tmp-*" files
  uint64_t orphan_files = 0, orphan_bytes = 0;  ///< payloads of keys with no manifest
  uint64_t other_files = 0, other_bytes = 0;    ///< names layerjit never writes
  /// Shard names ("00".."ff") that are not real directories: a symlink (never followed: its entries
  /// would be read and written outside the private root) or a file. Their entries are invisible, so
  /// `stats` and `ls` name them and `clear` and `prune` remove them (the link, never its target).
  std::vector<std::string> refused_shards;
  uint64_t total_bytes() const { return entry_bytes + temp_bytes + orphan_bytes + other_bytes; }
};

struct EvictReport {
  uint64_t refused_shards_removed = 0;  ///< clear only: Usage::refused_shards removed
  uint64_t evicted = 0;
  uint64_t skipped_in_use = 0;
  uint64_t bytes_freed = 0;
  uint64_t bytes_after = 0;
};

struct PruneReport {
  uint64_t refused_shards_removed = 0;  ///< Usage::refused_shards removed
  uint64_t stale_files_removed = 0;  ///< temp files and orphan payloads of dead or old writers
  uint64_t stale_bytes = 0;
  uint64_t corrupt_removed = 0;      ///< entries that failed verification (verify only)
  uint64_t verified = 0;
  EvictReport eviction;
};

class DiskCache {
 public:
  /// Opens the cache at options.root (or the default root). Never fails: a refused or unusable
  /// root gives a disabled cache and one warning.
  static std::unique_ptr<DiskCache> open(CacheOptions options);

  bool enabled() const { return root_.has_value(); }
  const std::string& disabled_reason() const { return disabled_reason_; }
  /// The root as configured (also when refused) and the versioned directory in use.
  const std::filesystem::path& root_path() const { return root_path_; }
  std::filesystem::path version_dir() const { return root_ ? root_->version_dir : std::filesystem::path(); }
  const CacheOptions& options() const { return options_; }

  /// Loads and verifies an entry. `touch` refreshes its last-used stamp (inspection does not).
  LoadResult load(const CacheKey& key, bool touch = true);
  /// Publishes an entry for `components` (the key is computed from them), then keeps the cache under
  /// its cap. A failure (disk full, cache off) is returned, never thrown: the caller still has its
  /// compiled cubin.
  StoreResult store(const KeyComponents& components, std::string_view cubin, const KernelInfo& info);
  /// The manifest of a published entry, parsed but not verified (for listings); nullopt when absent
  /// or unreadable.
  std::optional<Manifest> peek_manifest(const CacheKey& key);
  /// Marks an entry in use until the hold is destroyed; nullopt when it is not published.
  std::optional<EntryHold> hold(const CacheKey& key);
  /// Removes one entry unless it is in use; true when it was removed.
  bool remove(const CacheKey& key);

  /// Sizes and stamps of everything under kernels/.
  Usage scan();
  /// Removes least-recently-used entries not in use until the kernels take at most `target_bytes`
  /// (stale temp and orphan files go first).
  EvictReport evict_to(uint64_t target_bytes);
  /// Removes stale temp and orphan files; with `verify`, loads every entry (removing corrupt ones);
  /// then evicts down to the cap.
  PruneReport prune(bool verify);
  /// Removes every entry not in use and every stale file.
  EvictReport clear();

  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

 private:
  explicit DiskCache(CacheOptions options);

  struct Acquired;  // an open, locked, still-current manifest
  int open_shard(const CacheKey& key, bool create, UniqueFd& out);
  int acquire(int shard_fd, const CacheKey& key, int lock_op, Acquired& out);
  void remove_corrupt(int shard_fd, const Acquired& a, const CacheKey& key, const std::string& why);
  bool try_evict(const CacheKey& key, uint64_t& freed);
  uint64_t remove_refused_shards(Usage& usage);
  uint64_t remove_stale_files(Usage& usage, bool everything_dead);
  EvictReport evict_locked(uint64_t target_bytes);
  void after_store(uint64_t bytes_written);
  void warn(const std::string& message) const;

  CacheOptions options_;
  std::filesystem::path root_path_;
  std::optional<OpenedRoot> root_;
  UniqueFd kernels_fd_;
  std::string disabled_reason_;

  // Eviction bookkeeping: one evicting thread per process; the size estimate is the last scan plus
  // what this process wrote since (other processes' writes are caught by their own checks).
  std::mutex evict_mutex_;
  bool scanned_ = false;
  uint64_t bytes_at_scan_ = 0;
  uint64_t written_since_scan_ = 0;
  std::chrono::steady_clock::time_point last_scan_{};
};

}  // namespace lj::cache
