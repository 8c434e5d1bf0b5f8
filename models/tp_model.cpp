// TpModel (tp_model.h has the protocol).
#include "models/tp_model.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "models/device_common.h"
#include "runtime/graph.h"
#include "runtime/memory.h"

namespace lj::models {

// What each rank holds besides its share of the layer executables: the whole embedding and head,
// its caches and activations, on a stream of its own that every step of the rank runs on.
struct TpModel::Rank {
  rt::Context* ctx = nullptr;
  std::optional<rt::Stream> stream;
  std::optional<exec::Executable> embed, head;
  std::vector<rt::DeviceBuffer> buffers;                     // every allocation of this rank
  std::vector<std::map<std::string, CUdeviceptr>> layer_w;   // per layer: param name -> its share
  std::map<std::string, CUdeviceptr> embed_w, head_w;
  std::vector<CUdeviceptr> k_cache, v_cache;
  CUdeviceptr ids = 0, pos = 0, x[2] = {0, 0}, logits = 0, next = 0;
  bool copied[2] = {false, false};  // the prefill's K / V output stays a view: copied into the caches
  std::optional<rt::Graph> graph;   // one decode step

  rt::Result<CUdeviceptr> allocate(size_t bytes) {
    LJ_RT_ASSIGN(rt::DeviceBuffer b, rt::DeviceBuffer::allocate(*ctx, std::max<size_t>(bytes, 1)));
    buffers.push_back(std::move(b));
    return buffers.back().ptr();
  }
};

namespace {

// A param's whole bytes: its parts (q/k/v or gate/up stacked) put together.
std::vector<unsigned char> whole(const ParamBytes& p) {
  std::vector<unsigned char> out(p.bytes);
  for (const ParamBytes::Part& part : p.parts) std::memcpy(out.data() + part.offset, part.data.data(), part.data.size());
  return out;
}

rt::Result<std::unique_ptr<exec::TpExecutable>> build_layer(const Graph& g, const TpModelOptions& o, const Bindings& hint) {
  exec::TpOptions to;
  to.tp = o.tp;
  to.devices = o.devices;
  to.build = o.model.build;
  to.build.hint = hint;
  to.shard = o.shard;
  try {
    return exec::TpExecutable::build(g, to);
  } catch (const UserError& e) {  // the model does not shard over tp
    return rt::Error{e.what()};
  }
}

}  // namespace

TpModel::TpModel() = default;
// Each rank's executables and buffers are released with its context current (module unloads act
// on the current context); the layer executables release theirs the same way.
TpModel::~TpModel() {
  for (auto& rk : ranks_) {
    (void)rk->ctx->make_current();
    rk.reset();
  }
}

rt::Result<std::unique_ptr<TpModel>> TpModel::open(const Model& m, const TpModelOptions& o) {
  std::unique_ptr<TpModel> d(new TpModel());
  d->model_ = &m;
  d->opts_ = o;
  const ModelConfig& c = m.config();
  d->capacity_ = o.model.capacity > 0 ? o.model.capacity : std::min<int64_t>(c.max_positions, 4096);
  if (d->capacity_ > c.max_positions)
    return rt::Error{fmt::format("a KV cache of {} positions is more than the model's max_position_embeddings ({})", d->capacity_,
                                 c.max_positions)};
  const auto t0 = std::chrono::steady_clock::now();
  Bindings bd;
  bd.set("B", 1);
  bd.set("C", d->capacity_);
  LJ_RT_ASSIGN(d->decode_, build_layer(m.graphs().decode, o, bd));
  exec::TpExecutable& dec = *d->decode_;
  const int tp = dec.ranks();
  for (int r = 0; r < tp; ++r) {
    auto rk = std::make_unique<Rank>();
    rk->ctx = &dec.context(r);
    LJ_RT_TRY(rk->ctx->make_current());
    LJ_RT_ASSIGN(rt::Stream s, rt::Stream::create(*rk->ctx));
    rk->stream.emplace(std::move(s));
    exec::BuildOptions bo = o.model.build;
    bo.hint = Bindings{};
    bo.hint.set("N", 1);
    LJ_RT_ASSIGN(exec::Executable e, exec::Executable::build(*rk->ctx, m.graphs().embed, bo));
    rk->embed.emplace(std::move(e));
    bo.hint = Bindings{};
    bo.hint.set("B", 1);
    LJ_RT_ASSIGN(exec::Executable h, exec::Executable::build(*rk->ctx, m.graphs().head, bo));
    rk->head.emplace(std::move(h));
    d->ranks_.push_back(std::move(rk));
  }
  d->compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Weights: the embedding and head whole on every rank (a tied head shares the table); each layer
  // param put together, then each rank's share cut and uploaded (shard_bytes).
  const ShardedGraph& sg = dec.sharded();
  for (int r = 0; r < tp; ++r) {
    Rank& rk = *d->ranks_[static_cast<size_t>(r)];
    LJ_RT_TRY(rk.ctx->make_current());
    auto upload_whole = [&](const std::vector<ParamBytes>& params, std::map<std::string, CUdeviceptr>& out) -> rt::Status {
      for (const ParamBytes& p : params) {
        if (&params == &m.head_params() && p.name == "lm_head" && c.tie_embeddings) {
          out[p.name] = rk.embed_w.at("embed_tokens");
          continue;
        }
        LJ_RT_ASSIGN(const CUdeviceptr at, rk.allocate(p.bytes));
        for (const ParamBytes::Part& part : p.parts)
          LJ_RT_TRY(rt::copy_to_device(*rk.stream, at + part.offset, part.data.data(), part.data.size()));
        out[p.name] = at;
      }
      return {};
    };
    LJ_RT_TRY(upload_whole(m.embed_params(), rk.embed_w));
    LJ_RT_TRY(upload_whole(m.head_params(), rk.head_w));
    rk.layer_w.resize(static_cast<size_t>(c.n_layers));
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const ParamBytes& p : m.layer_params(l)) {
      const std::vector<unsigned char> full = whole(p);
      const std::vector<int64_t> shape = resolve(p.type.shape, Bindings{});
      for (int r = 0; r < tp; ++r) {
        Rank& rk = *d->ranks_[static_cast<size_t>(r)];
        std::vector<unsigned char> share;
        try {
          share = shard_bytes(full, p.type.dtype, shape, sg.inputs.at(p.name), tp, r);
        } catch (const UserError& e) {
          return rt::Error{fmt::format("layer {} %{}: {}", l, p.name, e.what())};
        }
        LJ_RT_TRY(rk.ctx->make_current());
        LJ_RT_ASSIGN(const CUdeviceptr at, rk.allocate(share.size()));
        LJ_RT_TRY(rt::copy_to_device(*rk.stream, at, share.data(), share.size()));
        LJ_RT_TRY(rk.stream->synchronize());  // `share` goes out of scope
        rk.layer_w[static_cast<size_t>(l)][p.name] = at;
      }
    }

  // Caches (a rank's heads), positions, token ids, activations, logits, the chosen token.
  const auto eb = static_cast<size_t>(dtype_bytes(c.layer.dtype));
  const size_t cache_bytes = static_cast<size_t>(d->capacity_ * (c.layer.n_kv_heads / tp) * c.layer.head_dim) * eb;
  const size_t rows = static_cast<size_t>(d->capacity_);
  for (auto& rk : d->ranks_) {
    LJ_RT_TRY(rk->ctx->make_current());
    for (int64_t l = 0; l < c.n_layers; ++l) {
      LJ_RT_ASSIGN(const CUdeviceptr k, rk->allocate(cache_bytes));
      LJ_RT_ASSIGN(const CUdeviceptr v, rk->allocate(cache_bytes));
      rk->k_cache.push_back(k);
      rk->v_cache.push_back(v);
    }
    LJ_RT_ASSIGN(rk->ids, rk->allocate(rows * 4));
    LJ_RT_ASSIGN(rk->pos, rk->allocate(rows * 4));
    for (CUdeviceptr& x : rk->x) {
      LJ_RT_ASSIGN(x, rk->allocate(rows * static_cast<size_t>(c.layer.hidden) * eb));
    }
    LJ_RT_ASSIGN(rk->logits, rk->allocate(static_cast<size_t>(c.vocab) * 4));
    LJ_RT_ASSIGN(rk->next, rk->allocate(4));
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (l > 0) (void)dec.add_binding_set();
    LJ_RT_TRY(dec.use_binding_set(static_cast<size_t>(l)));
    LJ_RT_TRY(d->bind_layer(dec, l));
    for (int r = 0; r < tp; ++r) {  // the decode graph's cache inputs and the updated caches it returns: one memory
      const Rank& rk = *d->ranks_[static_cast<size_t>(r)];
      exec::Executable& e = dec.rank(r);
      const Graph& eg = e.graph();
      LJ_RT_ASSIGN(const ValueId kc, input_named(eg, "k_cache"));
      LJ_RT_ASSIGN(const ValueId vc, input_named(eg, "v_cache"));
      LJ_RT_TRY(e.bind(kc, rk.k_cache[static_cast<size_t>(l)]));
      LJ_RT_TRY(e.bind(vc, rk.v_cache[static_cast<size_t>(l)]));
      LJ_RT_TRY(e.bind(eg.outputs()[1], rk.k_cache[static_cast<size_t>(l)]));
      LJ_RT_TRY(e.bind(eg.outputs()[2], rk.v_cache[static_cast<size_t>(l)]));
    }
  }
  LJ_RT_TRY(d->sync_all());
  return d;
}

// Layer l's share of the weights on every rank, its input x[l % 2], its output x[(l + 1) % 2] (the
// layer output: whole on every rank after the last all_reduce) and the positions.
rt::Status TpModel::bind_layer(exec::TpExecutable& e, int64_t layer) {
  for (int r = 0; r < e.ranks(); ++r) {
    const Rank& rk = *ranks_[static_cast<size_t>(r)];
    exec::Executable& x = e.rank(r);
    const Graph& eg = x.graph();
    for (const auto& [name, ptr] : rk.layer_w[static_cast<size_t>(layer)]) {
      LJ_RT_ASSIGN(const ValueId v, input_named(eg, name));
      LJ_RT_TRY(x.bind(v, ptr));
    }
    LJ_RT_ASSIGN(const ValueId in, input_named(eg, "x"));
    LJ_RT_ASSIGN(const ValueId pos, input_named(eg, "pos"));
    LJ_RT_TRY(x.bind(in, rk.x[layer % 2]));
    LJ_RT_TRY(x.bind(pos, rk.pos));
    LJ_RT_TRY(x.bind(eg.outputs()[0], rk.x[(layer + 1) % 2]));
  }
  return {};
}

rt::Status TpModel::prefill(int64_t t_len) {
  if (prefill_ && prefill_len_ == t_len) return {};
  prefill_.reset();
  const ModelConfig& c = model_->config();
  Bindings hint;
  hint.set("T", t_len);
  const auto t0 = std::chrono::steady_clock::now();
  LJ_RT_ASSIGN(prefill_, build_layer(model_->graphs().prefill, opts_, hint));
  compile_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  prefill_len_ = t_len;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (l > 0) (void)prefill_->add_binding_set();
    LJ_RT_TRY(prefill_->use_binding_set(static_cast<size_t>(l)));
    LJ_RT_TRY(bind_layer(*prefill_, l));
    // The prompt's K and V rows (a rank's heads) are cache positions 0 .. T-1: bound there where the
    // plan gives them a buffer of their own, else copied after the layer (DeviceModel::prefill).
    for (int r = 0; r < prefill_->ranks(); ++r) {
      Rank& rk = *ranks_[static_cast<size_t>(r)];
      const Graph& pg = prefill_->rank(r).graph();
      for (int i = 1; i <= 2; ++i) {
        const CUdeviceptr cache = (i == 1 ? rk.k_cache : rk.v_cache)[static_cast<size_t>(l)];
        rk.copied[i - 1] = !prefill_->rank(r).bind(pg.outputs()[static_cast<size_t>(i)], cache).ok();
      }
    }
  }
  return {};
}

