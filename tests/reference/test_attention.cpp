// attention against a naive formula written here: for query t of sequence b at position P(b, t), a
// key j is visible iff j < valid(b) and (not causal or j <= P(b, t)); the output is
// sum_j softmax_j(scale * q . k_j) v_j over visible keys, with query head h reading KV head
// h / (Hq / Hkv). Covers MHA, GQA (ratio 2), MQA, prefill-style (queries are the last T keys),
// cache_pos with garbage beyond the valid length, custom scale, and bf16 rounding; with lse = true the
// second result against log(sum_j exp(scale * q . k_j)) over the same keys (-inf where none is visible).
#include <cmath>
#include <limits>
#include <optional>

#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;
using test::tensor;

struct Layout {
  int64_t batch, t_len, hq, s_len, hkv, d;
};

// first_pos[b]: position of query 0; valid[b]: keys [0, valid) exist. `lse`, when given, receives
// each row's log-sum-exp.
std::vector<double> naive_attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, const Layout& l,
                                    bool causal, double scale, const std::vector<int64_t>& first_pos,
                                    const std::vector<int64_t>& valid, std::vector<double>* lse = nullptr,
                                    std::optional<int64_t> window = std::nullopt) {
  std::vector<double> out(static_cast<size_t>(l.batch * l.t_len * l.hq * l.d), 0.0);
  if (lse) lse->assign(static_cast<size_t>(l.batch * l.t_len * l.hq), -std::numeric_limits<double>::infinity());
  const int64_t ratio = l.hq / l.hkv;
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t t = 0; t < l.t_len; ++t)
      for (int64_t h = 0; h < l.hq; ++h) {
        const int64_t p = first_pos[static_cast<size_t>(b)] + t;
        std::vector<double> score(static_cast<size_t>(l.s_len), -std::numeric_limits<double>::infinity());
        for (int64_t j = 0; j < l.s_len; ++j) {
          const bool visible = j < valid[static_cast<size_t>(b)] && (!causal || j <= p) && (!window || p - j < *window);
          if (!visible) continue;
          long double dot = 0;
          for (int64_t i = 0; i < l.d; ++i)
            dot += static_cast<long double>(q.data[static_cast<size_t>(((b * l.t_len + t) * l.hq + h) * l.d + i)]) *
                   k.data[static_cast<size_t>(((b * l.s_len + j) * l.hkv + h / ratio) * l.d + i)];
          score[static_cast<size_t>(j)] = scale * static_cast<double>(dot);
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (double s : score) mx = std::max(mx, s);
        if (std::isinf(mx)) continue;  // no visible key: zeros, and the lse stays -inf
        double denom = 0;
        for (double s : score) denom += std::exp(s - mx);
        if (lse) (*lse)[static_cast<size_t>((b * l.t_len + t) * l.hq + h)] = mx + std::log(denom);
        for (int64_t j = 0; j < l.s_len; ++j) {
          const double w = std::exp(score[static_cast<size_t>(j)] - mx) / denom;
          for (int64_t i = 0; i < l.d; ++i)
            out[static_cast<size_t>(((b * l.t_len + t) * l.hq + h) * l.d + i)] +=
                w * v.data[static_cast<size_t>(((b * l.s_len + j) * l.hkv + h / ratio) * l.d + i)];
        }
      }
  return out;
}

void check_f32(const HostTensor& y, const std::vector<double>& want) {
  REQUIRE(y.data.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(y.data[i] == Approx(want[i]).epsilon(1e-6).margin(1e-6));
}

TEST_CASE("attention non-causal MHA (ratio 1) attends to every key", "[attention]") {
  const Layout l{1, 4, 3, 6, 3, 7};
  HostTensor q = random_tensor(DType::F32, {4, 3, 7}, 51);
  HostTensor k = random_tensor(DType::F32, {6, 3, 7}, 52);
  HostTensor v = random_tensor(DType::F32, {6, 3, 7}, 53);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", false}}));
  check_f32(y, naive_attention(q, k, v, l, false, 1 / std::sqrt(7.0), {2}, {6}));
}

TEST_CASE("attention causal GQA (ratio 2), T = S", "[attention]") {
  const Layout l{1, 6, 4, 6, 2, 7};
  HostTensor q = random_tensor(DType::F32, {6, 4, 7}, 54, -2.0, 2.0);
  HostTensor k = random_tensor(DType::F32, {6, 2, 7}, 55, -2.0, 2.0);
  HostTensor v = random_tensor(DType::F32, {6, 2, 7}, 56);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}}));
  check_f32(y, naive_attention(q, k, v, l, true, 1 / std::sqrt(7.0), {0}, {6}));
  // The first query sees only key 0: its output is v[0] of its KV head.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 7; ++i)
      CHECK(y.data[static_cast<size_t>(h * 7 + i)] == v.data[static_cast<size_t>((h / 2) * 7 + i)]);
}

