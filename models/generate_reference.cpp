// generate_reference: the model's graphs run one after another through run_reference, with
// per-layer weights and host KV caches. The prefill's K and V rows go to cache positions 0 .. T-1;
// decode step s writes position T + s - 1 (the graph's kv_cache_write) and attends to all before it.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "layerjit/check.h"
#include "layerjit/error.h"
#include "layerjit/reference.h"
#include "layerjit/shard.h"
#include "models/generate.h"

namespace lj::models {

namespace {

constexpr uint64_t kMaxReferenceBytes = 4ull << 30;

using Inputs = std::map<std::string, HostTensor>;

Inputs host_params(const std::vector<ParamBytes>& params) {
  Inputs in;
  for (const ParamBytes& p : params) in[p.name] = to_host(p);
  return in;
}

HostTensor ids_tensor(const std::vector<int32_t>& ids) {
  HostTensor t(DType::I32, {static_cast<int64_t>(ids.size())});
  for (size_t i = 0; i < ids.size(); ++i) t.data[i] = ids[i];
  return t;
}

// Row `row` of a [rows, width] tensor as a [1, width] tensor.
HostTensor row_of(const HostTensor& t, int64_t row) {
  const int64_t width = t.shape.back();
  HostTensor r(t.dtype, {1, width});
  std::copy_n(t.data.begin() + row * width, width, r.data.begin());
  return r;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}


// One layer graph through the reference: whole, or over the ranks of its sharded form (inputs cut,
// outputs gathered).
class LayerRunner {
 public:
  LayerRunner(const Graph& g, int tp) : g_(g), tp_(tp) {
    if (tp > 1) sharded_.emplace(shard(g, tp));
  }
  std::vector<HostTensor> run(const Inputs& in, const Bindings& b) const {
    if (!sharded_) return run_reference(g_, in, b);
    const ShardedGraph& s = *sharded_;
    std::vector<Inputs> ranks(static_cast<size_t>(tp_));
    for (const auto& [name, t] : in)
      for (int r = 0; r < tp_; ++r) ranks[static_cast<size_t>(r)][name] = shard_tensor(t, s.inputs.at(name), tp_, r);
    const std::vector<std::vector<HostTensor>> got = run_reference_ranks(s.graph, s.others, ranks, b);
    std::vector<HostTensor> out;
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      std::vector<HostTensor> parts;
      for (const auto& rank_out : got) parts.push_back(rank_out.at(o));
      out.push_back(gather_tensor(parts, s.outputs[o], tp_));
    }
    return out;
  }

 private:
  const Graph& g_;
  int tp_;
  std::optional<ShardedGraph> sharded_;
};

}  // namespace

GenerateResult generate_reference(const Model& m, const std::vector<int32_t>& prompt, const GenerateOptions& opts, int tp) {
  const ModelConfig& c = m.config();
  check_generate_request(c, prompt, opts.new_tokens, opts.forced);
  const uint64_t doubles = m.weight_bytes() / static_cast<uint64_t>(dtype_bytes(c.layer.dtype)) * sizeof(double);
  LJ_CHECK(doubles <= kMaxReferenceBytes, SourceLoc{},
           "the CPU reference holds weights as doubles: this model's would take {:.1f} GiB (the limit is {} GiB); run it on a GPU",
           static_cast<double>(doubles) / (1ull << 30), kMaxReferenceBytes >> 30);
  const ModelGraphs& g = m.graphs();
  const LayerRunner prefill_layer(g.prefill, tp), decode_layer(g.decode, tp);
  const int64_t t_len = static_cast<int64_t>(prompt.size());
  const int64_t capacity = t_len + opts.new_tokens;
  const int64_t kvh = c.layer.n_kv_heads, d = c.layer.head_dim;

  Inputs embed = host_params(m.embed_params());
  Inputs head = host_params(m.head_params());
  std::vector<Inputs> layers;  // each layer's weights, then the activations of the call
  std::vector<HostTensor> k_cache, v_cache;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    layers.push_back(host_params(m.layer_params(l)));
    k_cache.emplace_back(c.layer.dtype, std::vector<int64_t>{1, capacity, kvh, d});
    v_cache.emplace_back(c.layer.dtype, std::vector<int64_t>{1, capacity, kvh, d});
  }

  GenerateResult r;
  if (opts.keep_logits) r.logits = HostTensor(DType::F32, {opts.new_tokens, c.vocab});
  // The head over the last hidden row: records the logits of step `step`, returns the next token.
  auto choose = [&](const HostTensor& hidden_row, int64_t step) {
    head["x"] = hidden_row;
    Bindings b;
    b.set("B", 1);
    const std::vector<HostTensor> out = run_reference(g.head, head, b);
    if (opts.keep_logits) std::copy(out[0].data.begin(), out[0].data.end(), r.logits.data.begin() + step * c.vocab);
    return static_cast<int32_t>(out[1].data[0]);
  };

  // The embedding graph over `ids`: [ids, H].
  auto embed_rows = [&](const std::vector<int32_t>& ids) {
    Bindings eb;
    eb.set("N", static_cast<int64_t>(ids.size()));
    embed["ids"] = ids_tensor(ids);
    return run_reference(g.embed, embed, eb)[0];
  };

  // Prefill: every prompt token through every layer.
  auto t0 = std::chrono::steady_clock::now();
  {
    HostTensor x = embed_rows(prompt);
    HostTensor pos(DType::I32, {t_len});
    for (int64_t t = 0; t < t_len; ++t) pos.data[static_cast<size_t>(t)] = static_cast<double>(t);
    Bindings pb;
    pb.set("T", t_len);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const auto li = static_cast<size_t>(l);
      Inputs& in = layers[li];
      in["x"] = std::move(x);
      in["pos"] = pos;
      std::vector<HostTensor> out = prefill_layer.run(in, pb);
      x = std::move(out[0]);
      // K and V of the prompt: cache rows 0 .. T-1 (the cache is [1, C, kvh, d], the rows [T, kvh, d]).
      std::copy(out[1].data.begin(), out[1].data.end(), k_cache[li].data.begin());
      std::copy(out[2].data.begin(), out[2].data.end(), v_cache[li].data.begin());
    }
    r.tokens.push_back(choose(row_of(x, t_len - 1), 0));
  }
  r.step_ms.push_back(ms_since(t0));

  // Decode: one token per step at position T + s - 1.
  for (int64_t s = 1; s < opts.new_tokens; ++s) {
    t0 = std::chrono::steady_clock::now();
    HostTensor x = embed_rows({opts.forced.empty() ? r.tokens.back() : opts.forced[static_cast<size_t>(s - 1)]});
    HostTensor pos(DType::I32, {1});
    pos.data[0] = static_cast<double>(t_len + s - 1);
    Bindings db;
    db.set("B", 1);
    db.set("C", capacity);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const auto li = static_cast<size_t>(l);
      Inputs& in = layers[li];
      in["x"] = std::move(x);
      in["pos"] = pos;
      in["k_cache"] = std::move(k_cache[li]);
      in["v_cache"] = std::move(v_cache[li]);
      std::vector<HostTensor> out = decode_layer.run(in, db);
      in.erase("k_cache");
      in.erase("v_cache");
      x = std::move(out[0]);
      k_cache[li] = std::move(out[1]);
      v_cache[li] = std::move(out[2]);
    }
    r.tokens.push_back(choose(x, s));
    r.step_ms.push_back(ms_since(t0));
  }
  return r;
}

}  // namespace lj::models
