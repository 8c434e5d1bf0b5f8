// DeviceModel (device_model.h has the protocol).
#include "models/device_model.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "models/device_common.h"
#include "runtime/graph.h"

namespace lj::models {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

rt::Result<exec::Executable> build(rt::Context& ctx, const Graph& g, exec::BuildOptions o, const Bindings& hint) {
  o.hint = hint;
  return exec::Executable::build(ctx, g, o);
}

}  // namespace

rt::Result<DeviceModel> DeviceModel::open(rt::Context& ctx, const Model& m, const DeviceModelOptions& opts) {
  DeviceModel d;
  d.ctx_ = &ctx;
  d.model_ = &m;
  d.opts_ = opts;
  const ModelConfig& c = m.config();
  d.capacity_ = opts.capacity > 0 ? opts.capacity : std::min<int64_t>(c.max_positions, 4096);
  if (d.capacity_ > c.max_positions)
    return rt::Error{fmt::format("a KV cache of {} positions is more than the model's max_position_embeddings ({})", d.capacity_,
                                 c.max_positions)};
  LJ_RT_ASSIGN(rt::Stream s, rt::Stream::create(ctx));
  d.stream_.emplace(std::move(s));
  const ModelGraphs& g = m.graphs();
  auto t0 = std::chrono::steady_clock::now();
  {
    Bindings n1;
    n1.set("N", 1);
    LJ_RT_ASSIGN(exec::Executable e, build(ctx, g.embed, opts.build, n1));
    d.embed_.emplace(std::move(e));
    Bindings b1;
    b1.set("B", 1);
    LJ_RT_ASSIGN(exec::Executable h, build(ctx, g.head, opts.build, b1));
    d.head_.emplace(std::move(h));
    Bindings bd;
    bd.set("B", 1);
    bd.set("C", d.capacity_);
    LJ_RT_ASSIGN(exec::Executable x, build(ctx, g.decode, opts.build, bd));
    d.decode_.emplace(std::move(x));
  }
  d.compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Weights: one buffer per param, filled part by part from the mapped checkpoint (the stacking of
  // q/k/v and gate/up happens here). A tied LM head shares the embedding table's buffer.
  // Through one pinned staging buffer: the mapped pages are pageable memory.
  LJ_RT_ASSIGN(rt::HostStaging staging, rt::HostStaging::create(ctx));
  auto upload = [&](const std::vector<ParamBytes>& params, std::map<std::string, CUdeviceptr>& out) -> rt::Status {
    for (const ParamBytes& p : params) {
      if (&params == &m.head_params() && p.name == "lm_head" && c.tie_embeddings) {
        out[p.name] = d.embed_w_.at("embed_tokens");
        continue;
      }
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, p.bytes));
      for (const ParamBytes::Part& part : p.parts)
        LJ_RT_TRY(staging.upload(*d.stream_, buf.ptr() + part.offset, part.data.data(), part.data.size()));
      out[p.name] = buf.ptr();
      d.weights_.push_back(std::move(buf));
    }
    return {};
  };
  LJ_RT_TRY(upload(m.embed_params(), d.embed_w_));
  LJ_RT_TRY(upload(m.head_params(), d.head_w_));
  d.layer_w_.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) LJ_RT_TRY(upload(m.layer_params(l), d.layer_w_[static_cast<size_t>(l)]));

  const auto eb = static_cast<size_t>(dtype_bytes(c.layer.dtype));
  const size_t cache_bytes = static_cast<size_t>(d.capacity_ * c.layer.n_kv_heads * c.layer.head_dim) * eb;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LJ_RT_ASSIGN(rt::DeviceBuffer k, rt::DeviceBuffer::allocate(ctx, cache_bytes));
    LJ_RT_ASSIGN(rt::DeviceBuffer v, rt::DeviceBuffer::allocate(ctx, cache_bytes));
    d.k_cache_.push_back(std::move(k));
    d.v_cache_.push_back(std::move(v));
  }
  const size_t rows = static_cast<size_t>(d.capacity_);
  LJ_RT_ASSIGN(rt::DeviceBuffer ids, rt::DeviceBuffer::allocate(ctx, rows * 4));
  LJ_RT_ASSIGN(rt::DeviceBuffer pos, rt::DeviceBuffer::allocate(ctx, rows * 4));
  LJ_RT_ASSIGN(rt::DeviceBuffer x0, rt::DeviceBuffer::allocate(ctx, rows * static_cast<size_t>(c.layer.hidden) * eb));
  LJ_RT_ASSIGN(rt::DeviceBuffer x1, rt::DeviceBuffer::allocate(ctx, rows * static_cast<size_t>(c.layer.hidden) * eb));
  LJ_RT_ASSIGN(rt::DeviceBuffer logits, rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(c.vocab) * 4));
  LJ_RT_ASSIGN(rt::DeviceBuffer next, rt::DeviceBuffer::allocate(ctx, 4));
  d.ids_.emplace(std::move(ids));
  d.pos_.emplace(std::move(pos));
  d.x_[0].emplace(std::move(x0));
  d.x_[1].emplace(std::move(x1));
  d.logits_.emplace(std::move(logits));
  d.next_.emplace(std::move(next));

  // The decode executable: one binding set per layer, activations ping-ponging between x_[0] and x_[1].
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (l > 0) (void)d.decode_->add_binding_set();
    LJ_RT_TRY(d.decode_->use_binding_set(static_cast<size_t>(l)));
    LJ_RT_TRY(d.bind_layer(*d.decode_, l));
    LJ_RT_TRY(d.bind_caches(*d.decode_, l));
  }
  LJ_RT_TRY(d.stream_->synchronize());
  return d;
}

