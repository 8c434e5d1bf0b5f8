// Executable: plan -> kernels -> cubins -> modules once; per run, the arena layout for the bound
// symbol values and one launch per group.
#include "exec/executable.h"

#include "compiler/dump.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <set>

#include <fmt/format.h>

#include <nvtx3/nvToolsExt.h>

#include "codegen/collective_call.h"
#include "compiler/fusion/tensor_layout.h"
#include "jit/bundle.h"
#include "jit/compile_plan.h"
#include "runtime/fill.h"
#include "runtime/kernel_args.h"
#include "runtime/host_values.h"
#include "runtime/launch.h"
#include "runtime/nccl.h"

namespace lj::exec {

namespace {

size_t value_bytes(const Graph& g, ValueId v, const Bindings& b) {
  const TensorType& t = g.value(v).type;
  return static_cast<size_t>(storage_bytes(t.dtype, numel(resolve(t.shape, b))));
}

bool contains(const std::vector<ValueId>& xs, ValueId v) { return std::find(xs.begin(), xs.end(), v) != xs.end(); }

}  // namespace

rt::Result<Executable> Executable::build(rt::Context& ctx, const Graph& source, const BuildOptions& opts) {
  Executable e;
  e.ctx_ = &ctx;
  Lowered lowered = jit::plan(source, opts.fusion, opts.hint);
  e.graph_ = lowered.graph;
  e.plan_ = std::move(lowered.plan);
  const Graph& g = *e.graph_;
  e.layouts_ = plan_layouts(g, e.plan_);  // a returned view the plan copies lives in its own buffer

  // Arch-specific where the device has it (sm_90a: the wgmma GEMM); with a bundle, the bundle's
  // target this device runs best.
  jit::PlanCompileOptions po;
  po.hint = opts.hint;
  po.use_tuned = opts.use_tuned;
  po.use_cache = opts.use_cache;
  po.progress = opts.progress;
  jit::JitTarget target;
  std::string bundle_image;
  if (opts.bundle) {
    LJ_RT_TRY(opts.bundle->check_compatible());
    LJ_RT_ASSIGN(const jit::BundleChoice choice, jit::choose_bundle_target(*opts.bundle, ctx.info().cc(), opts.arch_specific));
    target = jit::bundle_jit_target(opts.bundle->targets[choice.target]);
    po.bundle = opts.bundle.get();
    po.bundle_ptx = choice.ptx;
    bundle_image = fmt::format("{} from bundle {}", choice.why, opts.bundle->path);
  } else {
    LJ_RT_ASSIGN(target, jit::JitTarget::of_device(ctx, opts.arch_specific));
  }
  rt::Result<jit::CompiledPlan> compiled = rt::Error{"not compiled"};
  try {
    compiled = jit::compile_plan(target, g, e.plan_, po);
  } catch (const UserError& err) {
    return rt::Error{err.what()};
  }
  if (!compiled.ok()) return compiled.status();
  e.compile_seconds_ = compiled->compile_seconds;
  e.cache_hits_ = compiled->cache_hits;
  LJ_RT_TRY(e.check_collectives(opts.comm));
  // Kernels and NCCL calls interleaved in plan order: compile_plan keeps the collectives apart.
  size_t next_kernel = 0, next_collective = 0;
  for (const FusionGroup& grp : e.plan_.groups) {
    if (is_collective(grp.kind)) {
      e.steps_.push_back(Step{std::nullopt, rt::Kernel{}, true});
      e.origins_.push_back(KernelOrigin{"(NCCL)", false, fmt::format("ncclAllReduce over {} ranks", opts.comm->ranks())});
      e.kernels_.push_back(std::move(compiled->collectives.at(next_collective++)));
      continue;
    }
    jit::CompiledGroup& cg = compiled->groups.at(next_kernel++);
    LJ_RT_ASSIGN(rt::Module mod, rt::Module::load(ctx, cg.compiled.program.image()));
    LJ_RT_ASSIGN(rt::Kernel kern, mod.kernel(cg.kernel.name));
    e.steps_.push_back(Step{std::move(mod), kern, false});
    e.origins_.push_back(KernelOrigin{cg.config_source, cg.compiled.cache_hit,
                                      opts.bundle              ? bundle_image
                                      : cg.compiled.cache_hit ? "cubin from the cache"
                                                               : "compiled"});
    e.kernels_.push_back(std::move(cg.kernel));
  }
  e.comm_ = opts.comm;
  e.scratch_.resize(e.steps_.size());
  e.scratch_used_.resize(e.steps_.size());
  const char* pdl = std::getenv("LAYERJIT_PDL");
  const std::string_view pdl_env = pdl ? pdl : "";
  const bool pdl_env_set = pdl_env == "0" || pdl_env == "1" || pdl_env == "all";
  if (pdl && !pdl_env_set)
    return rt::Error{fmt::format("LAYERJIT_PDL={}: expected 0 (off), 1 (on for the kernels that gain) or all (every kernel)", pdl_env)};
  e.programmatic_ = (pdl_env_set ? pdl_env != "0" : opts.programmatic_launch) && ctx.info().cc() >= 90;
  e.programmatic_all_ = pdl_env == "all";
  e.log_dispatch_ = log_enabled(LogCategory::Dispatch);
  return e;
}

rt::Status Executable::check_collectives(const rt::NcclComm* comm) const {
  const Graph& g = *graph_;
  for (const FusionGroup& grp : plan_.groups) {
    if (!is_collective(grp.kind)) continue;
    const Node& n = g.node(grp.nodes.at(0));
    const int64_t ranks = n.attrs.get_int("ranks");
    if (!comm)
      return rt::Error{fmt::format("@{} sums %{} over {} ranks (all_reduce, group {}): it is a rank graph of tensor parallelism; "
                                   "build it with a communicator (lj::TensorParallel, `layerjit run --tp {}`), not alone",
                                   g.name(), g.value(n.results.at(0)).name, ranks, grp.id, ranks)};
    if (comm->ranks() != ranks)
      return rt::Error{fmt::format("@{}: the all_reduce of %{} (group {}) is over {} ranks, the communicator has {}", g.name(),
                                   g.value(n.results.at(0)).name, grp.id, ranks, comm->ranks())};
  }
  return {};
}

rt::Status Executable::bind(ValueId v, CUdeviceptr ptr) {
  const Graph& g = *graph_;
  if (v < 0 || static_cast<size_t>(v) >= layouts_.size()) return rt::Error{fmt::format("bind: no value {} in @{}", v, g.name())};
  const ValueId buf = layouts_[static_cast<size_t>(v)].buffer;
  if (!contains(g.inputs(), buf) && !contains(g.outputs(), buf))
    return rt::Error{fmt::format("bind: %{} of @{} is an intermediate (the executable places it); bind inputs and outputs",
                                 g.value(v).name, g.name())};
  // The same memory again (a framework passing its tensors each call): nothing changes, so the
  // prepared weights and the arena layout stay, and a run under stream capture allocates nothing.
  if (auto it = cur().external.find(buf); it != cur().external.end() && it->second == ptr) return {};
  cur().external[buf] = ptr;
  planned_for_.clear();  // a bound output leaves the arena
  if (g.value(buf).is_param) cur().weights_ready = false;
  return {};
}

size_t Executable::add_binding_set() {
  sets_.emplace_back();
  return sets_.size() - 1;
}

rt::Status Executable::use_binding_set(size_t i) {
  if (i >= sets_.size())
    return rt::Error{fmt::format("use_binding_set: @{} has {} binding set{}, no set {}", graph_->name(), sets_.size(),
                                 sets_.size() == 1 ? "" : "s", i)};
  if (i == current_) return {};
  // The arena layout depends on which values are bound, not where: sets that bind the same values
  // share it, so switching between a model's layers re-plans (and allocates) nothing.
  auto keys = [](const BindingSet& s) {
    std::vector<ValueId> k;
    for (const auto& [v, ptr] : s.external) k.push_back(v);
    return k;
  };
  if (keys(sets_[i]) != keys(sets_[current_])) planned_for_.clear();
  current_ = i;
  return {};
}

rt::Status Executable::prepare_weights(rt::Stream& stream, const Bindings& b) {
  const Graph& g = *graph_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!plan_.groups[i].prepare) continue;
    for (ValueId v : plan_.groups[i].outputs) {
      const size_t bytes = value_bytes(g, v, b);
      auto it = cur().prepared.find(v);
      if (it != cur().prepared.end() && it->second.bytes() >= bytes) continue;
      cur().prepared.erase(v);
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(*ctx_, std::max<size_t>(bytes, 1)));
      cur().prepared.emplace(v, std::move(buf));
    }
  }
  cur().weights_ready = true;  // before the launches: launch() looks the buffers up
  for (const auto& [v, buf] : cur().prepared) cur().prepared_bytes[v] = value_bytes(g, v, b);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (!plan_.groups[i].prepare) continue;
    if (rt::Status st = launch(stream, i, b, false); !st.ok()) {
      cur().weights_ready = false;
      return st;
    }
  }
  return {};
}

