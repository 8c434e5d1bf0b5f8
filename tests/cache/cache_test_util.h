// Shared helpers for the cache tests: a private mkdtemp directory per test, options that capture
// warnings, deterministic sample entries, and fork-based multi-process runs.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/disk_cache.h"

namespace lj::cache::test {

/// A fresh directory from mkdtemp, removed (whatever its modes and owners) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Warnings a cache emitted, shared with the options' sink.
using Warnings = std::shared_ptr<std::vector<std::string>>;

/// Options for a cache at `root`, warnings collected into `warnings` (when given).
CacheOptions options_at(const std::filesystem::path& root, Warnings warnings = nullptr);

/// Deterministic key components and cubin bytes for sample kernel `i`.
KeyComponents sample_components(int i);
std::string sample_cubin(int i, size_t bytes = 4096);

/// Runs `body(i)` in `n` forked children and returns their exit statuses (waitpid format). A child
/// that throws exits 99; children never run Catch2 assertions.
std::vector<int> run_children(int n, const std::function<int(int)>& body);
/// True when every status is a normal exit with code 0.
bool all_succeeded(const std::vector<int>& statuses);

/// Every regular file under `dir`, recursively.
std::vector<std::filesystem::path> files_under(const std::filesystem::path& dir);
/// Total bytes of the regular files under `dir`.
uint64_t bytes_under(const std::filesystem::path& dir);

/// The manifest path and payload paths of a published entry.
struct EntryFiles {
  std::filesystem::path manifest, cubin, source;
};
EntryFiles entry_files(const DiskCache& cache, const CacheKey& key);

/// Flips one bit of the file at `offset` (negative: from the end).
void flip_bit(const std::filesystem::path& file, long offset);

}  // namespace lj::cache::test