// Layer l's weights, its input x_[l % 2], its output x_[(l + 1) % 2] and the positions.
rt::Status DeviceModel::bind_layer(exec::Executable& e, int64_t layer) {
  const Graph& eg = e.graph();
  for (const auto& [name, ptr] : layer_w_[static_cast<size_t>(layer)]) {
    LJ_RT_ASSIGN(ValueId v, input_named(eg, name));
    LJ_RT_TRY(e.bind(v, ptr));
  }
  LJ_RT_ASSIGN(ValueId x, input_named(eg, "x"));
  LJ_RT_ASSIGN(ValueId pos, input_named(eg, "pos"));
  LJ_RT_TRY(e.bind(x, x_[layer % 2]->ptr()));
  LJ_RT_TRY(e.bind(pos, pos_->ptr()));
  LJ_RT_TRY(e.bind(eg.outputs()[0], x_[(layer + 1) % 2]->ptr()));
  return {};
}

// Layer l's KV caches: the graph's cache inputs and the updated caches it returns (the same memory).
rt::Status DeviceModel::bind_caches(exec::Executable& e, int64_t layer) {
  const Graph& eg = e.graph();
  const CUdeviceptr k = k_cache_[static_cast<size_t>(layer)].ptr(), v = v_cache_[static_cast<size_t>(layer)].ptr();
  LJ_RT_ASSIGN(ValueId kc, input_named(eg, "k_cache"));
  LJ_RT_ASSIGN(ValueId vc, input_named(eg, "v_cache"));
  LJ_RT_TRY(e.bind(kc, k));
  LJ_RT_TRY(e.bind(vc, v));
  LJ_RT_TRY(e.bind(eg.outputs()[1], k));
  LJ_RT_TRY(e.bind(eg.outputs()[2], v));
  return {};
}

