// The per-process layer above the disk cache: a thread-safe map from CacheKey to a shared object.
// It is a template so each stage keeps what it needs under the same key: the cache keeps loaded
// entries (MemoryLayer<const CacheEntry>), the runtime keeps loaded CUmodules
// (MemoryLayer<LoadedModule>) without the cache knowing what a module is. Objects live until the
// layer is cleared or the process ends; shared_ptr lets a caller keep one past a clear().
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "cache/key.h"

namespace lj::cache {

template <class T>
class MemoryLayer {
 public:
  /// The object under `key`, or null.
  std::shared_ptr<T> find(const CacheKey& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }

  /// Inserts `value` unless the key is taken; returns the object that is now under the key (the
  /// earlier one on a race, so every caller ends up sharing one object).
  std::shared_ptr<T> insert(const CacheKey& key, std::shared_ptr<T> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = map_.emplace(key, std::move(value));
    return it->second;
  }

  /// find(), else make() (outside the lock: it may compile or load for a long time) and insert().
  /// Two threads missing the same key at once may both run make(); one result wins and both get it.
  /// A null result from make() is returned and not stored.
  template <class Make>
  std::shared_ptr<T> get_or_make(const CacheKey& key, Make&& make) {
    if (auto found = find(key)) return found;
    std::shared_ptr<T> made = std::forward<Make>(make)();
    return made ? insert(key, std::move(made)) : nullptr;
  }

  bool erase(const CacheKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.erase(key) > 0;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.clear();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<CacheKey, std::shared_ptr<T>> map_;  // ordered: iteration never depends on addresses
};

}  // namespace lj::cache