bool Executable::weights_current(const Bindings& b) const {
  if (!cur().weights_ready) return false;
  // A param with symbols in its shape (rare: weights are usually constant) is prepared again when a
  // run's sizes change it.
  for (const auto& [v, bytes] : cur().prepared_bytes)
    if (value_bytes(*graph_, v, b) != bytes) return false;
  return true;
}

size_t Executable::launches_per_run() const {
  return static_cast<size_t>(std::count_if(plan_.groups.begin(), plan_.groups.end(), [](const FusionGroup& grp) { return !grp.prepare; }));
}

std::vector<ValueId> Executable::written_inputs() const {
  std::vector<ValueId> out;
  for (const GeneratedKernel& k : kernels_)
    for (const KernelParam& p : k.params)
      if (p.kind == KernelParam::Kind::Buffer && p.written && contains(graph_->inputs(), p.buffer) && !contains(out, p.buffer))
        out.push_back(p.buffer);
  return out;
}

std::set<ValueId> Executable::outside_arena() const {
  std::set<ValueId> out;
  for (const auto& [buf, ptr] : cur().external) out.insert(buf);
  for (const FusionGroup& grp : plan_.groups)
    if (grp.prepare) out.insert(grp.outputs.begin(), grp.outputs.end());
  return out;
}

