// The kernel cache as the compiler and runtime use it: the per-process memory layer in front of the
// disk cache. get() answers from memory, else loads (and verifies) from disk and remembers the
// entry; put() publishes to disk and remembers. A disabled disk cache still gives a working memory
// layer, so a refused cache directory costs recompiles across runs, never correctness.
#pragma once

#include <memory>
#include <string_view>

#include "cache/disk_cache.h"
#include "cache/memory_cache.h"

namespace lj::cache {

class KernelCache {
 public:
  explicit KernelCache(std::unique_ptr<DiskCache> disk) : disk_(std::move(disk)) {}
  /// The usual cache: options from the environment, default location.
  static KernelCache open_default() { return KernelCache(DiskCache::open(cache_options_from_env())); }

  /// Memory first, then disk. A disk kCorrupt or kMiss is returned as is (the caller compiles).
  LoadResult get(const CacheKey& key);
  /// Stores on disk (a failure is returned in the result) and always keeps the entry in memory.
  StoreResult put(const KeyComponents& components, std::string_view cubin, const KernelInfo& info);

  DiskCache& disk() { return *disk_; }
  MemoryLayer<const CacheEntry>& memory() { return memory_; }

 private:
  std::unique_ptr<DiskCache> disk_;
  MemoryLayer<const CacheEntry> memory_;
};

}  // namespace lj::cache
