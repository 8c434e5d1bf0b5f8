// The whole Llama decoder layer (LlamaConfig::small()) through run_reference: prefill and decode
// must agree on the same token, the stale part of a KV cache must not matter, a batch of sequences
// must equal the sequences run one by one, and an out-of-range position is reported.
#include <cmath>

#include "layerjit/llama.h"
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::random_tensor;
using test::tensor;

using Inputs = std::map<std::string, HostTensor>;

// Random weights scaled so activations stay O(1): a uniform [-a, a) matrix with a = sqrt(3 / fan_in)
// has variance 1 / fan_in, so each projection roughly preserves the variance of its input.
Inputs llama_weights(const LlamaConfig& c, uint64_t seed) {
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;
  auto scaled = [&](std::vector<int64_t> shape, int64_t fan_in, uint64_t s) {
    const double a = std::sqrt(3.0 / static_cast<double>(fan_in));
    return random_tensor(c.dtype, std::move(shape), s, -a, a);
  };
  Inputs w;
  w["attn_norm"] = random_tensor(c.dtype, {c.hidden}, seed + 1, 0.5, 1.5);
  w["w_qkv"] = scaled({q_width + 2 * kv_width, c.hidden}, c.hidden, seed + 2);
  w["w_o"] = scaled({c.hidden, q_width}, q_width, seed + 3);
  w["mlp_norm"] = random_tensor(c.dtype, {c.hidden}, seed + 4, 0.5, 1.5);
  w["w_gate_up"] = scaled({2 * c.ffn, c.hidden}, c.hidden, seed + 5);
  w["w_down"] = scaled({c.hidden, c.ffn}, c.ffn, seed + 6);
  return w;
}

HostTensor rows(const HostTensor& x, int64_t first, int64_t count) {
  const int64_t width = x.numel() / x.shape[0];
  std::vector<int64_t> shape = x.shape;
  shape[0] = count;
  HostTensor out(x.dtype, shape);
  std::copy(x.data.begin() + first * width, x.data.begin() + (first + count) * width, out.data.begin());
  return out;
}

HostTensor positions(std::vector<double> p) {
  const auto n = static_cast<int64_t>(p.size());
  return tensor(DType::I32, {n}, std::move(p));
}

struct PrefillResult {
  HostTensor out, k, v;
};

PrefillResult prefill(const LlamaConfig& c, const Inputs& weights, const HostTensor& x) {
  const int64_t t = x.shape[0];
  Inputs in = weights;
  in["x"] = x;
  std::vector<double> p;
  for (int64_t i = 0; i < t; ++i) p.push_back(static_cast<double>(i));
  in["pos"] = positions(p);
  Bindings b;
  b.set("T", t);
  auto r = run_reference(llama_prefill(c), in, b);
  REQUIRE(r.size() == 3);
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

struct DecodeResult {
  HostTensor out, k_cache, v_cache;
};

DecodeResult decode(const LlamaConfig& c, const Inputs& weights, const HostTensor& x, const HostTensor& pos,
                    const HostTensor& k_cache, const HostTensor& v_cache) {
  Inputs in = weights;
  in["x"] = x;
  in["pos"] = pos;
  in["k_cache"] = k_cache;
  in["v_cache"] = v_cache;
  Bindings b;
  b.set("B", x.shape[0]);
  b.set("C", k_cache.shape[1]);
  auto r = run_reference(llama_decode(c), in, b);
  REQUIRE(r.size() == 3);
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

// A cache [1, capacity, Hkv, D] holding `entries` [t, Hkv, D] at positions [0, t) and garbage
// (uniform in [-4, 4), larger than any real entry) everywhere else.
HostTensor cache_with(const LlamaConfig& c, const HostTensor& entries, int64_t capacity, uint64_t seed) {
  HostTensor cache = random_tensor(c.dtype, {1, capacity, c.n_kv_heads, c.head_dim}, seed, -4.0, 4.0);
  std::copy(entries.data.begin(), entries.data.end(), cache.data.begin());
  return cache;
}

// Tolerance between two runs of the layer that compute the same token along different graphs. In
// exact arithmetic they agree; the oracle sums in fp64, so a different summation order moves a sum
// by ~1e-16 relative, which can flip one bf16 rounding of an intermediate by one ulp (2^-7
// relative at worst, 2^-8 typical). The few ops after such a flip (norm, projections, residual) have
// gains of O(1) on O(1) activations, so two bf16 ulps of the output magnitude, with an absolute floor
// of the same size for outputs near zero, bounds a legitimate difference while still catching any
// masking, position or head-mapping bug (those change outputs by O(0.1..1)).
void check_bf16_close(const HostTensor& got, const HostTensor& want) {
  REQUIRE(got.shape == want.shape);
  for (size_t i = 0; i < want.data.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(got.data[i] - want.data[i]) <= 0x1p-6 * std::max(std::fabs(want.data[i]), 1.0));
  }
}

TEST_CASE("llama prefill gives O(1) activations and rotated K/V of the right shapes", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 200);
  HostTensor x = random_tensor(c.dtype, {5, c.hidden}, 210);
  PrefillResult p = prefill(c, w, x);
  CHECK(p.out.shape == std::vector<int64_t>{5, c.hidden});
  CHECK(p.k.shape == std::vector<int64_t>{5, c.n_kv_heads, c.head_dim});
  CHECK(p.v.shape == std::vector<int64_t>{5, c.n_kv_heads, c.head_dim});
  double max_abs = 0;
  double sum_sq = 0;
  for (double v : p.out.data) {
    REQUIRE(std::isfinite(v));
    max_abs = std::max(max_abs, std::fabs(v));
    sum_sq += v * v;
  }
  CHECK(max_abs < 20.0);
  CHECK(sum_sq / static_cast<double>(p.out.numel()) > 0.05);
  // Causality: token 0 sees only itself, so its K and output do not depend on later tokens.
  PrefillResult first = prefill(c, w, rows(x, 0, 1));
  CHECK(rows(p.k, 0, 1).data == first.k.data);
  check_bf16_close(rows(p.out, 0, 1), first.out);
}

