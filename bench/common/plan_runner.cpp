// Shared by the benchmarks: fail-fast helpers, and plans compiled, loaded and given buffers so that
// their kernels can be timed back to back.
#include "bench/common/plan_runner.h"

#include <cstdio>
#include <cstdlib>

#include "cache/location.h"
#include "jit/compile_plan.h"
#include "runtime/fill.h"
#include "runtime/kernel_args.h"
#include "runtime/nvrtc.h"

namespace lj::bench {

const char* g_program = "bench";

void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", g_program, what.c_str());
  std::exit(1);
}

void must_ok(const rt::Status& s, const char* what) {
  if (!s.ok()) die(fmt::format("{}: {}", what, s.message()));
}

rt::Context* context_or_skip() {
  auto ctx = rt::Context::get(0);
  if (ctx.ok()) return *ctx;
  std::printf("skipped: no CUDA driver (%s)\n", ctx.message().c_str());
  return nullptr;
}

rt::Target device_target(const rt::Context& ctx) { return must(jit::JitTarget::of_device(ctx), "target").target; }

EmitOptions device_emit_options(rt::Context& ctx) { return must(jit::JitTarget::of_device(ctx), "target").emit_options(); }

PlanRun prepare(rt::Context& ctx, rt::Stream& stream, const Graph& g, const FusionPlan& plan, const Bindings& b,
                std::map<ValueId, rt::DeviceBuffer>& pool, const EmitOptions* emit) {
  PlanRun run;
  const jit::JitTarget target = must(jit::JitTarget::of_device(ctx, emit ? emit->arch_specific : true), "target");
  // Rotated copies of one plan share their kernels: one kernel cache for the process, so each source
  // compiles once (and not at all when an earlier process left it in LAYERJIT_CACHE_DIR).
  static cache::KernelCache kernel_cache(cache::DiskCache::open(cache::cache_options_from_env()));
  jit::PlanCompileOptions po;
  po.hint = b;  // the bound sizes pick each matmul's kernel family (GEMV at decode sizes)
  po.use_tuned = false;  // a benchmark times the defaults, or the configs it gives
  po.cache = &kernel_cache;
  if (emit) po.matmul = emit->matmul, po.attention = emit->attention;
  jit::CompiledPlan compiled = must(jit::compile_plan(target, g, plan, po), "compile");
  for (size_t i = 0; i < compiled.groups.size(); ++i) {
    const jit::CompiledGroup& cg = compiled.groups[i];
    const GeneratedKernel& k = cg.kernel;
    run.bytes += group_cost(g, plan.groups[i], b).bytes;
    run.config += (run.config.empty() ? "" : "; ") + (k.config.empty() ? std::string("-") : k.config);
    auto mod = must(rt::Module::load(ctx, cg.compiled.program.image()), "load");
    auto kern = must(mod.kernel(k.name), "kernel");
    rt::ArgSources src;
    src.scratch = [&](size_t bytes) -> rt::Result<CUdeviceptr> {
      run.scratch.push_back(must(rt::DeviceBuffer::allocate(ctx, bytes), "allocate scratch"));
      must_ok(rt::fill_zero(stream, run.scratch.back().ptr(), bytes), "zero scratch");
      return run.scratch.back().ptr();
    };
    src.buffer = [&](ValueId v) -> rt::Result<CUdeviceptr> {
      if (!pool.count(v)) {
        const TensorType& t = g.value(v).type;
        const size_t n = static_cast<size_t>(numel(resolve(t.shape, b)));
        auto buf = must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(tensor_bytes(t.dtype, resolve(t.shape, b)))), "allocate");
        if (t.dtype == DType::I32) {  // positions: small, inside every cache, not all the same
          std::vector<int> pos(n);
          for (size_t j = 0; j < n; ++j) pos[j] = static_cast<int>(j % 7);
          must_ok(rt::copy_to_device(stream, buf.ptr(), pos.data(), n * 4), "upload positions");
        } else {
          must_ok(rt::fill_random_operand(stream, buf.ptr(), n, t.dtype, 1234 + static_cast<uint64_t>(v)), "fill an input");
        }
        pool.emplace(v, std::move(buf));
      }
      return pool.at(v).ptr();
    };
    rt::KernelArgs args = must(rt::pack_kernel_args(ctx, k, b, src), "kernel arguments");
    const auto blocks = static_cast<unsigned>(k.launch.blocks(b));
    run.kernels.push_back(Launchable{std::move(mod), kern, std::move(args),
                                     rt::LaunchConfig::linear(blocks, static_cast<unsigned>(k.launch.threads),
                                                              static_cast<unsigned>(k.launch.shared_bytes))});
  }
  must_ok(stream.synchronize(), "setup");
  return run;
}

double median_ms_per_run(rt::Stream& stream, int rotations, int batch, int warmup, int repeats,
                         const std::function<rt::Status(int)>& run) {
  rt::TimerOptions opts;
  opts.warmup = warmup;
  opts.repeats = repeats;
  int next = 0;
  auto t = must(rt::time_on_stream(stream, [&](int) -> rt::Status {
                  for (int i = 0; i < batch; ++i) {
                    rt::Status s = run(next);
                    if (!s.ok()) return s;
                    next = (next + 1) % rotations;
                  }
                  return rt::Status();
                }, opts),
                "time");
  return t.median_ms / batch;
}