TEST_CASE("attention causal MQA: the T queries are the last T of S keys", "[attention]") {
  const Layout l{1, 3, 3, 7, 1, 5};
  HostTensor q = random_tensor(DType::F32, {3, 3, 5}, 57, -2.0, 2.0);
  HostTensor k = random_tensor(DType::F32, {7, 1, 5}, 58, -2.0, 2.0);
  HostTensor v = random_tensor(DType::F32, {7, 1, 5}, 59);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}}));
  check_f32(y, naive_attention(q, k, v, l, true, 1 / std::sqrt(5.0), {4}, {7}));
}

/// A sliding window of W: each query sees its own and the W - 1 previous positions, in the
/// prefill form and over a cache at different positions per sequence.
TEST_CASE("attention with a sliding window sees only the last W positions", "[attention]") {
  const Layout l{1, 7, 4, 7, 2, 5};
  HostTensor q = random_tensor(DType::F32, {7, 4, 5}, 80, -2.0, 2.0);
  HostTensor k = random_tensor(DType::F32, {7, 2, 5}, 81, -2.0, 2.0);
  HostTensor v = random_tensor(DType::F32, {7, 2, 5}, 82);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}, {"window", int64_t{3}}}));
  check_f32(y, naive_attention(q, k, v, l, true, 1 / std::sqrt(5.0), {0}, {7}, nullptr, 3));
  // A window as long as the sequence changes nothing.
  CHECK(run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}, {"window", int64_t{7}}})).data ==
        run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}})).data);
  const Layout c{2, 1, 4, 9, 2, 5};
  HostTensor qd = random_tensor(DType::F32, {2, 1, 4, 5}, 83, -2.0, 2.0);
  HostTensor kd = random_tensor(DType::F32, {2, 9, 2, 5}, 84, -2.0, 2.0);
  HostTensor vd = random_tensor(DType::F32, {2, 9, 2, 5}, 85);
  HostTensor pos = tensor(DType::I32, {2}, {8, 2});
  HostTensor yd = run1(OpKind::Attention, {&qd, &kd, &vd, &pos}, attrs({{"causal", true}, {"window", int64_t{4}}}));
  check_f32(yd, naive_attention(qd, kd, vd, c, true, 1 / std::sqrt(5.0), {8, 2}, {9, 3}, nullptr, 4));
}

TEST_CASE("attention batched GQA with cache_pos masks the stale cache", "[attention]") {
  const Layout l{2, 3, 4, 9, 2, 5};
  HostTensor q = random_tensor(DType::F32, {2, 3, 4, 5}, 60, -2.0, 2.0);
  HostTensor k = random_tensor(DType::F32, {2, 9, 2, 5}, 61, -2.0, 2.0);
  HostTensor v = random_tensor(DType::F32, {2, 9, 2, 5}, 62);
  HostTensor pos = tensor(DType::I32, {2}, {2, 5});  // valid keys: [0, 5) and [0, 8)
  for (bool causal : {true, false}) {
    INFO("causal " << causal);
    HostTensor y = run1(OpKind::Attention, {&q, &k, &v, &pos}, attrs({{"causal", causal}}));
    check_f32(y, naive_attention(q, k, v, l, causal, 1 / std::sqrt(5.0), {2, 5}, {5, 8}));
    // Garbage past the valid length must not matter: make it huge and compare bit for bit.
    HostTensor k2 = k;
    HostTensor v2 = v;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = (b == 0 ? 5 : 8); j < 9; ++j)
        for (int64_t i = 0; i < 10; ++i) {
          k2.data[static_cast<size_t>((b * 9 + j) * 10 + i)] = 300.0;
          v2.data[static_cast<size_t>((b * 9 + j) * 10 + i)] = -1e6;
        }
    CHECK(run1(OpKind::Attention, {&q, &k2, &v2, &pos}, attrs({{"causal", causal}})).data == y.data);
  }
}