TEST_CASE("llama: prefill of t+1 tokens matches prefill of t then decode of token t+1", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 300);
  const int64_t t = 6;
  HostTensor x = random_tensor(c.dtype, {t + 1, c.hidden}, 310);
  PrefillResult full = prefill(c, w, x);
  PrefillResult head = prefill(c, w, rows(x, 0, t));

  const int64_t capacity = 11;  // C >= t + 1; positions t+1.. hold garbage that must be masked off
  HostTensor k_cache = cache_with(c, head.k, capacity, 320);
  HostTensor v_cache = cache_with(c, head.v, capacity, 321);
  DecodeResult d = decode(c, w, rows(x, t, 1), positions({static_cast<double>(t)}), k_cache, v_cache);

  check_bf16_close(d.out, rows(full.out, t, 1));
  // The decode step's new K/V entry is prefill's last row; the rest of the cache is untouched.
  const int64_t row = c.n_kv_heads * c.head_dim;
  HostTensor k_last = rows(full.k, t, 1);  // [1, Hkv, D]
  HostTensor k_new = k_last;
  std::copy(d.k_cache.data.begin() + t * row, d.k_cache.data.begin() + (t + 1) * row, k_new.data.begin());
  check_bf16_close(k_new, k_last);
  for (int64_t i = 0; i < capacity * row; ++i)
    if (i / row != t) REQUIRE(d.v_cache.data[static_cast<size_t>(i)] == v_cache.data[static_cast<size_t>(i)]);
}

TEST_CASE("llama decode ignores the cache beyond the current position", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 400);
  HostTensor x = random_tensor(c.dtype, {4, c.hidden}, 410);
  PrefillResult head = prefill(c, w, rows(x, 0, 3));
  HostTensor pos = positions({3});
  DecodeResult a = decode(c, w, rows(x, 3, 1), pos, cache_with(c, head.k, 9, 420), cache_with(c, head.v, 9, 421));
  DecodeResult b = decode(c, w, rows(x, 3, 1), pos, cache_with(c, head.k, 9, 422), cache_with(c, head.v, 9, 423));
  // Masked keys are never read, so different garbage must give bit-identical outputs.
  CHECK(a.out.data == b.out.data);
}

TEST_CASE("llama prefill of one token equals decode at position 0 over an empty cache", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 500);
  HostTensor x = random_tensor(c.dtype, {1, c.hidden}, 510);
  PrefillResult p = prefill(c, w, x);
  HostTensor garbage_k = random_tensor(c.dtype, {1, 5, c.n_kv_heads, c.head_dim}, 520, -4.0, 4.0);
  HostTensor garbage_v = random_tensor(c.dtype, {1, 5, c.n_kv_heads, c.head_dim}, 521, -4.0, 4.0);
  DecodeResult d = decode(c, w, x, positions({0}), garbage_k, garbage_v);
  check_bf16_close(d.out, p.out);
}

TEST_CASE("llama decode of 3 sequences at different positions equals 3 single decodes", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 600);
  const int64_t capacity = 8;
  HostTensor x = random_tensor(c.dtype, {3, c.hidden}, 610);
  HostTensor k_cache = random_tensor(c.dtype, {3, capacity, c.n_kv_heads, c.head_dim}, 620);
  HostTensor v_cache = random_tensor(c.dtype, {3, capacity, c.n_kv_heads, c.head_dim}, 621);
  const std::vector<double> pos = {2, 6, 0};
  DecodeResult batch = decode(c, w, x, positions(pos), k_cache, v_cache);
  for (int64_t b = 0; b < 3; ++b) {
    INFO("sequence " << b);
    DecodeResult one = decode(c, w, rows(x, b, 1), positions({pos[static_cast<size_t>(b)]}), rows(k_cache, b, 1),
                              rows(v_cache, b, 1));
    // Every op treats sequences independently with the same arithmetic, so the oracle must agree
    // with itself exactly: any difference is a batching bug, not rounding.
    CHECK(rows(batch.out, b, 1).data == one.out.data);
    CHECK(rows(batch.k_cache, b, 1).data == one.k_cache.data);
    CHECK(rows(batch.v_cache, b, 1).data == one.v_cache.data);
  }
}

TEST_CASE("llama decode at a position outside the cache names the sequence", "[llama]") {
  const LlamaConfig c = LlamaConfig::small();
  const Inputs w = llama_weights(c, 700);
  HostTensor x = random_tensor(c.dtype, {2, c.hidden}, 710);
  HostTensor k_cache = random_tensor(c.dtype, {2, 4, c.n_kv_heads, c.head_dim}, 720);
  CHECK_THROWS_WITH(decode(c, w, x, positions({1, 4}), k_cache, k_cache),
                    Catch::Contains("sequence 1") && Catch::Contains("position 4") && Catch::Contains("k_cache_new"));
}

}  // namespace
}  // namespace lj