MemoryPlan Executable::memory_plan(const Bindings& b) const { return plan_memory(*graph_, layouts_, kernels_, outside_arena(), b); }

Footprint Executable::footprint(const Bindings& b) const {
  Footprint f = plan_footprint(*graph_, layouts_, kernels_, outside_arena(), b);
  for (const FusionGroup& grp : plan_.groups)
    if (grp.prepare)
      for (ValueId v : grp.outputs) f.prepared += value_bytes(*graph_, v, b);
  return f;
}

rt::Result<CUdeviceptr> Executable::buffer_address(ValueId v, const Bindings& b) const {
  const ValueId buf = layouts_[static_cast<size_t>(v)].buffer;
  if (auto ext = cur().external.find(buf); ext != cur().external.end()) return ext->second;
  if (auto pr = cur().prepared.find(buf); pr != cur().prepared.end()) return pr->second.ptr();
  const MemoryPlan mp = planned_for_ == b.values && !planned_.offset.empty() ? planned_ : memory_plan(b);  // the last run's layout
  auto it = mp.offset.find(buf);
  if (it == mp.offset.end() || !arena_ || arena_->bytes() < mp.arena_bytes)
    return rt::Error{fmt::format("%{} of @{} has no memory yet: bind it, or run first", graph_->value(v).name, graph_->name())};
  return arena_->ptr() + it->second;
}