TEST_CASE("attention {lse = true} also returns each row's log-sum-exp", "[attention]") {
  const Layout l{2, 3, 4, 9, 2, 5};
  HostTensor q = random_tensor(DType::BF16, {2, 3, 4, 5}, 90, -2.0, 2.0);
  HostTensor k = random_tensor(DType::BF16, {2, 9, 2, 5}, 91, -2.0, 2.0);
  HostTensor v = random_tensor(DType::BF16, {2, 9, 2, 5}, 92);
  HostTensor pos = tensor(DType::I32, {2}, {2, 5});
  for (bool causal : {true, false}) {
    INFO("causal " << causal);
    const std::vector<HostTensor> r = test::run_op(OpKind::Attention, {&q, &k, &v, &pos}, attrs({{"causal", causal}, {"lse", true}}));
    REQUIRE(r.size() == 2);
    CHECK(r[0].data == run1(OpKind::Attention, {&q, &k, &v, &pos}, attrs({{"causal", causal}})).data);  // the output is unchanged
    CHECK(r[1].dtype == DType::F32);
    CHECK(r[1].shape == std::vector<int64_t>{2, 3, 4});
    std::vector<double> want;
    (void)naive_attention(q, k, v, l, causal, 1 / std::sqrt(5.0), {2, 5}, {5, 8}, &want);
    check_f32(r[1], want);
  }
}

TEST_CASE("attention {lse = true}: a row that sees no key has lse -inf and a zero output", "[attention]") {
  // Causal with 4 queries over 2 keys and no cache_pos: the queries sit at positions -2 .. 1, so the
  // first two see nothing.
  const Layout l{1, 4, 2, 2, 1, 3};
  HostTensor q = random_tensor(DType::F32, {4, 2, 3}, 93);
  HostTensor k = random_tensor(DType::F32, {2, 1, 3}, 94);
  HostTensor v = random_tensor(DType::F32, {2, 1, 3}, 95);
  const std::vector<HostTensor> r = test::run_op(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}, {"lse", true}}));
  REQUIRE(r.size() == 2);
  std::vector<double> want;
  check_f32(r[0], naive_attention(q, k, v, l, true, 1 / std::sqrt(3.0), {-2}, {2}, &want));
  for (size_t i = 0; i < 4; ++i) CHECK(r[1].data[i] == -std::numeric_limits<double>::infinity());
  for (size_t i = 4; i < 8; ++i) CHECK(r[1].data[i] == Approx(want[i]).epsilon(1e-6));
  for (size_t i = 0; i < 4 * 3; ++i) CHECK(r[0].data[i] == 0.0);
}

TEST_CASE("attention unbatched with cache_pos [1]", "[attention]") {
  const Layout l{1, 2, 2, 8, 1, 6};
  HostTensor q = random_tensor(DType::F32, {2, 2, 6}, 63);
  HostTensor k = random_tensor(DType::F32, {8, 1, 6}, 64);
  HostTensor v = random_tensor(DType::F32, {8, 1, 6}, 65);
  HostTensor pos = tensor(DType::I32, {1}, {3});
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v, &pos}, attrs({{"causal", true}}));
  check_f32(y, naive_attention(q, k, v, l, true, 1 / std::sqrt(6.0), {3}, {5}));
}

TEST_CASE("attention with cache_pos beyond the cache is an error naming the sequence", "[attention]") {
  HostTensor q = random_tensor(DType::F32, {2, 2, 2, 4}, 66);
  HostTensor k = random_tensor(DType::F32, {2, 5, 2, 4}, 67);
  HostTensor pos = tensor(DType::I32, {2}, {1, 4});  // sequence 1: positions 4 and 5 in a cache of 5
  CHECK_THROWS_WITH(run1(OpKind::Attention, {&q, &k, &k, &pos}, attrs({{"causal", true}})),
                    Catch::Contains("sequence 1") && Catch::Contains("cache_pos 4"));
  HostTensor neg = tensor(DType::I32, {2}, {-1, 0});
  CHECK_THROWS_WITH(run1(OpKind::Attention, {&q, &k, &k, &neg}), Catch::Contains("sequence 0"));
}

TEST_CASE("attention with a custom scale", "[attention]") {
  const Layout l{1, 3, 2, 4, 2, 3};
  HostTensor q = random_tensor(DType::F32, {3, 2, 3}, 68);
  HostTensor k = random_tensor(DType::F32, {4, 2, 3}, 69);
  HostTensor v = random_tensor(DType::F32, {4, 2, 3}, 70);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}, {"scale", 2.5}}));
  check_f32(y, naive_attention(q, k, v, l, true, 2.5, {1}, {4}));
}

