// Reference scaled dot-product attention with grouped-query heads, causal masking and KV-cache reads.
//
// q [T, Hq, D] with k, v [S, Hkv, D], or batched q [B, T, Hq, D] with k, v [B, S, Hkv, D]. Query head
// h reads KV head h / (Hq / Hkv) (GQA; Hkv = 1 is MQA). Positions:
//   - without cache_pos, the T queries are the last T of the S keys: query t sits at S - T + t and
//     every key is valid;
//   - with cache_pos (i32[B], or [1] unbatched), query t of sequence b sits at cache_pos[b] + t and
//     only keys at positions < cache_pos[b] + T are valid (the rest of the cache is stale or garbage).
// causal also masks keys after the query's own position; a window W (sliding-window attention, as
// Mistral's) also masks keys more than W - 1 positions before it. The default scale is 1/sqrt(D).
// Paged (block_table i32[B, pages]): k and v are page pools [P, page, Hkv, D]; key j of sequence b is
// row j % page of pool page block_table[b, j / page], and a sequence has pages * page keys.
// Scores, softmax and the weighted sum are all in double, over the stored q, k, v values; the output
// is rounded once. A query that sees no key at all (only possible without cache_pos when causal and
// T > S) gets zeros, as a flash-attention kernel with an empty row produces.
// With lse, the second result holds log(sum_j exp(scale * q.k_j)) per (token, query head) over the
// keys the row sees (-inf for a row that sees none), rounded to f32 once.
#include <cmath>
#include <limits>

#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

namespace lj::ref {

std::vector<HostTensor> attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor* cache_pos,
                                  const HostTensor* block_table, bool causal, std::optional<double> scale,
                                  std::optional<int64_t> window, const std::vector<TensorType>& out_types) {
  const TensorType& out = out_types.at(0);
  HostTensor y = make_result(out);
  std::optional<HostTensor> lse;
  if (out_types.size() > 1) {
    lse = make_result(out_types[1]);
    for (double& x : lse->data) x = -std::numeric_limits<double>::infinity();
  }
  const bool batched = q.shape.size() == 4;
  const int64_t batch = batched ? q.shape[0] : 1;
  const int64_t t_len = q.dim(-3);
  const int64_t hq = q.dim(-2);
  const int64_t d = q.dim(-1);
  const int64_t page = k.dim(-3);
  const int64_t pages = block_table ? block_table->shape[1] : 1;
  const int64_t s_len = page * pages;  // keys per sequence
  const int64_t hkv = k.dim(-2);
  const int64_t group = hq / hkv;
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));

  std::vector<double> w(static_cast<size_t>(s_len));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t first_pos = s_len - t_len;  // position of query 0
    int64_t valid = s_len;              // keys [0, valid) may be read
    if (cache_pos) {
      const int64_t p = as_index(*cache_pos, b);
      LJ_CHECK(p >= 0 && p + t_len <= s_len, SourceLoc{},
               "attention: sequence {}: cache_pos {} with {} new token{} does not fit a cache of {} positions", b, p,
               t_len, t_len == 1 ? "" : "s", s_len);
      first_pos = p;
      valid = p + t_len;
    }
    for (int64_t t = 0; t < t_len; ++t) {
      const int64_t qpos = first_pos + t;
      const int64_t n_keys = causal ? std::min(valid, qpos + 1) : valid;
      const int64_t first_key = window ? std::max<int64_t>(0, qpos - *window + 1) : 0;
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kvh = h / group;
        const double* qv = q.data.data() + ((b * t_len + t) * hq + h) * d;
        double* out_row = y.data.data() + ((b * t_len + t) * hq + h) * d;
        if (n_keys <= first_key) continue;  // already zero (and the lse -inf)
        auto kv_row = [&](const HostTensor& src, int64_t j) {
          if (!block_table) return src.data.data() + ((b * s_len + j) * hkv + kvh) * d;
          const int64_t p = as_index(*block_table, b * pages + j / page);
          LJ_CHECK(p >= 0 && p < src.shape[0], SourceLoc{}, "attention: sequence {}: block_table[{}, {}] = {} is not a page of the {}-page pool",
                   b, b, j / page, p, src.shape[0]);
          return src.data.data() + ((p * page + j % page) * hkv + kvh) * d;
        };
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = first_key; j < n_keys; ++j) {
          const double* kr = kv_row(k, j);
          double dot = 0.0;
          for (int64_t i = 0; i < d; ++i) dot += qv[i] * kr[i];
          w[static_cast<size_t>(j)] = sc * dot;
          m = std::fmax(m, sc * dot);
        }
        double sum = 0.0;
        for (int64_t j = first_key; j < n_keys; ++j) {
          w[static_cast<size_t>(j)] = std::exp(w[static_cast<size_t>(j)] - m);
          sum += w[static_cast<size_t>(j)];
        }
        for (int64_t i = 0; i < d; ++i) {
          double acc = 0.0;
          for (int64_t j = first_key; j < n_keys; ++j) acc += w[static_cast<size_t>(j)] * kv_row(v, j)[i];
          out_row[i] = round_to(out.dtype, acc / sum);
        }
        if (lse) lse->data[static_cast<size_t>((b * t_len + t) * hq + h)] = round_to(DType::F32, m + std::log(sum));
      }
    }
  }
  std::vector<HostTensor> res;
  res.push_back(std::move(y));
  if (lse) res.push_back(std::move(*lse));
  return res;
}

}  // namespace lj::ref