rt::Result<HostTensor> Executable::download(rt::Stream& stream, ValueId v, const Bindings& b) const {
  const Graph& g = *graph_;
  const TensorLayout& l = layouts_[static_cast<size_t>(v)];
  LJ_RT_ASSIGN(CUdeviceptr base, buffer_address(v, b));
  std::vector<unsigned char> bytes(value_bytes(g, l.buffer, b));
  LJ_RT_TRY(rt::copy_to_host(stream, bytes.data(), base, bytes.size()));
  LJ_RT_TRY(stream.synchronize());
  auto eval = [&](const DimProduct& p) {
    int64_t x = p.constant;
    for (const std::string& s : p.symbols) x *= *b.get(s);
    return x;
  };
  HostTensor t(g.value(v).type.dtype, resolve(g.value(v).type.shape, b));
  std::vector<int64_t> stride;
  for (const DimProduct& s : l.strides) stride.push_back(eval(s));
  const int64_t offset = eval(l.offset);
  std::vector<int64_t> idx(t.shape.size(), 0);
  for (size_t i = 0; i < t.data.size(); ++i) {
    int64_t at = offset;
    for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * stride[d];
    t.data[i] = rt::decode_at(t.dtype, bytes.data(), static_cast<size_t>(at));
    for (size_t d = idx.size(); d-- > 0;) {  // the next index in row-major order
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return t;
}

rt::Status Executable::prepare(const Bindings& b) {
  const Graph& g = *graph_;
  for (const std::string& s : g.symbols())
    if (!b.get(s)) return rt::Error{fmt::format("run @{}: symbol {} has no value", g.name(), s)};
  if (planned_for_ != b.values || planned_.offset.empty()) {
    planned_ = memory_plan(b);
    planned_for_ = b.values;
  }
  if (!arena_ || arena_->bytes() < planned_.arena_bytes) {
    arena_.reset();
    LJ_RT_ASSIGN(rt::DeviceBuffer a, rt::DeviceBuffer::allocate(*ctx_, std::max<size_t>(planned_.arena_bytes, 1)));
    arena_ = std::move(a);
  }
  return {};
}

rt::Status Executable::run(rt::Stream& stream, const Bindings& b) {
  LJ_RT_TRY(prepare(b));
  if (!weights_current(b)) LJ_RT_TRY(prepare_weights(stream, b));
  const bool log = log_dispatch_ && logged_for_ != b.values;
  if (log) {
    logged_for_ = b.values;
    std::string sizes;
    for (const auto& [s, v] : b.values) sizes += fmt::format(" {}={}", s, v);
    std::fprintf(stderr, "layerjit dispatch @%s%s: %zu kernels (%zu preparing weights, not per call)\n", graph_->name().c_str(),
                 sizes.c_str(), launches_per_run(), kernels_.size() - launches_per_run());
  }
  bool after_kernel = false;  // the first kernel of a call follows the caller's work: never launched early
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (plan_.groups[i].prepare) continue;  // once per weights: prepare_weights
    if (log && steps_[i].collective) {
      std::fprintf(stderr, "  group %d %s: %s\n", plan_.groups[i].id, kernels_[i].name.c_str(), origins_[i].image.c_str());
    } else if (log) {
      const GeneratedKernel& k = kernels_[i];
      const KernelOrigin& o = origins_[i];
      std::fprintf(stderr, "  group %d %s: %s%s; %s; grid %lld x %d threads, %d B shared\n", plan_.groups[i].id, k.name.c_str(),
                   k.config.empty() ? "" : (k.config + ", ").c_str(), o.config_source.c_str(), o.image.c_str(),
                   static_cast<long long>(k.launch.blocks(b)), k.launch.threads, k.launch.shared_bytes);
    }
    LJ_RT_TRY(launch(stream, i, b, after_kernel));
    after_kernel = !steps_[i].collective;  // never launched early behind NCCL's kernel
  }
  return {};
}

rt::Status Executable::run_step(rt::Stream& stream, size_t i, const Bindings& b) {
  if (i >= steps_.size()) return rt::Error{fmt::format("run_step: @{} has {} kernels, no kernel {}", graph_->name(), steps_.size(), i)};
  LJ_RT_TRY(prepare(b));
  if (!weights_current(b)) LJ_RT_TRY(prepare_weights(stream, b));
  return launch(stream, i, b, false);
}

rt::Status Executable::launch_collective(rt::Stream& stream, size_t i, const Bindings& b) {
  const GeneratedKernel& k = kernels_[i];  // collective_call: [send, recv]
  const ValueId send = k.params.at(0).buffer, recv = k.params.at(1).buffer;
  auto address = [&](ValueId v) -> rt::Result<CUdeviceptr> {
    if (auto it = planned_.offset.find(v); it != planned_.offset.end()) return arena_->ptr() + it->second;
    if (auto ext = cur().external.find(v); ext != cur().external.end()) return ext->second;
    return rt::Error{fmt::format("run @{}: %{} is not bound (the all_reduce of group {} reads or writes it)", graph_->name(),
                                 graph_->value(v).name, plan_.groups[i].id)};
  };
  LJ_RT_ASSIGN(const CUdeviceptr from, address(send));
  LJ_RT_ASSIGN(const CUdeviceptr to, address(recv));
  const TensorType& t = graph_->value(recv).type;
  nvtxRangePushA(k.name.c_str());
  rt::Status st = comm_->all_reduce_sum(from, to, static_cast<size_t>(numel(resolve(t.shape, b))), t.dtype, stream.handle());
  nvtxRangePop();
  return st;
}

rt::Status Executable::launch(rt::Stream& stream, size_t i, const Bindings& b, bool after_kernel) {
  if (steps_[i].collective) return launch_collective(stream, i, b);
  const Graph& g = *graph_;
  const MemoryPlan& mp = planned_;
  const GeneratedKernel& k = kernels_[i];
  rt::ArgSources src;
  src.buffer = [&](ValueId v) -> rt::Result<CUdeviceptr> {
    if (auto it = mp.offset.find(v); it != mp.offset.end()) return arena_->ptr() + it->second;
    if (auto it = cur().prepared.find(v); it != cur().prepared.end()) return it->second.ptr();
    if (auto ext = cur().external.find(v); ext != cur().external.end()) return ext->second;
    return rt::Error{fmt::format("run @{}: %{} is not bound (group {} reads or writes it)", g.name(), g.value(v).name,
                                 plan_.groups[i].id)};
  };
  src.scratch = [&](size_t bytes) -> rt::Result<CUdeviceptr> {
    auto& sc = scratch_[i];
    if (!sc || sc->bytes() < bytes) {
      sc.reset();
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(*ctx_, bytes));
      LJ_RT_TRY(rt::fill_zero(stream, buf.ptr(), bytes));
      sc = std::move(buf);
    } else if (bytes != scratch_used_[i]) {
      LJ_RT_TRY(rt::fill_zero(stream, sc->ptr(), bytes));  // counters move with the grid (see scratch_)
    }
    scratch_used_[i] = bytes;
    return sc->ptr();
  };
  LJ_RT_ASSIGN(rt::KernelArgs args, rt::pack_kernel_args(*ctx_, k, b, src));
  const auto blocks = static_cast<unsigned>(k.launch.blocks(b));
  // An NVTX range per launch, named after the kernel (lj_<graph>_g<group>_<kind>): Nsight Systems
  // and Compute show our names. Without a tool attached the calls are no-ops.
  nvtxRangePushA(k.name.c_str());
  rt::LaunchConfig lc = rt::LaunchConfig::linear(blocks, static_cast<unsigned>(k.launch.threads), static_cast<unsigned>(k.launch.shared_bytes));
  // Early only where it pays (LaunchRule::early; every kernel with LAYERJIT_PDL=all, to measure) and
  // only after a kernel of this call, so the first starts after the caller's work as it would without.
  lc.programmatic = programmatic_ && after_kernel && (k.launch.early || programmatic_all_);
  rt::Status launched = rt::launch(stream, steps_[i].kernel, lc, args);
  nvtxRangePop();
  LJ_RT_TRY(launched);
  return {};
}

rt::Result<rt::Graph> Executable::capture(rt::Stream& stream, const Bindings& b) {
  LJ_RT_TRY(run(stream, b));  // allocates what the plan needs at these sizes: nothing may allocate while capturing
  LJ_RT_TRY(stream.synchronize());
  return rt::Graph::capture(stream, [&] { return run(stream, b); });
}

}  // namespace lj::exec
