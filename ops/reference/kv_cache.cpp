// Reference kv_cache_write: a copy of cache [B, C, H, D] with new[b] ([B, H, D]: one token) or
// new[b, t] ([B, T, H, D]) written at position pos[b] (+ t). A paged cache is a page pool [P, page, H,
// D] with block_table [B, pages]: position j of sequence b is row j % page of page block_table[b, j / page]. A position outside the cache is the
// caller's error, reported with the sequence and the position, never a silent out-of-bounds write.
#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

namespace lj::ref {

HostTensor kv_cache_write(const HostTensor& cache, const HostTensor& entries, const HostTensor& pos,
                          const HostTensor* block_table, const TensorType& out) {
  HostTensor y = make_result(out);
  y.data = cache.data;
  const int64_t batch = entries.shape[0];
  const int64_t page = cache.shape[1];
  const int64_t pages = block_table ? block_table->shape[1] : 1;
  const int64_t capacity = page * pages;  // positions per sequence
  const int64_t row = cache.shape[2] * cache.shape[3];  // H * D values per position
  // Where position j of sequence b lives: its own slab, or row j % page of its j / page-th pool page.
  auto slot = [&](int64_t b, int64_t j) {
    if (!block_table) return b * capacity + j;
    const int64_t p = as_index(*block_table, b * pages + j / page);
    LJ_CHECK(p >= 0 && p < cache.shape[0], SourceLoc{},
             "kv_cache_write: sequence {}: block_table[{}, {}] = {} is not a page of the {}-page pool", b, b, j / page, p,
             cache.shape[0]);
    return p * page + j % page;
  };
  const int64_t t_len = entries.shape.size() == 4 ? entries.shape[1] : 1;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t p = as_index(pos, b);
    if (t_len == 1) {
      LJ_CHECK(p >= 0 && p < capacity, SourceLoc{},
               "kv_cache_write: sequence {}: position {} is out of range for a cache of capacity {}", b, p, capacity);
    } else {
      LJ_CHECK(p >= 0 && p + t_len <= capacity, SourceLoc{},
               "kv_cache_write: sequence {}: positions {}..{} are out of range for a cache of capacity {}", b, p,
               p + t_len - 1, capacity);
    }
    for (int64_t t = 0; t < t_len; ++t) {
      const double* src = entries.data.data() + (b * t_len + t) * row;
      double* dst = y.data.data() + slot(b, p + t) * row;
      // Same dtype as the cache (checked by the shape rules), so the values need no rounding.
      for (int64_t i = 0; i < row; ++i) dst[i] = src[i];
    }
  }
  return y;
}

}  // namespace lj::ref