TEST_CASE("attention over two keys with equal scores averages their values", "[attention]") {
  HostTensor q = tensor(DType::F32, {1, 1, 2}, {1.0, -1.0});
  HostTensor k = tensor(DType::F32, {2, 1, 2}, {3.0, 1.0, 4.0, 2.0});  // both dot products are 2
  HostTensor v = tensor(DType::F32, {2, 1, 2}, {1.0, 10.0, 3.0, -6.0});
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v});
  CHECK(y.data == std::vector<double>{2.0, 2.0});
}

TEST_CASE("attention in bf16 rounds the exact result once", "[attention]") {
  const Layout l{1, 5, 4, 5, 2, 9};
  HostTensor q = random_tensor(DType::BF16, {5, 4, 9}, 71, -2.0, 2.0);
  HostTensor k = random_tensor(DType::BF16, {5, 2, 9}, 72, -2.0, 2.0);
  HostTensor v = random_tensor(DType::BF16, {5, 2, 9}, 73);
  HostTensor y = run1(OpKind::Attention, {&q, &k, &v}, attrs({{"causal", true}}));
  REQUIRE(y.dtype == DType::BF16);
  const auto want = naive_attention(q, k, v, l, true, 1 / std::sqrt(9.0), {0}, {5});
  for (size_t i = 0; i < want.size(); ++i) CHECK(test::within_rounding(y.data[i], want[i], 7, 1e-12));
}

// A paged cache holding the same keys as a contiguous one: sequence b's page i is pool page
// table[b][i] (pages shuffled and interleaved across sequences, spare pages full of garbage).
TEST_CASE("paged attention equals attention over the contiguous cache it pages", "[attention]") {
  const int64_t batch = 2, page = 3, pages = 3, hkv = 2, d = 4, s_len = page * pages;
  HostTensor q = random_tensor(DType::F32, {batch, 2, 4, d}, 70, -2.0, 2.0);
  HostTensor k = random_tensor(DType::F32, {batch, s_len, hkv, d}, 71, -2.0, 2.0);
  HostTensor v = random_tensor(DType::F32, {batch, s_len, hkv, d}, 72);
  const std::vector<int64_t> table = {5, 0, 3, 1, 6, 2};  // [2, 3]; pool pages 4 and 7 unused
  HostTensor bt = tensor(DType::I32, {batch, pages}, {5, 0, 3, 1, 6, 2});
  HostTensor kp = random_tensor(DType::F32, {8, page, hkv, d}, 73, 100.0, 200.0);  // garbage where unused
  HostTensor vp = random_tensor(DType::F32, {8, page, hkv, d}, 74, 100.0, 200.0);
  const int64_t row = hkv * d;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < s_len; ++j)
      for (int64_t i = 0; i < row; ++i) {
        const int64_t pg = table[static_cast<size_t>(b * pages + j / page)];
        kp.data[static_cast<size_t>((pg * page + j % page) * row + i)] = k.data[static_cast<size_t>((b * s_len + j) * row + i)];
        vp.data[static_cast<size_t>((pg * page + j % page) * row + i)] = v.data[static_cast<size_t>((b * s_len + j) * row + i)];
      }
  HostTensor pos = tensor(DType::I32, {batch}, {3, 7});  // 5 and 9 valid keys
  for (bool causal : {true, false}) {
    INFO("causal " << causal);
    const auto want = test::run_op(OpKind::Attention, {&q, &k, &v, &pos}, attrs({{"causal", causal}, {"lse", true}}));
    const auto got = test::run_op(OpKind::Attention, {&q, &kp, &vp, &pos, &bt}, attrs({{"causal", causal}, {"lse", true}}));
    REQUIRE(got.size() == 2);
    CHECK(got[0].data == want[0].data);
    CHECK(got[1].data == want[1].data);
  }
  HostTensor bad = tensor(DType::I32, {batch, pages}, {5, 0, 3, 1, 8, 2});  // page 8 of an 8-page pool
  CHECK_THROWS_WITH(run1(OpKind::Attention, {&q, &kp, &vp, &pos, &bad}),
                    Catch::Contains("sequence 1: block_table[1, 1] = 8 is not a page of the 8-page pool"));
}

}  // namespace
}  // namespace lj