double time_plan(rt::Stream& stream, std::vector<PlanRun>& runs, int batch) {
  return median_ms_per_run(stream, static_cast<int>(runs.size()), batch, 5, 30, [&](int r) -> rt::Status {
    for (auto& l : runs[static_cast<size_t>(r)].kernels) {
      rt::Status s = rt::launch(stream, l.kernel, l.config, l.args);
      if (!s.ok()) return s;
    }
    return rt::Status();
  });
}

RawKernel load_raw_kernel(rt::Context& ctx, const char* source, const char* name) {
  auto prog = must(rt::compile(source, {}, device_target(ctx)), fmt::format("compile {}", name).c_str());
  RawKernel k{must(rt::Module::load(ctx, prog.image()), fmt::format("load {}", name).c_str()), {}};
  k.kernel = must(k.module.kernel(name), fmt::format("kernel {}", name).c_str());
  return k;
}

std::vector<rt::DeviceBuffer> random_buffers(rt::Context& ctx, rt::Stream& stream, int count, size_t bytes, uint64_t seed) {
  std::vector<rt::DeviceBuffer> bufs;
  for (int i = 0; i < count; ++i) {
    bufs.push_back(must(rt::DeviceBuffer::allocate(ctx, bytes), "alloc"));
    must_ok(rt::fill_random_f32(stream, bufs.back().ptr(), bytes / 4, seed + static_cast<uint64_t>(i), -1.f, 1.f), "fill");
  }
  return bufs;
}

double time_launches(rt::Stream& stream, rt::Kernel& k, const rt::LaunchConfig& cfg, std::vector<rt::KernelArgs>& args, int batch) {
  const rt::TimerOptions defaults;
  return median_ms_per_run(stream, static_cast<int>(args.size()), batch, defaults.warmup, defaults.repeats,
                           [&](int r) { return rt::launch(stream, k, cfg, args[static_cast<size_t>(r)]); });
}

double copy_gbps(rt::Context& ctx, rt::Stream& stream, size_t bytes) {
  RawKernel copy = load_raw_kernel(ctx, R"(extern "C" __global__ void copy16(uint4* out, const uint4* in, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) out[i] = in[i];
})", "copy16");
  const int rotations = rt::rotations_for(2 * bytes, static_cast<size_t>(ctx.info().l2_bytes));
  std::vector<rt::DeviceBuffer> bufs = random_buffers(ctx, stream, 2 * rotations, bytes, 5);
  const long long n16 = static_cast<long long>(bytes / 16);
  std::vector<rt::KernelArgs> args;
  for (int i = 0; i < rotations; ++i) args.push_back(rt::KernelArgs::of(bufs[2 * i + 1].ptr(), bufs[2 * i].ptr(), n16));
  const double ms = time_launches(stream, copy.kernel, rt::LaunchConfig::linear(static_cast<unsigned>(ctx.info().sm_count * 8), 512), args);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

double read_gbps(rt::Context& ctx, rt::Stream& stream, size_t bytes, int batch) {
  // The store is guarded by a value the sums never take (random floats XOR-folded would have to hit
  // one exact pattern), so the loads cannot be dropped and nothing is written.
  RawKernel read = load_raw_kernel(ctx, R"(extern "C" __global__ void __launch_bounds__(512) read16(const uint4* in, long long n, uint4* sink) {
  uint4 a = make_uint4(0, 0, 0, 0);
  const long long stride = (long long)gridDim.x * blockDim.x;
  // Eight loads in flight per thread on every pass, the last pass predicated.
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = i + u * stride < n ? __ldcs(in + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) a.x ^= v[u].x, a.y ^= v[u].y, a.z ^= v[u].z, a.w ^= v[u].w;
  }
  if (a.x == 0x7fc00001u && a.y == 0x7fc00001u && a.z == 0x7fc00001u && a.w == 0x7fc00001u) sink[threadIdx.x] = a;
})", "read16");
  const int rotations = rt::rotations_for(bytes, static_cast<size_t>(ctx.info().l2_bytes));
  std::vector<rt::DeviceBuffer> bufs = random_buffers(ctx, stream, rotations, bytes, 11);
  rt::DeviceBuffer sink = must(rt::DeviceBuffer::allocate(ctx, 512 * 16), "alloc sink");
  const long long n16 = static_cast<long long>(bytes / 16);
  std::vector<rt::KernelArgs> args;
  for (int i = 0; i < rotations; ++i) args.push_back(rt::KernelArgs::of(bufs[static_cast<size_t>(i)].ptr(), n16, sink.ptr()));
  // The best of a few grid shapes (1, 2 or 4 CTAs of 512 threads per SM): a ceiling, not a kernel.
  double best_ms = 0.0;
  for (int per_sm : {1, 2, 4}) {
    const double ms =
        time_launches(stream, read.kernel, rt::LaunchConfig::linear(static_cast<unsigned>(ctx.info().sm_count * per_sm), 512), args, batch);
    if (best_ms == 0.0 || ms < best_ms) best_ms = ms;
  }
  return static_cast<double>(bytes) / (best_ms * 1e-3) / 1e9;
}

}  // namespace lj::bench
