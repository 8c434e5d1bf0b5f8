// The public API (layerjit/layerjit.h) over the internal layers: jit/ plans and compiles, exec/
// runs. Everything here translates: internal Result errors become RuntimeError (or UserError where
// the input is at fault), internal handles stay behind the pimpl.
#include "layerjit/layerjit.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cache/format.h"
#include "compiler/fusion/fusion_group.h"
#include "compiler/fusion/tensor_layout.h"
#include "exec/executable.h"
#include "exec/safetensors.h"
#include "jit/bundle.h"
#include "jit/compile_plan.h"
#include "jit/target.h"
#include "runtime/context.h"
#include "runtime/graph.h"
#include "runtime/host_values.h"
#include "runtime/memory.h"
#include "runtime/stream.h"

namespace lj {
namespace {

template <class T>
T take(rt::Result<T> r) {
  if (!r.ok()) throw RuntimeError(r.message());
  return std::move(r).value();
}

void check(const rt::Status& s) {
  if (!s.ok()) throw RuntimeError(s.message());
}

std::vector<std::string> names_of(const Graph& g, const std::vector<ValueId>& vs) {
  std::vector<std::string> out;
  out.reserve(vs.size());
  for (ValueId v : vs) out.push_back(g.value(v).name);
  return out;
}

FusionOptions fusion_options(bool fuse, const Bindings& sizes) {
  FusionOptions fo;
  fo.fuse = fuse;
  fo.sizes = sizes;
  return fo;
}

KernelInfo kernel_info(const GeneratedKernel& k, const std::string& config_source) {
  KernelInfo info;
  info.group = k.group;
  info.name = k.name;
  info.config = k.config;
  info.config_source = config_source;
  info.source = k.source;
  return info;
}

// A graph input or output by name; outputs aliasing an input resolve to it in Executable::bind.
ValueId find_value(const Graph& g, std::string_view name, std::string_view what) {
  auto named = [&](ValueId v) { return g.value(v).name == name; };
  if (auto it = std::find_if(g.inputs().begin(), g.inputs().end(), named); it != g.inputs().end()) return *it;
  if (auto it = std::find_if(g.outputs().begin(), g.outputs().end(), named); it != g.outputs().end()) return *it;
  std::string known;
  for (ValueId v : g.inputs()) known += fmt::format(" %{}", g.value(v).name);
  for (ValueId v : g.outputs())
    if (std::find(g.inputs().begin(), g.inputs().end(), v) == g.inputs().end()) known += fmt::format(" %{}", g.value(v).name);
  throw UserError(fmt::format("{}: @{} has no input or output named '{}' (it has:{})", what, g.name(), name, known));
}

rt::Stream borrowed(const rt::Context& ctx, StreamHandle s) { return rt::Stream::wrap(ctx, static_cast<CUstream>(s)); }

}  // namespace

std::string_view version() { return cache::layerjit_version(); }

// ---- plan ---------------------------------------------------------------------------------------

PlanInfo plan(const Graph& g, const PlanSettings& settings) {
  const Lowered l = jit::plan(g, fusion_options(settings.fuse, settings.sizes), settings.sizes);
  const Graph& lg = *l.graph;
  PlanInfo info;
  info.graph = g.name();
  info.notes = l.plan.notes;
  for (const FusionGroup& grp : l.plan.groups) {
    PlannedGroup pg;
    pg.id = grp.id;
    pg.kind = std::string(group_kind_name(grp.kind));
    for (NodeId n : grp.nodes) pg.nodes.push_back(print_node(lg, n));
    pg.inputs = names_of(lg, grp.inputs);
    pg.outputs = names_of(lg, grp.outputs);
    pg.reasons = grp.why;
    pg.prepare = grp.prepare;
    try {
      const GroupCost c = group_cost(lg, grp, settings.sizes);
      pg.flops = c.flops;
      pg.bytes = c.bytes;
    } catch (const UserError&) {
      // A symbol the cost needs is unbound: the counts stay 0, as documented.
    }
    info.groups.push_back(std::move(pg));
  }
  info.report = print_plan(lg, l.plan, settings.sizes, &g);
  return info;
}

// ---- compile ------------------------------------------------------------------------------------

CompiledKernels compile(const Graph& g, const CompileSettings& settings) {
  rt::Result<jit::JitTarget> target = jit::JitTarget::of_arch(settings.arch);
  if (!target.ok()) throw UserError(fmt::format("compile @{}: {}", g.name(), target.message()));
  const Lowered l = jit::plan(g, fusion_options(settings.fuse, settings.sizes), settings.sizes);
  jit::PlanCompileOptions o;
  o.hint = settings.sizes;
  o.use_cache = settings.use_cache;
  o.want_ptx = settings.want_ptx;
  jit::CompiledPlan cp = take(jit::compile_plan(*target, *l.graph, l.plan, o));
  CompiledKernels out;
  out.arch = cp.target.target.name();
  out.seconds = cp.compile_seconds;
  out.cache_hits = cp.cache_hits;
  for (jit::CompiledGroup& cg : cp.groups) {
    KernelInfo k = kernel_info(cg.kernel, cg.config_source);
    k.ptx = std::move(cg.compiled.program.ptx);
    k.cubin.assign(cg.compiled.program.cubin.begin(), cg.compiled.program.cubin.end());
    k.cache_hit = cg.compiled.cache_hit;
    out.kernels.push_back(std::move(k));
  }
  return out;
}

// ---- tensors ------------------------------------------------------------------------------------

Bindings sizes_of(const Graph& g, const std::vector<TensorRef>& tensors) {
  Bindings b;
  std::map<std::string, std::string> given_by;  // symbol -> the tensor that gave it
  std::vector<std::string> seen;
  for (const TensorRef& t : tensors) {
    if (std::find(seen.begin(), seen.end(), t.name) != seen.end())
      throw UserError(fmt::format("tensor '{}' is given twice", t.name));
    seen.push_back(t.name);
    const ValueInfo& v = g.value(find_value(g, t.name, "tensor"));
    const TensorType& type = v.type;
    if (t.dtype != type.dtype)
      throw UserError(fmt::format("tensor '{}': dtype {}, but @{} declares %{}: {}", t.name, dtype_name(t.dtype), g.name(), v.name, type.str()));
    if (static_cast<int>(t.shape.size()) != type.rank())
      throw UserError(fmt::format("tensor '{}': {} dimensions, but @{} declares %{}: {}", t.name, t.shape.size(), g.name(), v.name, type.str()));
    for (size_t i = 0; i < t.shape.size(); ++i) {
      const Dim& d = type.shape[i];
      const int64_t n = t.shape[i];
      if (n < 0) throw UserError(fmt::format("tensor '{}': dimension {} is negative ({})", t.name, i, n));
      if (!d.is_symbol()) {
        if (n != d.value())
          throw UserError(fmt::format("tensor '{}': dimension {} is {}, but @{} declares %{}: {}", t.name, i, n, g.name(), v.name, type.str()));
        continue;
      }
      if (std::optional<int64_t> had = b.get(d.symbol())) {
        if (*had != n)
          throw UserError(fmt::format("tensor '{}': dimension {} gives {}={}, but '{}' gave {}={}", t.name, i, d.symbol(), n,
                                      given_by[d.symbol()], d.symbol(), *had));
      } else {
        b.set(d.symbol(), n);
        given_by[d.symbol()] = t.name;
      }
    }
  }
  for (const std::string& s : g.symbols())
    if (!b.get(s)) {
      std::string with;
      for (ValueId v : g.inputs())
        for (const Dim& d : g.value(v).type.shape)
          if (d.is_symbol() && d.symbol() == s && with.find("%" + g.value(v).name) == std::string::npos)
            with += fmt::format(" %{}", g.value(v).name);
      throw UserError(fmt::format("symbol {} of @{} is given by no tensor (pass one of:{})", s, g.name(), with));
    }
  return b;
}

std::string aliased_input(const Graph& g, std::string_view output) {
  const ValueId v = find_value(g, output, "aliased_input");
  const ValueId owner = memory_owner(g, v);
  if (owner == v || std::find(g.inputs().begin(), g.inputs().end(), owner) == g.inputs().end()) return "";
  return g.value(owner).name;
}

// ---- devices ------------------------------------------------------------------------------------

namespace {
rt::Context& context_of(void* p) { return *static_cast<rt::Context*>(p); }
}  // namespace

Device Device::open(int ordinal) {
  Device d;
  d.ctx_ = take(rt::Context::get(ordinal));
  d.ordinal_ = ordinal;
  return d;
}

bool Device::available() { return rt::Context::get(0).ok(); }

std::string Device::name() const { return context_of(ctx_).info().name; }
int Device::compute_capability() const { return context_of(ctx_).info().cc_major * 10 + context_of(ctx_).info().cc_minor; }
int Device::sm_count() const { return context_of(ctx_).info().sm_count; }
void Device::synchronize() const { check(context_of(ctx_).synchronize()); }

// ---- device tensors -----------------------------------------------------------------------------

struct DeviceTensor::Impl {
  rt::Context* ctx = nullptr;
  rt::DeviceBuffer buf;
};

DeviceTensor::DeviceTensor(std::unique_ptr<Impl> impl, DType dtype, std::vector<int64_t> shape)
    : impl_(std::move(impl)), dtype_(dtype), shape_(std::move(shape)) {}
DeviceTensor::DeviceTensor(DeviceTensor&&) noexcept = default;
DeviceTensor& DeviceTensor::operator=(DeviceTensor&&) noexcept = default;
DeviceTensor::~DeviceTensor() = default;

DeviceTensor DeviceTensor::empty(const Device& device, DType dtype, std::vector<int64_t> shape) {
  for (int64_t d : shape)
    if (d < 0) throw UserError(fmt::format("DeviceTensor::empty: a negative dimension ({})", d));
  rt::Context& ctx = context_of(device.ctx_);
  check(ctx.make_current());
  const size_t bytes = static_cast<size_t>(tensor_bytes(dtype, shape));
  auto impl = std::make_unique<Impl>(Impl{&ctx, take(rt::DeviceBuffer::allocate(ctx, std::max<size_t>(bytes, 1)))});
  return DeviceTensor(std::move(impl), dtype, std::move(shape));
}

DeviceTensor DeviceTensor::upload(const Device& device, const HostTensor& t) {
  DeviceTensor d = empty(device, t.dtype, t.shape);
  d.write(t);
  return d;
}

void DeviceTensor::write(const HostTensor& t) {
  if (numel(t.shape) != t.numel())
    throw UserError(fmt::format("DeviceTensor::write: {} values for a shape of {}", t.numel(), numel(t.shape)));
  if (t.dtype != dtype_ || t.shape != shape_)
    throw UserError(fmt::format("DeviceTensor::write: a {}[{}] tensor into a {}[{}] one", dtype_name(t.dtype), fmt::join(t.shape, ", "),
                                dtype_name(dtype_), fmt::join(shape_, ", ")));
  std::vector<unsigned char> bytes(static_cast<size_t>(tensor_bytes(t.dtype, t.shape)));
  if (std::optional<size_t> bad = rt::encode_tensor(t, bytes.data()))
    throw UserError(fmt::format("DeviceTensor::write: element {} ({}) is not exact in {}: round_to_dtype() first", *bad,
                                t.data[*bad], dtype_name(t.dtype)));
  check(impl_->ctx->make_current());
  // After all earlier work on the device, like download(): the caller may have a run in flight.
  check(impl_->ctx->synchronize());
  rt::Stream s = take(rt::Stream::create(*impl_->ctx));
  if (!bytes.empty()) check(rt::copy_to_device(s, impl_->buf.ptr(), bytes.data(), bytes.size()));
  check(s.synchronize());
}

DevicePtr DeviceTensor::data() const { return impl_->buf.ptr(); }

HostTensor DeviceTensor::download() const {
  check(impl_->ctx->make_current());
  check(impl_->ctx->synchronize());
  HostTensor t(dtype_, shape_);
  std::vector<unsigned char> bytes(static_cast<size_t>(tensor_bytes(dtype_, shape_)));
  rt::Stream s = take(rt::Stream::create(*impl_->ctx));
  if (!bytes.empty()) check(rt::copy_to_host(s, bytes.data(), impl_->buf.ptr(), bytes.size()));
  check(s.synchronize());
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = rt::decode_at(dtype_, bytes.data(), i);
  return t;
}

// ---- executables --------------------------------------------------------------------------------

struct Executable::Impl {
  rt::Context* ctx = nullptr;
  std::shared_ptr<const Graph> source;  // the caller's graph, copied: exec::Executable keeps a reference
  std::optional<exec::Executable> exe;
  std::vector<rt::DeviceBuffer> weights;  // load_weights' uploads

