// The on-disk kernel cache (see disk_cache.h for the protocol, docs/cache.md for the reasons).
// Locks, all flock (released by the kernel when a holder dies, so none can go stale):
//  - manifest, shared: a reader between opening the manifest and verifying the payloads, or a hold();
//  - manifest, exclusive non-blocking: eviction, which skips the entry when a reader holds it;
//  - shard directory, exclusive: around publishing (rename) and removing a manifest, so a remover
//    that checked "the name still points at the file I verified" cannot unlink a newer entry.
// Lock order is manifest before shard directory; nothing takes a manifest lock while holding a
// shard lock, so the two cannot deadlock.
#include "cache/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cache/format.h"

namespace lj::cache {

namespace {

constexpr uint64_t kManifestLimit = uint64_t{1} << 20;
constexpr int kAcquireAttempts = 16;
// Eviction watermarks: a store that pushes the estimate over 90 % of the cap evicts down to 75 %,
// so the cap holds with room for the next few entries and eviction does not run on every store.
constexpr double kHighWater = 0.90;
constexpr double kLowWater = 0.75;
// A size estimate older than this is refreshed by a scan: other processes write too.
constexpr auto kRescanAfter = std::chrono::seconds(5);

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

std::string shard_name(const CacheKey& key) { return key.hex().substr(0, 2); }

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Each corrupt entry and each refused root is reported once per process, not on every lookup.
bool first_report(const std::string& id) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(mutex);
  return reported.insert(id).second;
}

bool still_current(int shard_fd, int fd, const std::string& name) {
  struct stat opened {}, named {};
  return ::fstat(fd, &opened) == 0 && ::fstatat(shard_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         same_file(opened, named);
}

uint64_t file_size_at(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

std::string_view to_string(LoadStatus s) {
  switch (s) {
    case LoadStatus::kHit: return "hit";
    case LoadStatus::kMiss: return "miss";
    case LoadStatus::kCorrupt: return "corrupt";
    case LoadStatus::kDisabled: return "disabled";
  }
  return "invalid LoadStatus";
}

struct DiskCache::Acquired {
  UniqueFd fd;  // declared first, destroyed last
  FlockGuard lock;
};

DiskCache::DiskCache(CacheOptions options) : options_(std::move(options)) {
  if (!options_.warn) options_.warn = warn_to_stderr;
}

void DiskCache::warn(const std::string& message) const { options_.warn(message); }

std::unique_ptr<DiskCache> DiskCache::open(CacheOptions options) {
  std::unique_ptr<DiskCache> c(new DiskCache(std::move(options)));
  if (c->options_.mode == CacheMode::Off) {
    c->disabled_reason_ = "LAYERJIT_CACHE=off";
    return c;  // asked for: no warning
  }
  if (c->options_.root) {
    c->root_path_ = *c->options_.root;
  } else if (auto choice = default_cache_root()) {
    c->root_path_ = choice->path;
  } else {
    c->disabled_reason_ = "no cache directory: set LAYERJIT_CACHE_DIR, XDG_CACHE_HOME or HOME";
  }
  if (c->disabled_reason_.empty()) {
    std::string refusal;
    c->root_ = open_cache_root(c->root_path_, refusal);
    if (c->root_ && open_private_subdir(c->root_->version_fd.get(), "kernels", c->kernels_fd_, refusal,
                                        c->root_->version_dir / "kernels") != 0)
      c->root_.reset();
    if (!c->root_) c->disabled_reason_ = refusal;
  }
  if (!c->enabled() && first_report("disabled:" + c->root_path_.string()))
    c->warn(fmt::format("kernel cache disabled: {} (kernels will be compiled every run)", c->disabled_reason_));
  return c;
}

int DiskCache::open_shard(const CacheKey& key, bool create, UniqueFd& out) {
  std::string name = shard_name(key);
  if (create) {
    if (int err = make_dir_at(kernels_fd_.get(), name); err != 0) return err;
  }
  if (int err = open_dir_at(kernels_fd_.get(), name, out); err != 0) return err;
  std::string problem = check_private_dir(out.get(), root_->version_dir / "kernels" / name);
  if (!problem.empty()) {
    if (first_report("shard:" + problem)) warn(fmt::format("ignoring cache directory: {}", problem));
    out.reset();
    return EPERM;
  }
  return 0;
}

int DiskCache::acquire(int shard_fd, const CacheKey& key, int lock_op, Acquired& out) {
  std::string name = manifest_name(key);
  for (int attempt = 0; attempt < kAcquireAttempts; ++attempt) {
    UniqueFd fd;
    if (int err = open_file_at(shard_fd, name, fd); err != 0) return err;
    FlockGuard lock(fd.get(), lock_op);
    if (!lock.locked()) return errno;
    // Between open and flock the manifest may have been replaced or removed: retry on the new one.
    if (!still_current(shard_fd, fd.get(), name)) continue;
    out.fd = std::move(fd);
    out.lock = std::move(lock);
    return 0;
  }
  return EAGAIN;
}

void DiskCache::remove_corrupt(int shard_fd, const Acquired& a, const CacheKey& key, const std::string& why) {
  if (options_.mode != CacheMode::ReadWrite) {  // readonly: a miss, left for a writable run to remove
    if (first_report(fmt::format("corrupt:{}:{}", root_path_.string(), key.hex())))
      warn(fmt::format("kernel cache entry {} is corrupt ({}); left in place (LAYERJIT_CACHE=readonly), the kernel "
                       "will be recompiled", key.hex(), why));
    return;
  }
  std::string name = manifest_name(key);
  std::string text;
  std::string ignored;
  std::optional<Manifest> m;
  if (read_all(a.fd.get(), text, kManifestLimit) == 0) m = manifest_from_json(text, ignored);
  int err = 0;
  {
    FlockGuard dir_lock(shard_fd, LOCK_EX);
    if (!still_current(shard_fd, a.fd.get(), name)) return;  // already replaced by a writer: not ours to remove
    err = remove_at(shard_fd, name);  // a directory in the manifest's place too
  }
  // Payload names were validated by the parser (they belong to this key), so removing them cannot
  // touch anything else; unreadable manifests leave their payloads to the orphan sweep. The
  // payload a load found corrupt may be a directory: removed whole, like the manifest.
  if (m && m->key == key) {
    remove_at(shard_fd, m->cubin.file);
    remove_at(shard_fd, m->source.file);
  }
  if (!first_report(fmt::format("corrupt:{}:{}", root_path_.string(), key.hex()))) return;
  if (err == 0)
    warn(fmt::format("kernel cache entry {} is corrupt ({}); removed it, the kernel will be recompiled", key.hex(), why));
  else
    warn(fmt::format("kernel cache entry {} is corrupt ({}) and could not be removed ({}): remove {} by hand; the "
                     "kernel is recompiled and not cached until then", key.hex(), why, errno_text(err),
                     (root_->version_dir / "kernels" / key.hex().substr(0, 2) / name).string()));
}

LoadResult DiskCache::load(const CacheKey& key, bool touch) {
  if (!enabled()) return {LoadStatus::kDisabled, nullptr, disabled_reason_};
  UniqueFd shard;
  if (open_shard(key, false, shard) != 0) return {LoadStatus::kMiss, nullptr, ""};
  for (int attempt = 0; attempt < kAcquireAttempts; ++attempt) {
    Acquired a;
    int err = acquire(shard.get(), key, LOCK_SH, a);
    if (err == ENOENT) return {LoadStatus::kMiss, nullptr, ""};
    if (err != 0) return {LoadStatus::kMiss, nullptr, fmt::format("cannot open manifest: {}", errno_text(err))};
    auto corrupt = [&](const std::string& why) {
      remove_corrupt(shard.get(), a, key, why);
      return LoadResult{LoadStatus::kCorrupt, nullptr, why};
    };
    struct stat st {};
    if (::fstat(a.fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      return corrupt("manifest is not a regular file owned by this user");
    std::string text, error;
    if (int rerr = read_all(a.fd.get(), text, kManifestLimit); rerr != 0)
      return corrupt(fmt::format("cannot read manifest: {}", errno_text(rerr)));
    std::optional<Manifest> m = manifest_from_json(text, error);
    if (!m) return corrupt("malformed manifest: " + error);
    if (m->format_version != kCacheFormatVersion)
      return corrupt(fmt::format("manifest format {} in a v{} directory", m->format_version, kCacheFormatVersion));
    if (m->key != key) return corrupt(fmt::format("manifest describes key {}", m->key.hex()));

    auto entry = std::make_shared<CacheEntry>();
    bool replaced = false;
    std::string problem;
    auto read_payload = [&](const PayloadRef& ref, std::string& out) {
      UniqueFd fd;
      int perr = open_file_at(shard.get(), ref.file, fd);
      if (perr == ENOENT && !still_current(shard.get(), a.fd.get(), manifest_name(key))) {
        replaced = true;  // a writer replaced the entry and removed the old payloads: read the new one
        return false;
      }
      if (perr != 0) {
        problem = fmt::format("cannot open {}: {}", ref.file, errno_text(perr));
        return false;
      }
      // Limit one past the expected size: a longer file reads as EFBIG instead of being slurped.
      perr = read_all(fd.get(), out, ref.bytes + 1);
      if (perr == EFBIG || (perr == 0 && out.size() > ref.bytes)) {
        problem = fmt::format("{} is larger than the {} bytes recorded", ref.file, ref.bytes);
        return false;
      }
      if (perr != 0) {
        problem = fmt::format("cannot read {}: {}", ref.file, errno_text(perr));
        return false;
      }
      if (out.size() < ref.bytes) {
        problem = fmt::format("{} is truncated: {} of {} bytes", ref.file, out.size(), ref.bytes);
        return false;
      }
      if (checksum(out) != ref.checksum) {
        problem = fmt::format("{} fails its checksum", ref.file);
        return false;
      }
      return true;
    };
    if (!read_payload(m->cubin, entry->cubin) || !read_payload(m->source, entry->source)) {
      if (replaced) continue;
      return corrupt(problem);
    }
    // The manifest's own components must hash to the key it is filed under: this catches an entry
    // copied or renamed to another key, which the payload checksums alone would not.
    if (compute_key(m->components(entry->source)) != key)
      return corrupt("its key components (source, options, arch, versions) do not hash to its key");
    if (touch && options_.mode == CacheMode::ReadWrite) {
      // The last-used stamp is the manifest's mtime (atime is unreliable under relatime/noatime).
      const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
      ::futimens(a.fd.get(), times);
    }
    entry->manifest = std::move(*m);
    return {LoadStatus::kHit, std::move(entry), ""};
  }
  return {LoadStatus::kMiss, nullptr, "entry kept changing while being read"};
}

StoreResult DiskCache::store(const KeyComponents& components, std::string_view cubin, const KernelInfo& info) {
  StoreResult r;
  r.key = compute_key(components);
  if (!enabled()) {
    r.error = "kernel cache disabled: " + disabled_reason_;
    return r;
  }
  if (options_.mode == CacheMode::ReadOnly) {
    r.error = "LAYERJIT_CACHE=readonly";
    return r;
  }
  UniqueFd shard;
  if (int err = open_shard(r.key, true, shard); err != 0) {
    r.error = fmt::format("cannot open the cache shard for {}: {}", r.key.hex(), errno_text(err));
    return r;
  }
  auto entry = std::make_shared<CacheEntry>();
  Manifest& m = entry->manifest;
  m.key = r.key;
  m.info = info;
  m.options = components.options;
  m.arch = components.arch;
  m.nvrtc_version = components.nvrtc_version;
  m.device_headers_hash = components.device_headers_hash;
  m.env = components.env;
  m.format_version = components.format_version;
  m.layerjit_version = std::string(layerjit_version());
  m.created_unix = now_unix();
  // A compute_XY entry's image is PTX text (a PTX-only compile, or a kernel's PTX beside its cubin).
  const bool ptx = components.arch.rfind("compute_", 0) == 0;
  m.cubin = {payload_name(r.key, ptx ? ".ptx" : ".cubin"), cubin.size(), checksum(cubin)};
  m.source = {payload_name(r.key, ".cu"), components.source.size(), checksum(components.source)};

  const int sfd = shard.get();
  std::vector<std::string> written;  // removed again if publishing fails
  auto fail = [&](std::string what, int err) {
    for (const std::string& n : written) ::unlinkat(sfd, n.c_str(), 0);
    r.error = fmt::format("cannot store kernel {} in the cache: {}: {}", r.key.hex(), what, errno_text(err));
    return r;
  };
  auto place = [&](std::string_view data, const std::string& final_name) {
    std::string tmp;
    if (int err = write_temp_file(sfd, data, options_.durable, tmp); err != 0) return err;
    if (::renameat(sfd, tmp.c_str(), sfd, final_name.c_str()) != 0) {
      int err = errno;
      ::unlinkat(sfd, tmp.c_str(), 0);
      return err;
    }
    written.push_back(final_name);
    return 0;
  };
  if (int err = place(cubin, m.cubin.file); err != 0) return fail("writing the cubin", err);
  if (int err = place(components.source, m.source.file); err != 0) return fail("writing the source", err);
  // The payload renames must be durable before the manifest that names them can be.
  if (options_.durable) {
    if (int err = sync_fd(sfd); err != 0) return fail("syncing the directory", err);
  }
  std::string manifest_tmp;
  if (int err = write_temp_file(sfd, manifest_to_json(m), options_.durable, manifest_tmp); err != 0)
    return fail("writing the manifest", err);

  std::string name = manifest_name(r.key);
  std::optional<Manifest> previous;
  {
    FlockGuard dir_lock(sfd, LOCK_EX);
    UniqueFd old;
    std::string text, ignored;
    if (open_file_at(sfd, name, old) == 0 && read_all(old.get(), text, kManifestLimit) == 0)
      previous = manifest_from_json(text, ignored);
    if (::renameat(sfd, manifest_tmp.c_str(), sfd, name.c_str()) != 0) {
      int err = errno;
      ::unlinkat(sfd, manifest_tmp.c_str(), 0);
      return fail("publishing the manifest", err);
    }
  }
  if (options_.durable) sync_fd(sfd);
  // The replaced entry's payloads are unreachable now; a reader still reading them sees them vanish,
  // finds its manifest replaced and retries on the new entry.
  if (previous && previous->key == r.key) {
    ::unlinkat(sfd, previous->cubin.file.c_str(), 0);
    ::unlinkat(sfd, previous->source.file.c_str(), 0);
  }
  entry->cubin = std::string(cubin);
  entry->source = components.source;
  after_store(cubin.size() + components.source.size() + file_size_at(sfd, name));
  r.ok = true;
  r.entry = std::move(entry);
  return r;
}

std::optional<Manifest> DiskCache::peek_manifest(const CacheKey& key) {
  if (!enabled()) return std::nullopt;
  UniqueFd shard, fd;
  std::string text, error;
  if (open_shard(key, false, shard) != 0 || open_file_at(shard.get(), manifest_name(key), fd) != 0 ||
      read_all(fd.get(), text, kManifestLimit) != 0)
    return std::nullopt;
  auto m = manifest_from_json(text, error);
  return m && m->key == key ? m : std::nullopt;
}

std::optional<EntryHold> DiskCache::hold(const CacheKey& key) {
  if (!enabled()) return std::nullopt;
  UniqueFd shard;
  if (open_shard(key, false, shard) != 0) return std::nullopt;
  Acquired a;
  if (acquire(shard.get(), key, LOCK_SH, a) != 0) return std::nullopt;
  return EntryHold(std::move(a.fd), std::move(a.lock));
}

bool DiskCache::try_evict(const CacheKey& key, uint64_t& freed) {
  UniqueFd shard;
  if (open_shard(key, false, shard) != 0) return false;
  Acquired a;
  // Non-blocking: a shared holder means the entry is being read or held, and it stays.
  if (acquire(shard.get(), key, LOCK_EX | LOCK_NB, a) != 0) return false;
  std::string name = manifest_name(key);
  std::string text, ignored;
  std::optional<Manifest> m;
  if (read_all(a.fd.get(), text, kManifestLimit) == 0) m = manifest_from_json(text, ignored);
  const int sfd = shard.get();
  {
    FlockGuard dir_lock(sfd, LOCK_EX);
    if (!still_current(sfd, a.fd.get(), name)) return false;
    uint64_t bytes = file_size_at(sfd, name);
    if (remove_at(sfd, name) != 0) return false;
    freed += bytes;
  }
  if (m && m->key == key) {
    for (const std::string& f : {m->cubin.file, m->source.file}) {
      uint64_t bytes = file_size_at(sfd, f);
      if (remove_at(sfd, f) == 0) freed += bytes;
    }
  }
  return true;
}

bool DiskCache::remove(const CacheKey& key) {
  if (!enabled()) return false;
  uint64_t freed = 0;
  return try_evict(key, freed);
}

Usage DiskCache::scan() {
  Usage u;
  if (!enabled()) return u;
  for (const std::string& shard : list_dir(kernels_fd_.get())) {
    UniqueFd sfd;
    if (shard.size() != 2 || !is_hex(shard)) {
      u.other_files += 1;
      continue;
    }
    if (open_dir_at(kernels_fd_.get(), shard, sfd) != 0) {  // O_NOFOLLOW: a symlink fails here
      u.refused_shards.push_back(shard);
      continue;
    }
    struct Seen {
      bool manifest = false;
      uint64_t bytes = 0;
      int64_t mtime = 0;
      std::vector<LooseFile> payloads;
    };
    std::map<std::string, Seen> keys;
    for (const std::string& name : list_dir(sfd.get())) {
      struct stat st {};
      if (::fstatat(sfd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // removed meanwhile
      auto bytes = static_cast<uint64_t>(st.st_size);
      LooseFile lf{shard, name, bytes, static_cast<int64_t>(st.st_mtime), false};
      if (name.rfind(kTempPrefix, 0) == 0) {
        lf.temp = true;
        u.temp_files += 1;
        u.temp_bytes += bytes;
        u.loose.push_back(lf);
        continue;
      }
      std::string key_hex = name.substr(0, 32);
      bool ours = name.size() > 32 && is_hex(key_hex) && key_hex.substr(0, 2) == shard;
      if (ours && name.substr(32) == ".json") {
        Seen& s = keys[key_hex];
        s.manifest = true;
        s.bytes += bytes;
        s.mtime = static_cast<int64_t>(st.st_mtime);
      } else if (ours && name[32] == '-') {
        keys[key_hex].payloads.push_back(lf);
      } else {
        u.other_files += 1;
        u.other_bytes += bytes;
      }
    }
    for (auto& [hex, s] : keys) {
      if (s.manifest) {
        for (const LooseFile& p : s.payloads) s.bytes += p.bytes;
        u.entries.push_back({*CacheKey::from_hex(hex), s.bytes, s.mtime});
        u.entry_bytes += s.bytes;
      } else {
        for (const LooseFile& p : s.payloads) {
          u.orphan_files += 1;
          u.orphan_bytes += p.bytes;
          u.loose.push_back(p);
        }
      }
    }
  }
  std::sort(u.entries.begin(), u.entries.end(), [](const EntryStat& a, const EntryStat& b) {
    return a.last_used_unix != b.last_used_unix ? a.last_used_unix < b.last_used_unix : a.key < b.key;
  });
  return u;
}

uint64_t DiskCache::remove_refused_shards(Usage& usage) {
  if (options_.mode != CacheMode::ReadWrite) return 0;
  uint64_t removed = 0;
  std::vector<std::string> kept;
  for (const std::string& shard : usage.refused_shards) {
    // unlinkat never follows a symlink: the link goes, whatever it points at stays.
    if (::unlinkat(kernels_fd_.get(), shard.c_str(), 0) == 0) removed += 1;
    else kept.push_back(shard);
  }
  usage.refused_shards = std::move(kept);
  return removed;
}

uint64_t DiskCache::remove_stale_files(Usage& usage, bool everything_dead) {
  uint64_t removed = 0;
  int64_t now = now_unix();
  int64_t grace = everything_dead ? 0 : options_.dead_writer_grace_seconds;
  std::vector<LooseFile> kept;
  for (LooseFile& f : usage.loose) {
    // Clamped: a file written this second can carry an mtime a second ahead of time() (the two
    // clocks round differently), and a negative age would keep it past a zero grace.
    int64_t age = std::max<int64_t>(0, now - f.mtime_unix);
    // Temp files are ".tmp-<pid>-<token>", payloads "<key>-<pid>-<token>.<ext>".
    std::optional<pid_t> pid = writer_pid_of(f.name, f.temp ? std::string(kTempPrefix) : f.name.substr(0, 33));
    // A live writer's file may be about to be renamed into place: only age makes it abandoned.
    bool writer_gone = !pid || process_is_gone(*pid);
    bool stale = age >= options_.abandoned_seconds || (writer_gone && age >= grace);
    UniqueFd sfd;
    if (stale && open_dir_at(kernels_fd_.get(), f.shard, sfd) == 0 && ::unlinkat(sfd.get(), f.name.c_str(), 0) == 0) {
      removed += 1;
      (f.temp ? usage.temp_files : usage.orphan_files) -= 1;
      (f.temp ? usage.temp_bytes : usage.orphan_bytes) -= f.bytes;
    } else {
      kept.push_back(std::move(f));
    }
  }
  usage.loose = std::move(kept);
  return removed;
}

EvictReport DiskCache::evict_to(uint64_t target_bytes) {
  if (!enabled()) return {};
  std::lock_guard<std::mutex> lock(evict_mutex_);
  return evict_locked(target_bytes);
}

EvictReport DiskCache::evict_locked(uint64_t target_bytes) {
  EvictReport r;
  Usage u = scan();
  remove_stale_files(u, false);
  uint64_t total = u.total_bytes();
  for (const EntryStat& e : u.entries) {
    if (total <= target_bytes) break;
    uint64_t freed = 0;
    if (try_evict(e.key, freed)) {
      r.evicted += 1;
      r.bytes_freed += freed;
      total -= std::min(total, freed);
    } else {
      r.skipped_in_use += 1;
    }
  }
  r.bytes_after = total;
  scanned_ = true;
  last_scan_ = std::chrono::steady_clock::now();
  bytes_at_scan_ = total;
  written_since_scan_ = 0;
  return r;
}

void DiskCache::after_store(uint64_t bytes_written) {
  std::lock_guard<std::mutex> lock(evict_mutex_);
  written_since_scan_ += bytes_written;
  double high = kHighWater * static_cast<double>(options_.max_bytes);
  bool stale_estimate = !scanned_ || std::chrono::steady_clock::now() - last_scan_ > kRescanAfter;
  if (!stale_estimate && static_cast<double>(bytes_at_scan_ + written_since_scan_) <= high) return;
  // The estimate says "maybe over": a scan (which also sweeps stale files) gives the real size, and
  // only a real excess evicts.
  EvictReport probe = evict_locked(UINT64_MAX);
  if (static_cast<double>(probe.bytes_after) > high)
    evict_locked(static_cast<uint64_t>(kLowWater * static_cast<double>(options_.max_bytes)));
}

PruneReport DiskCache::prune(bool verify) {
  PruneReport r;
  if (!enabled()) return r;
  {
    std::lock_guard<std::mutex> lock(evict_mutex_);
    Usage u = scan();
    r.refused_shards_removed = remove_refused_shards(u);
    uint64_t before = u.temp_bytes + u.orphan_bytes;
    r.stale_files_removed = remove_stale_files(u, false);
    r.stale_bytes = before - (u.temp_bytes + u.orphan_bytes);
    if (verify) {
      for (const EntryStat& e : u.entries) {
        LoadResult l = load(e.key, /*touch=*/false);
        r.verified += 1;
        if (l.status == LoadStatus::kCorrupt) r.corrupt_removed += 1;
      }
    }
  }
  r.eviction = evict_to(options_.max_bytes);
  return r;
}

EvictReport DiskCache::clear() {
  EvictReport r;
  if (!enabled()) return r;
  std::lock_guard<std::mutex> lock(evict_mutex_);
  Usage u = scan();
  r.refused_shards_removed = remove_refused_shards(u);
  uint64_t loose_before = u.temp_bytes + u.orphan_bytes;
  remove_stale_files(u, true);
  r.bytes_freed = loose_before - (u.temp_bytes + u.orphan_bytes);
  for (const EntryStat& e : u.entries) {
    uint64_t freed = 0;
    if (try_evict(e.key, freed)) {
      r.evicted += 1;
      r.bytes_freed += freed;
    } else {
      r.skipped_in_use += 1;
    }
  }
  Usage after = scan();
  r.bytes_after = after.total_bytes();
  scanned_ = true;
  bytes_at_scan_ = r.bytes_after;
  written_since_scan_ = 0;
  return r;
}

}  // namespace lj::cache
