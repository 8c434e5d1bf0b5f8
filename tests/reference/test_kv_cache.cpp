// kv_cache_write: new entries land at pos[b] (+ t), everything else is an unchanged copy, and a
// position outside the cache is an error naming the sequence and the position.
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::random_tensor;
using test::run1;
using test::tensor;

TEST_CASE("kv_cache_write of one token per sequence", "[kv_cache]") {
  HostTensor cache = random_tensor(DType::BF16, {2, 7, 3, 5}, 81);
  HostTensor entries = random_tensor(DType::BF16, {2, 3, 5}, 82, 2.0, 3.0);  // distinguishable from the cache
  HostTensor pos = tensor(DType::I32, {2}, {3, 0});
  HostTensor y = run1(OpKind::KvCacheWrite, {&cache, &entries, &pos});
  REQUIRE(y.shape == cache.shape);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 7; ++c)
      for (int64_t i = 0; i < 15; ++i) {
        const size_t at = static_cast<size_t>((b * 7 + c) * 15 + i);
        const bool written = c == (b == 0 ? 3 : 0);
        CHECK(y.data[at] == (written ? entries.data[static_cast<size_t>(b * 15 + i)] : cache.data[at]));
      }
}

TEST_CASE("kv_cache_write of several tokens per sequence", "[kv_cache]") {
  HostTensor cache = random_tensor(DType::F32, {2, 7, 2, 3}, 83);
  HostTensor entries = random_tensor(DType::F32, {2, 3, 2, 3}, 84, 5.0, 6.0);
  HostTensor pos = tensor(DType::I32, {2}, {1, 4});  // positions 1..3 and 4..6 (the last slot)
  HostTensor y = run1(OpKind::KvCacheWrite, {&cache, &entries, &pos});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 7; ++c)
      for (int64_t i = 0; i < 6; ++i) {
        const size_t at = static_cast<size_t>((b * 7 + c) * 6 + i);
        const int64_t t = c - (b == 0 ? 1 : 4);
        if (t >= 0 && t < 3)
          CHECK(y.data[at] == entries.data[static_cast<size_t>((b * 3 + t) * 6 + i)]);
        else
          CHECK(y.data[at] == cache.data[at]);
      }
}

TEST_CASE("kv_cache_write out of range names the sequence and the position", "[kv_cache]") {
  HostTensor cache = random_tensor(DType::BF16, {3, 7, 2, 4}, 85);
  HostTensor one = random_tensor(DType::BF16, {3, 2, 4}, 86);
  HostTensor at_end = tensor(DType::I32, {3}, {0, 6, 7});
  CHECK_THROWS_WITH(run1(OpKind::KvCacheWrite, {&cache, &one, &at_end}),
                    Catch::Contains("sequence 2") && Catch::Contains("position 7") && Catch::Contains("capacity 7"));
  HostTensor negative = tensor(DType::I32, {3}, {0, -1, 2});
  CHECK_THROWS_WITH(run1(OpKind::KvCacheWrite, {&cache, &one, &negative}),
                    Catch::Contains("sequence 1") && Catch::Contains("position -1"));
  HostTensor two = random_tensor(DType::BF16, {3, 2, 2, 4}, 87);
  HostTensor overflow = tensor(DType::I32, {3}, {0, 6, 1});  // sequence 1 would write 6 and 7
  CHECK_THROWS_WITH(run1(OpKind::KvCacheWrite, {&cache, &two, &overflow}),
                    Catch::Contains("sequence 1") && Catch::Contains("6..7"));
}

TEST_CASE("kv_cache_write into a paged cache lands in the block table's pages", "[kv_cache]") {
  // Two sequences, pages of 2 positions, 3 pages each, a pool of 7 pages.
  HostTensor pool = random_tensor(DType::BF16, {7, 2, 1, 3}, 85);
  HostTensor entries = random_tensor(DType::BF16, {2, 2, 1, 3}, 86, 2.0, 3.0);  // 2 tokens per sequence
  HostTensor pos = tensor(DType::I32, {2}, {1, 4});  // sequence 0: positions 1, 2; sequence 1: 4, 5
  HostTensor bt = tensor(DType::I32, {2, 3}, {6, 2, 0, 3, 5, 1});
  HostTensor y = run1(OpKind::KvCacheWrite, {&pool, &entries, &pos, &bt});
  REQUIRE(y.shape == pool.shape);
  // (sequence, token) -> (page, row): seq 0 pos 1 -> page 6 row 1, pos 2 -> page 2 row 0;
  // seq 1 pos 4 -> page 1 row 0, pos 5 -> page 1 row 1.
  const int64_t where[2][2][2] = {{{6, 1}, {2, 0}}, {{1, 0}, {1, 1}}};
  std::vector<bool> written(static_cast<size_t>(7 * 2), false);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 2; ++t) {
      const int64_t slot = where[b][t][0] * 2 + where[b][t][1];
      written[static_cast<size_t>(slot)] = true;
      for (int64_t i = 0; i < 3; ++i)
        CHECK(y.data[static_cast<size_t>(slot * 3 + i)] == entries.data[static_cast<size_t>((b * 2 + t) * 3 + i)]);
    }
  for (int64_t slot = 0; slot < 14; ++slot)
    if (!written[static_cast<size_t>(slot)])
      for (int64_t i = 0; i < 3; ++i) CHECK(y.data[static_cast<size_t>(slot * 3 + i)] == pool.data[static_cast<size_t>(slot * 3 + i)]);
  HostTensor far = tensor(DType::I32, {2}, {1, 5});  // sequence 1: positions 5, 6 of a 6-position paged cache
  CHECK_THROWS_WITH(run1(OpKind::KvCacheWrite, {&pool, &entries, &far, &bt}), Catch::Contains("sequence 1") && Catch::Contains("5..6"));
}

}  // namespace
}  // namespace lj