  ValueId value(std::string_view name, std::string_view what) const { return find_value(exe->graph(), name, what); }
};

struct CapturedRun::Impl {
  const rt::Context* ctx = nullptr;
  rt::Graph graph;
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::Executable(Executable&&) noexcept = default;
Executable& Executable::operator=(Executable&&) noexcept = default;
Executable::~Executable() = default;

Executable Executable::build(const Device& device, const Graph& g, const ExecutableSettings& settings) {
  auto impl = std::make_unique<Impl>();
  impl->ctx = &context_of(device.ctx_);
  check(impl->ctx->make_current());
  impl->source = std::make_shared<const Graph>(g);
  exec::BuildOptions o;
  o.fusion = fusion_options(settings.fuse, settings.hint);
  o.hint = settings.hint;
  o.use_tuned = settings.use_tuned;
  if (!settings.bundle.empty()) o.bundle = std::make_shared<const jit::Bundle>(take(jit::Bundle::read(settings.bundle)));
  impl->exe.emplace(take(exec::Executable::build(*impl->ctx, *impl->source, o)));
  return Executable(std::move(impl));
}

const Graph& Executable::graph() const { return impl_->exe->graph(); }
size_t Executable::launches_per_run() const { return impl_->exe->launches_per_run(); }

std::vector<KernelInfo> Executable::kernels() const {
  std::vector<KernelInfo> out;
  const auto& ks = impl_->exe->kernels();
  for (size_t i = 0; i < ks.size(); ++i) {
    KernelInfo k = kernel_info(ks[i], impl_->exe->origins()[i].config_source);
    k.cache_hit = impl_->exe->origins()[i].cache_hit;
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<std::string> Executable::written_inputs() const { return names_of(impl_->exe->graph(), impl_->exe->written_inputs()); }

void Executable::bind(std::string_view name, DevicePtr ptr) {
  check(impl_->exe->bind(impl_->value(name, "bind"), static_cast<CUdeviceptr>(ptr)));
}

std::vector<std::string> Executable::load_weights(const std::string& path) {
  const exec::SafetensorsFile file = exec::SafetensorsFile::open(path);
  std::vector<std::string> unused;
  const Graph& g = impl_->exe->graph();
  const std::vector<exec::WeightMatch> matches = exec::match_weights(*impl_->source, file, &unused);
  check(impl_->ctx->make_current());
  rt::Stream stream = take(rt::Stream::create(*impl_->ctx));
  rt::HostStaging staging = take(rt::HostStaging::create(*impl_->ctx));
  for (const exec::WeightMatch& m : matches) {
    const std::vector<unsigned char> bytes = file.read_bytes(*m.tensor);
    rt::DeviceBuffer buf = take(rt::DeviceBuffer::allocate(*impl_->ctx, std::max<size_t>(bytes.size(), 1)));
    if (!bytes.empty()) check(staging.upload(stream, buf.ptr(), bytes.data(), bytes.size()));
    check(impl_->exe->bind(find_value(g, g.value(m.param).name, "load_weights"), buf.ptr()));
    impl_->weights.push_back(std::move(buf));
  }
  check(stream.synchronize());
  return unused;
}

void Executable::run(const Bindings& sizes, StreamHandle stream) {
  check(impl_->ctx->make_current());
  rt::Stream s = borrowed(*impl_->ctx, stream);
  check(impl_->exe->run(s, sizes));
}

Bindings Executable::run(const std::vector<TensorRef>& tensors, StreamHandle stream) {
  Bindings sizes = sizes_of(*impl_->source, tensors);
  for (const TensorRef& t : tensors) bind(t.name, t.data);
  run(sizes, stream);
  return sizes;
}

CapturedRun Executable::capture(const Bindings& sizes, StreamHandle stream) {
  check(impl_->ctx->make_current());
  rt::Stream caller = borrowed(*impl_->ctx, stream);
  // The driver cannot capture the legacy or per-thread default stream (PyTorch's current stream
  // unless the caller picked another): capture on a private stream after the caller's work. The
  // graph replays on any stream, so where it was recorded does not matter.
  const auto h = reinterpret_cast<std::uintptr_t>(stream);
  const bool default_stream = h == 0 || h == reinterpret_cast<std::uintptr_t>(CU_STREAM_LEGACY) ||
                              h == reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD);
  rt::Graph graph = [&] {
    if (!default_stream) return take(impl_->exe->capture(caller, sizes));
    check(caller.synchronize());
    rt::Stream own = take(rt::Stream::create(*impl_->ctx));
    rt::Graph g = take(impl_->exe->capture(own, sizes));
    check(own.synchronize());
    return g;
  }();
  return CapturedRun(std::make_unique<CapturedRun::Impl>(CapturedRun::Impl{impl_->ctx, std::move(graph)}));
}

HostTensor Executable::download(std::string_view name, const Bindings& sizes, StreamHandle stream) const {
  check(impl_->ctx->make_current());
  rt::Stream s = borrowed(*impl_->ctx, stream);
  return take(impl_->exe->download(s, impl_->value(name, "download"), sizes));
}

CapturedRun::CapturedRun(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CapturedRun::CapturedRun(CapturedRun&&) noexcept = default;
CapturedRun& CapturedRun::operator=(CapturedRun&&) noexcept = default;
CapturedRun::~CapturedRun() = default;

void CapturedRun::replay(StreamHandle stream) const {
  check(impl_->ctx->make_current());
  rt::Stream s = borrowed(*impl_->ctx, stream);
  check(impl_->graph.replay(s));
}

size_t CapturedRun::launches() const { return impl_->graph.launch_count(); }

}  // namespace lj