rt::Status DeviceModel::prefill(int64_t t_len) {
  if (prefill_ && prefill_len_ == t_len) return {};
  prefill_.reset();
  const ModelConfig& c = model_->config();
  Bindings hint;
  hint.set("T", t_len);
  auto t0 = std::chrono::steady_clock::now();
  LJ_RT_ASSIGN(exec::Executable e, build(*ctx_, model_->graphs().prefill, opts_.build, hint));
  compile_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  prefill_.emplace(std::move(e));
  prefill_len_ = t_len;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (l > 0) (void)prefill_->add_binding_set();
    LJ_RT_TRY(prefill_->use_binding_set(static_cast<size_t>(l)));
    LJ_RT_TRY(bind_layer(*prefill_, l));
    // The prompt's K and V rows [T, kvh, d] are cache positions 0 .. T-1 of this layer ([1, C, kvh,
    // d]): bound there where the plan gives them a buffer of their own; a view the plan keeps (v as
    // part of the QKV projection's output, when no RoPE kernel copies it) is copied after the layer.
    const Graph& pg = prefill_->graph();
    for (int i = 1; i <= 2; ++i) {
      const CUdeviceptr cache = (i == 1 ? k_cache_ : v_cache_)[static_cast<size_t>(l)].ptr();
      copied_[static_cast<size_t>(i - 1)] = !prefill_->bind(pg.outputs()[static_cast<size_t>(i)], cache).ok();
    }
  }
  return {};
}

size_t DeviceModel::launches_per_decode_step() const {
  return embed_->launches_per_run() + static_cast<size_t>(model_->config().n_layers) * decode_->launches_per_run() +
         head_->launches_per_run();
}

