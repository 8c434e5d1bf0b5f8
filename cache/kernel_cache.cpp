// Memory layer over the disk cache (see kernel_cache.h).
#include "cache/kernel_cache.h"

namespace lj::cache {

LoadResult KernelCache::get(const CacheKey& key) {
  if (auto hit = memory_.find(key)) return {LoadStatus::kHit, std::move(hit), ""};
  LoadResult r = disk_->load(key);
  if (r.status == LoadStatus::kHit) r.entry = memory_.insert(key, r.entry);
  return r;
}

StoreResult KernelCache::put(const KeyComponents& components, std::string_view cubin, const KernelInfo& info) {
  StoreResult r = disk_->store(components, cubin, info);
  std::shared_ptr<const CacheEntry> entry = r.entry;
  if (!entry) {
    // The disk refused; the memory layer still saves this process a recompile.
    auto made = std::make_shared<CacheEntry>();
    made->manifest.key = r.key;
    made->manifest.info = info;
    made->manifest.options = components.options;
    made->manifest.arch = components.arch;
    made->manifest.nvrtc_version = components.nvrtc_version;
    made->manifest.device_headers_hash = components.device_headers_hash;
    made->manifest.env = components.env;
    made->cubin = std::string(cubin);
    made->source = components.source;
    entry = std::move(made);
  }
  r.entry = memory_.insert(r.key, std::move(entry));
  return r;
}

}  // namespace lj::cache
