#include "exec/tp_executable.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/collective_call.h"
#include "runtime/fill.h"
#include "runtime/memory.h"

namespace lj::exec {

rt::Result<std::unique_ptr<TpExecutable>> TpExecutable::build(const Graph& g, const TpOptions& o) {
  std::unique_ptr<TpExecutable> e(new TpExecutable());
  e->source_ = &g;
  e->sharded_ = shard(g, o.tp, o.shard);
  std::vector<int> devices = o.devices;
  if (devices.empty())
    for (int r = 0; r < o.tp; ++r) devices.push_back(r);
  if (static_cast<int>(devices.size()) != o.tp)
    return rt::Error{fmt::format("tensor parallelism over {} ranks: {} devices given", o.tp, devices.size())};
  std::vector<rt::Context*> contexts;
  for (int d : devices) {
    rt::Result<rt::Context*> ctx = rt::Context::get(d);
    if (!ctx.ok())
      return rt::Error{fmt::format("tensor parallelism over {} rank{} needs {} GPU{}, one per rank; device {}: {}", o.tp, o.tp == 1 ? "" : "s", o.tp,
                                   o.tp == 1 ? "" : "s", d, ctx.message())};
    contexts.push_back(*ctx);
  }
  LJ_RT_ASSIGN(const rt::Nccl* api, rt::nccl());
  LJ_RT_ASSIGN(std::vector<rt::NcclComm> comms, rt::NcclComm::init_all(*api, devices));
  for (int r = 0; r < o.tp; ++r) {
    rt::Context& ctx = *contexts[static_cast<size_t>(r)];
    LJ_RT_TRY(ctx.make_current());
    LJ_RT_ASSIGN(rt::Stream stream, rt::Stream::create(ctx));
    e->ranks_.push_back(std::unique_ptr<Rank>(new Rank{&ctx, std::move(stream), std::move(comms[static_cast<size_t>(r)]), std::nullopt, {}, {}, {}}));
  }
  // Rank 0 compiles; the others find the same kernels in the cache (or the same bundle).
  for (int r = 0; r < o.tp; ++r) {
    Rank& rk = *e->ranks_[static_cast<size_t>(r)];
    LJ_RT_TRY(rk.ctx->make_current());
    BuildOptions bo = o.build;
    bo.comm = &rk.comm;
    rt::Result<Executable> exe = Executable::build(*rk.ctx, e->sharded_.rank_graph(r), bo);
    if (!exe.ok()) return rt::Error{fmt::format("rank {} of {} (device {}): {}", r, o.tp, devices[static_cast<size_t>(r)], exe.message())};
    rk.exe.emplace(std::move(*exe));
  }
  LJ_RT_TRY(e->ranks_[0]->ctx->make_current());
  return e;
}

// Each rank's modules, streams, graphs and buffers are released with its context current (module
// unloads act on the current context).
TpExecutable::~TpExecutable() {
  for (auto& rk : ranks_) {
    (void)rk->ctx->make_current();
    rk.reset();
  }
}

rt::Status TpExecutable::on_ranks(const std::function<rt::Status(int)>& f) {
  std::vector<rt::Status> st(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks_.size(); ++r)
    threads.emplace_back([&, r] {
      rt::Status s = ranks_[r]->ctx->make_current();
      st[r] = s.ok() ? f(static_cast<int>(r)) : s;
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < st.size(); ++r) {
    if (st[r].ok()) continue;
    // The other ranks may wait in an all_reduce this rank never reached: end them rather than hang.
    for (auto& rk : ranks_) rk->comm.abort();
    return rt::Error{fmt::format("rank {} of {}: {}", r, ranks_.size(), st[r].message())};
  }
  return {};
}

rt::Result<ValueId> TpExecutable::rank_value(int r, std::string_view name) const {
  const Graph& g = rank(r).graph();
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.value(static_cast<ValueId>(v)).name == name) return static_cast<ValueId>(v);
  return rt::Error{fmt::format("the rank graph @{} has no value %{}", g.name(), name)};
}

rt::Status TpExecutable::upload(std::string_view name, std::span<const unsigned char> full, const Bindings& b) {
  const Graph& g = *source_;
  ValueId v = -1;
  for (ValueId in : g.inputs())
    if (g.value(in).name == name) v = in;
  if (v < 0) return rt::Error{fmt::format("@{} has no input %{}", g.name(), name)};
  const TensorType& t = g.value(v).type;
  const std::vector<int64_t> shape = resolve(t.shape, b);
  if (static_cast<int64_t>(full.size()) != tensor_bytes(t.dtype, shape))
    return rt::Error{fmt::format("%{}: {} bytes given for {}[{}] ({} bytes)", name, full.size(), dtype_name(t.dtype), fmt::join(shape, ", "),
                                 tensor_bytes(t.dtype, shape))};
  const ShardSpec& spec = sharded_.inputs.at(std::string(name));
  for (int r = 0; r < ranks(); ++r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    std::vector<unsigned char> part;
    try {
      part = shard_bytes(full, t.dtype, shape, spec, ranks(), r);
    } catch (const UserError& e) {
      return rt::Error{fmt::format("%{}: {}", name, e.what())};
    }
    LJ_RT_TRY(rk.ctx->make_current());
    LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(*rk.ctx, std::max<size_t>(part.size(), 1)));
    if (!part.empty()) LJ_RT_TRY(rt::copy_to_device(rk.stream, buf.ptr(), part.data(), part.size()));
    LJ_RT_TRY(rk.stream.synchronize());  // `part` goes out of scope
    LJ_RT_ASSIGN(const ValueId rv, rank_value(r, name));
    LJ_RT_TRY(rk.exe->bind(rv, buf.ptr()));
    rk.owned.push_back(std::move(buf));
  }
  return ranks_[0]->ctx->make_current();
}