rt::Result<GenerateResult> DeviceModel::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts) {
  const ModelConfig& c = model_->config();
  LJ_RT_TRY(check_device_request(c, prompt, opts, capacity_));
  const auto t_len = static_cast<int64_t>(prompt.size());
  rt::Stream& st = *stream_;
  const auto eb = static_cast<size_t>(dtype_bytes(c.layer.dtype));
  const size_t row_bytes = static_cast<size_t>(c.layer.hidden) * eb;
  const Graph& eg = embed_->graph();
  const Graph& hg = head_->graph();
  LJ_RT_ASSIGN(ValueId e_ids, input_named(eg, "ids"));
  LJ_RT_ASSIGN(ValueId e_table, input_named(eg, "embed_tokens"));
  LJ_RT_ASSIGN(ValueId h_x, input_named(hg, "x"));
  LJ_RT_TRY(embed_->bind(e_table, embed_w_.at("embed_tokens")));
  for (const auto& [name, ptr] : head_w_) {
    LJ_RT_ASSIGN(ValueId v, input_named(hg, name));
    LJ_RT_TRY(head_->bind(v, ptr));
  }
  LJ_RT_TRY(head_->bind(hg.outputs()[0], logits_->ptr()));
  LJ_RT_TRY(head_->bind(hg.outputs()[1], next_->ptr()));

  GenerateResult r;
  if (opts.keep_logits) r.logits = HostTensor(DType::F32, {opts.new_tokens, c.vocab});
  std::vector<float> logits(static_cast<size_t>(c.vocab));
  // After the head: the chosen token (and the logits) to the host.
  auto collect = [&](int64_t step) -> rt::Status {
    int32_t next = 0;
    LJ_RT_TRY(rt::copy_to_host(st, &next, next_->ptr(), 4));
    if (opts.keep_logits) LJ_RT_TRY(rt::copy_to_host(st, logits.data(), logits_->ptr(), logits.size() * 4));
    LJ_RT_TRY(st.synchronize());
    r.tokens.push_back(next);
    if (opts.keep_logits) std::copy(logits.begin(), logits.end(), r.logits.data.begin() + step * c.vocab);
    return {};
  };

  // Prefill.
  LJ_RT_TRY(prefill(t_len));
  auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<int32_t> pos(static_cast<size_t>(t_len));
    for (int64_t t = 0; t < t_len; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    LJ_RT_TRY(rt::copy_to_device(st, ids_->ptr(), prompt.data(), prompt.size() * 4));
    LJ_RT_TRY(rt::copy_to_device(st, pos_->ptr(), pos.data(), pos.size() * 4));
    Bindings nb;
    nb.set("N", t_len);
    LJ_RT_TRY(embed_->bind(e_ids, ids_->ptr()));
    LJ_RT_TRY(embed_->bind(eg.outputs()[0], x_[0]->ptr()));
    LJ_RT_TRY(embed_->run(st, nb));
    Bindings pb;
    pb.set("T", t_len);
    pb.set("C", capacity_);
    const Graph& pg = prefill_->graph();
    for (int64_t l = 0; l < c.n_layers; ++l) {
      LJ_RT_TRY(prefill_->use_binding_set(static_cast<size_t>(l)));
      LJ_RT_TRY(prefill_->run(st, pb));
      for (int i = 1; i <= 2; ++i) {
        if (!copied_[static_cast<size_t>(i - 1)]) continue;
        const CUdeviceptr cache = (i == 1 ? k_cache_ : v_cache_)[static_cast<size_t>(l)].ptr();
        LJ_RT_TRY(copy_prompt_rows(st, *prefill_, pg.outputs()[static_cast<size_t>(i)], pb, c.layer.dtype, c.layer.n_kv_heads,
                                   c.layer.head_dim, cache));
      }
    }
    // The last position's row, copied to the start of the other buffer: the head's kernels assume
    // the alignment of a buffer's start, which row T - 1 of [T, H] need not have.
    const CUdeviceptr last = x_[c.n_layers % 2]->ptr() + static_cast<CUdeviceptr>((t_len - 1) * static_cast<int64_t>(row_bytes));
    LJ_RT_TRY(rt::copy_on_device(st, x_[(c.n_layers + 1) % 2]->ptr(), last, row_bytes));
    LJ_RT_TRY(head_->bind(h_x, x_[(c.n_layers + 1) % 2]->ptr()));
    Bindings hb;
    hb.set("B", 1);
    LJ_RT_TRY(head_->run(st, hb));
    LJ_RT_TRY(collect(0));
  }
  r.step_ms.push_back(ms_since(t0));
  if (opts.new_tokens == 1) return r;

  // Decode: the embedding reads the token the head wrote; the last layer's output feeds the head.
  LJ_RT_TRY(embed_->bind(e_ids, next_->ptr()));
  LJ_RT_TRY(head_->bind(h_x, x_[c.n_layers % 2]->ptr()));
  Bindings nb, db, hb;
  nb.set("N", 1);
  db.set("B", 1);
  db.set("C", capacity_);
  hb.set("B", 1);
  auto step = [&]() -> rt::Status {
    LJ_RT_TRY(embed_->run(st, nb));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      LJ_RT_TRY(decode_->use_binding_set(static_cast<size_t>(l)));
      LJ_RT_TRY(decode_->run(st, db));
    }
    return head_->run(st, hb);
  };
  std::optional<rt::Graph> graph;
  for (int64_t s = 1; s < opts.new_tokens; ++s) {
    t0 = std::chrono::steady_clock::now();
    if (!opts.forced.empty())
      LJ_RT_TRY(rt::copy_to_device(st, next_->ptr(), &opts.forced[static_cast<size_t>(s - 1)], 4));
    const auto p = static_cast<int32_t>(t_len + s - 1);
    LJ_RT_TRY(rt::copy_to_device(st, pos_->ptr(), &p, 4));
    if (graph) {
      LJ_RT_TRY(graph->replay(st));
    } else {
      LJ_RT_TRY(step());
    }
    LJ_RT_TRY(collect(s));
    r.step_ms.push_back(ms_since(t0));
    if (opts_.graphs && !graph && s + 1 < opts.new_tokens) {
      // Every buffer exists now (the eager step sized them): record the step once.
      LJ_RT_ASSIGN(rt::Graph gr, rt::Graph::capture(st, step));
      graph.emplace(std::move(gr));
    }
  }
  return r;
}

}  // namespace lj::models