rt::Status TpModel::sync_all() {
  for (auto& rk : ranks_) {
    LJ_RT_TRY(rk->ctx->make_current());
    LJ_RT_TRY(rk->stream->synchronize());
  }
  return ranks_[0]->ctx->make_current();
}

size_t TpModel::launches_per_decode_step() const {
  const Rank& rk = *ranks_[0];
  return rk.embed->launches_per_run() + static_cast<size_t>(model_->config().n_layers) * decode_->rank(0).launches_per_run() +
         rk.head->launches_per_run();
}

rt::Result<GenerateResult> TpModel::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts) {
  const ModelConfig& c = model_->config();
  LJ_RT_TRY(check_device_request(c, prompt, opts, capacity_));
  const auto t_len = static_cast<int64_t>(prompt.size());
  const auto eb = static_cast<size_t>(dtype_bytes(c.layer.dtype));
  const size_t row_bytes = static_cast<size_t>(c.layer.hidden) * eb;
  for (auto& rk : ranks_) {  // the embedding table and the head's weights and outputs
    LJ_RT_TRY(rk->ctx->make_current());
    const Graph& eg = rk->embed->graph();
    const Graph& hg = rk->head->graph();
    LJ_RT_ASSIGN(const ValueId table, input_named(eg, "embed_tokens"));
    LJ_RT_TRY(rk->embed->bind(table, rk->embed_w.at("embed_tokens")));
    for (const auto& [name, ptr] : rk->head_w) {
      LJ_RT_ASSIGN(const ValueId v, input_named(hg, name));
      LJ_RT_TRY(rk->head->bind(v, ptr));
    }
    LJ_RT_TRY(rk->head->bind(hg.outputs()[0], rk->logits));
    LJ_RT_TRY(rk->head->bind(hg.outputs()[1], rk->next));
  }

  GenerateResult res;
  if (opts.keep_logits) res.logits = HostTensor(DType::F32, {opts.new_tokens, c.vocab});
  std::vector<float> logits(static_cast<size_t>(c.vocab));
  auto collect = [&](int64_t step) -> rt::Status {  // rank 0's token (every rank chose the same)
    LJ_RT_TRY(sync_all());
    Rank& r0 = *ranks_[0];
    int32_t next = 0;
    LJ_RT_TRY(rt::copy_to_host(*r0.stream, &next, r0.next, 4));
    if (opts.keep_logits) LJ_RT_TRY(rt::copy_to_host(*r0.stream, logits.data(), r0.logits, logits.size() * 4));
    LJ_RT_TRY(r0.stream->synchronize());
    res.tokens.push_back(next);
    if (opts.keep_logits) std::copy(logits.begin(), logits.end(), res.logits.data.begin() + step * c.vocab);
    return {};
  };

  // Prefill: on every rank the embedding, every layer (its NCCL calls among them), the last row to
  // the head.
  LJ_RT_TRY(prefill(t_len));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> positions(static_cast<size_t>(t_len));
  for (int64_t t = 0; t < t_len; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  const rt::Status prefilled = prefill_->on_ranks([&](int r) -> rt::Status {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    rt::Stream& st = *rk.stream;
    exec::Executable& layer = prefill_->rank(r);
    const Graph& eg = rk.embed->graph();
    LJ_RT_TRY(rt::copy_to_device(st, rk.ids, prompt.data(), prompt.size() * 4));
    LJ_RT_TRY(rt::copy_to_device(st, rk.pos, positions.data(), positions.size() * 4));
    LJ_RT_ASSIGN(const ValueId ids, input_named(eg, "ids"));
    LJ_RT_TRY(rk.embed->bind(ids, rk.ids));
    LJ_RT_TRY(rk.embed->bind(eg.outputs()[0], rk.x[0]));
    Bindings nb, pb, hb;
    nb.set("N", t_len);
    pb.set("T", t_len);
    pb.set("C", capacity_);
    hb.set("B", 1);
    LJ_RT_TRY(rk.embed->run(st, nb));
    const Graph& pg = layer.graph();
    for (int64_t l = 0; l < c.n_layers; ++l) {
      LJ_RT_TRY(layer.use_binding_set(static_cast<size_t>(l)));
      LJ_RT_TRY(layer.run(st, pb));
      for (int i = 1; i <= 2; ++i) {
        if (!rk.copied[i - 1]) continue;
        const CUdeviceptr cache = (i == 1 ? rk.k_cache : rk.v_cache)[static_cast<size_t>(l)];
        LJ_RT_TRY(copy_prompt_rows(st, layer, pg.outputs()[static_cast<size_t>(i)], pb, c.layer.dtype, c.layer.n_kv_heads / ranks(),
                                   c.layer.head_dim, cache));
      }
    }
    // The last row to the start of the other buffer (the head assumes a buffer start's alignment).
    const CUdeviceptr last = rk.x[c.n_layers % 2] + static_cast<CUdeviceptr>((t_len - 1) * static_cast<int64_t>(row_bytes));
    LJ_RT_TRY(rt::copy_on_device(st, rk.x[(c.n_layers + 1) % 2], last, row_bytes));
    LJ_RT_ASSIGN(const ValueId hx, input_named(rk.head->graph(), "x"));
    LJ_RT_TRY(rk.head->bind(hx, rk.x[(c.n_layers + 1) % 2]));
    LJ_RT_TRY(rk.head->run(st, hb));
    return st.synchronize();
  });
  LJ_RT_TRY(prefilled);
  LJ_RT_TRY(collect(0));
  res.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  if (opts.new_tokens == 1) return res;

  // Decode: each rank's embedding reads the token its own head wrote; the last layer feeds the head.
  for (auto& rk : ranks_) {
    LJ_RT_TRY(rk->ctx->make_current());
    LJ_RT_ASSIGN(const ValueId ids, input_named(rk->embed->graph(), "ids"));
    LJ_RT_ASSIGN(const ValueId hx, input_named(rk->head->graph(), "x"));
    LJ_RT_TRY(rk->embed->bind(ids, rk->next));
    LJ_RT_TRY(rk->head->bind(hx, rk->x[c.n_layers % 2]));
  }
  Bindings nb, db, hb;
  nb.set("N", 1);
  db.set("B", 1);
  db.set("C", capacity_);
  hb.set("B", 1);
  auto step = [&](int r) -> rt::Status {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    exec::Executable& layer = decode_->rank(r);
    LJ_RT_TRY(rk.embed->run(*rk.stream, nb));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      LJ_RT_TRY(layer.use_binding_set(static_cast<size_t>(l)));
      LJ_RT_TRY(layer.run(*rk.stream, db));
    }
    return rk.head->run(*rk.stream, hb);
  };
  bool captured = false;
  for (int64_t s = 1; s < opts.new_tokens; ++s) {
    t0 = std::chrono::steady_clock::now();
    const auto p = static_cast<int32_t>(t_len + s - 1);
    for (auto& rk : ranks_) {
      LJ_RT_TRY(rk->ctx->make_current());
      if (!opts.forced.empty()) LJ_RT_TRY(rt::copy_to_device(*rk->stream, rk->next, &opts.forced[static_cast<size_t>(s - 1)], 4));
      LJ_RT_TRY(rt::copy_to_device(*rk->stream, rk->pos, &p, 4));
    }
    if (captured) {
      for (auto& rk : ranks_) {  // graph launches do not block: one thread launches every rank's
        LJ_RT_TRY(rk->ctx->make_current());
        LJ_RT_TRY(rk->graph->replay(*rk->stream));
      }
    } else {
      LJ_RT_TRY(decode_->on_ranks(step));
    }
    LJ_RT_TRY(collect(s));
    res.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (opts_.model.graphs && !captured && s + 1 < opts.new_tokens) {
      // Every buffer exists now (the eager step sized them): record each rank's step once.
      const rt::Status recorded = decode_->on_ranks([&](int r) -> rt::Status {
        Rank& rk = *ranks_[static_cast<size_t>(r)];
        LJ_RT_ASSIGN(rt::Graph g, rt::Graph::capture(*rk.stream, [&] { return step(r); }));
        rk.graph.emplace(std::move(g));
        return {};
      });
      LJ_RT_TRY(recorded);
      captured = true;
    }
  }
  return res;
}

}  // namespace lj::models