size_t TpExecutable::add_binding_set() {
  size_t i = 0;
  for (auto& rk : ranks_) i = rk->exe->add_binding_set();
  return i;
}

rt::Status TpExecutable::use_binding_set(size_t i) {
  for (auto& rk : ranks_) LJ_RT_TRY(rk->exe->use_binding_set(i));
  return {};
}

rt::Status TpExecutable::run(const Bindings& b) {
  LJ_RT_TRY(on_ranks([&](int r) { return rank(r).run(stream(r), b); }));
  return synchronize();
}

rt::Status TpExecutable::capture(const Bindings& b) {
  LJ_RT_TRY(run(b));  // every buffer exists before the capture (nothing may allocate while capturing)
  return on_ranks([&](int r) -> rt::Status {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    rk.graph.reset();
    LJ_RT_ASSIGN(rt::Graph g, rt::Graph::capture(rk.stream, [&] { return rk.exe->run(rk.stream, b); }));
    rk.graph.emplace(std::move(g));
    return {};
  });
}

rt::Status TpExecutable::capture_collectives(const Bindings& b) {
  LJ_RT_TRY(run(b));
  return on_ranks([&](int r) -> rt::Status {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    rk.collectives.reset();
    LJ_RT_ASSIGN(rt::Graph g, rt::Graph::capture(rk.stream, [&]() -> rt::Status {
      for (size_t i = 0; i < rk.exe->plan().groups.size(); ++i)
        if (is_collective(rk.exe->plan().groups[i].kind)) LJ_RT_TRY(rk.exe->run_step(rk.stream, i, b));
      return {};
    }));
    rk.collectives.emplace(std::move(g));
    return {};
  });
}

rt::Status TpExecutable::replay_each(std::optional<rt::Graph> Rank::*which, const char* what) {
  for (auto& rk : ranks_) {
    if (!((*rk).*which)) return rt::Error{fmt::format("replay: no {} captured yet", what)};
    LJ_RT_TRY(rk->ctx->make_current());
    LJ_RT_TRY(((*rk).*which)->replay(rk->stream));
  }
  return ranks_[0]->ctx->make_current();  // timing events are made in rank 0's context
}

rt::Status TpExecutable::replay() { return replay_each(&Rank::graph, "run"); }
rt::Status TpExecutable::replay_collectives() { return replay_each(&Rank::collectives, "all_reduce graph"); }

rt::Status TpExecutable::synchronize() {
  for (auto& rk : ranks_) {
    LJ_RT_TRY(rk->ctx->make_current());
    LJ_RT_TRY(rk->stream.synchronize());
  }
  return ranks_[0]->ctx->make_current();
}

rt::Status TpExecutable::poison_outputs(const Bindings& b) {
  for (int r = 0; r < ranks(); ++r) {
    const Executable& x = rank(r);
    const Graph& rg = x.graph();
    LJ_RT_TRY(context(r).make_current());
    for (ValueId v : rg.outputs()) {
      const ValueId buf = x.layout(v).buffer;
      if (std::find(rg.inputs().begin(), rg.inputs().end(), buf) != rg.inputs().end()) continue;
      const TensorType& t = rg.value(buf).type;
      LJ_RT_ASSIGN(const CUdeviceptr at, x.buffer_address(v, b));
      LJ_RT_TRY(rt::fill_poison(stream(r), at, static_cast<size_t>(tensor_bytes(t.dtype, resolve(t.shape, b))),
                                static_cast<size_t>(dtype_bytes(t.dtype))));
    }
  }
  return synchronize();
}

rt::Result<HostTensor> TpExecutable::download(size_t i, const Bindings& b, int rank_index) {
  const Graph& rg = rank(0).graph();
  if (i >= rg.outputs().size()) return rt::Error{fmt::format("@{} has {} outputs, no output {}", rg.name(), rg.outputs().size(), i)};
  const ShardSpec& spec = sharded_.outputs.at(i);
  std::vector<HostTensor> parts;
  for (int r = 0; r < ranks(); ++r) {
    if (!spec.split() && r != (rank_index < 0 ? 0 : rank_index)) continue;
    LJ_RT_TRY(context(r).make_current());
    LJ_RT_ASSIGN(HostTensor t, rank(r).download(stream(r), rank(r).graph().outputs()[i], b));
    parts.push_back(std::move(t));
  }
  LJ_RT_TRY(context(0).make_current());
  if (!spec.split()) return parts.at(0);
  return gather_tensor(parts, spec, ranks());
}

}  // namespace lj::exec
