// Runtime costs that bound how small a fused kernel may usefully be and how long JIT compilation and
// autotuning take: launch overhead per kernel (eager vs CUDA graph), NVRTC compile time of a small and
// a template-heavy kernel (with and without automatic PCH; one worker vs the pool), and the time to
// load a cubin (and to JIT-load PTX). Compile measurements need no GPU; `--compile-only` runs just
// those. Prints markdown tables.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/context.h"
#include "runtime/fill.h"
#include "runtime/graph.h"
#include "runtime/launch.h"
#include "runtime/memory.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "runtime/timer.h"

using namespace lj::rt;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

constexpr const char* kSmall = R"(extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

constexpr const char* kEmpty = R"(extern "C" __global__ void empty(int) {}
)";

constexpr const char* kCopy = R"(extern "C" __global__ void copy4(float4* out, const float4* in, int n4) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) out[i] = in[i];
}
)";

/// A header in the style of a tile library (CuTe, ThunderKittens): many small templates, compile-time
/// loops and type computations. Generated so that parsing it dominates a small kernel's compile.
std::string heavy_header() {
  std::string h = R"(#pragma once
namespace tl {
template <int N> struct Int { static constexpr int value = N; };
template <class A, class B> struct Mul { using type = Int<A::value * B::value>; };
template <int I, int N> struct For {
  template <class F> __device__ __forceinline__ static void run(F&& f) { f(Int<I>{}); For<I + 1, N>::run(f); }
};
template <int N> struct For<N, N> { template <class F> __device__ __forceinline__ static void run(F&&) {} };
template <class T, int M, int N> struct Frag {
  T v[M][N];
  __device__ __forceinline__ void zero() { For<0, M>::run([&](auto i) { For<0, N>::run([&](auto j) { v[i.value][j.value] = T(0); }); }); }
};
template <class T, int M, int N, int K>
__device__ __forceinline__ void mma(Frag<T, M, N>& c, const T (&a)[M][K], const T (&b)[K][N]) {
  For<0, M>::run([&](auto i) { For<0, N>::run([&](auto j) { For<0, K>::run([&](auto k) {
    c.v[i.value][j.value] += a[i.value][k.value] * b[k.value][j.value]; }); }); });
}
)";
  // Many distinct layout templates, as a real tile library has.
  for (int i = 0; i < 400; ++i) {
    h += fmt::format(
        "template <class S, int P> struct Layout{0} {{\n"
        "  static constexpr int stride = P * {1} + 1;\n"
        "  template <class I> __device__ __forceinline__ static int offset(I i, I j) {{ return int(i) * stride + int(j) + {0}; }}\n"
        "  using next = typename Mul<Int<P>, Int<{1}>>::type;\n"
        "}};\n",
        i, i % 7 + 1);
  }
  h += "}  // namespace tl\n";
  return h;
}

constexpr const char* kHeavy = R"(#include "tl.cuh"
extern "C" __global__ void tile_mma(float* out, const float* in) {
  float a[4][8];
  float b[8][4];
  tl::For<0, 4>::run([&](auto i) { tl::For<0, 8>::run([&](auto k) {
    a[i.value][k.value] = in[threadIdx.x * 32 + tl::Layout17<float, 8>::offset(i.value, k.value) % 32]; }); });
  tl::For<0, 8>::run([&](auto k) { tl::For<0, 4>::run([&](auto j) {
    b[k.value][j.value] = in[threadIdx.x * 32 + tl::Layout301<float, 4>::offset(k.value, j.value) % 32]; }); });
  tl::Frag<float, 4, 4> c;
  c.zero();
  tl::mma(c, a, b);
  tl::For<0, 4>::run([&](auto i) { tl::For<0, 4>::run([&](auto j) {
    out[threadIdx.x * 16 + i.value * 4 + j.value] = c.v[i.value][j.value]; }); });
}
)";

struct CompileStats {
  double first_ms = 0;
  double median_ms = 0;
};

CompileStats time_compiles(const char* source, const CompileOptions& opts, const Target& target, int repeats) {
  CompileStats s;
  std::vector<double> rest;
  for (int i = 0; i < repeats; ++i) {
    auto r = compile(source, opts, target);
    if (!r.ok()) {
      fmt::print(stderr, "compile failed: {}\n", r.message());
      std::exit(1);
    }
    if (i == 0) {
      s.first_ms = r->seconds * 1e3;
    } else {
      rest.push_back(r->seconds * 1e3);
    }
  }
  s.median_ms = median(rest);
  return s;
}

void bench_compile(const Target& target) {
  fmt::print("\n### NVRTC {} compile time, target {} (ms; first call, then median of the next 5)\n\n",
             nvrtc_version(), target.name());
  fmt::print("| kernel | -pch | first | median |\n|---|---|---|---|\n");
  CompileOptions heavy;
  heavy.headers = {{"tl.cuh", heavy_header()}};
  // NVRTC's one-time process start-up (loading its builtins) stays out of every row below.
  if (!compile(kEmpty, {}, target).ok()) std::exit(1);
  for (bool pch : {false, true}) {
    CompileOptions small;
    small.pch = pch;
    CompileStats s = time_compiles(kSmall, small, target, 6);
    fmt::print("| small (saxpy) | {} | {:.1f} | {:.1f} |\n", pch ? "yes" : "no", s.first_ms, s.median_ms);
  }
  for (bool pch : {false, true}) {
    CompileOptions h = heavy;
    h.pch = pch;
    CompileStats s = time_compiles(kHeavy, h, target, 6);
    fmt::print("| template-heavy (400 layout templates, unrolled 4x4x8 mma) | {} | {:.1f} | {:.1f} |\n",
               pch ? "yes" : "no", s.first_ms, s.median_ms);
  }

  // The pool: 16 independent template-heavy compiles, one worker vs the default.
  std::vector<CompileJob> jobs;
  for (int i = 0; i < 16; ++i) jobs.push_back(CompileJob{kHeavy, heavy, target});
  fmt::print("\n| 16 template-heavy compiles | wall ms |\n|---|---|\n");
  for (int workers : {1, default_compile_workers()}) {
    auto t0 = Clock::now();
    auto results = compile_parallel(jobs, workers);
    const double ms = ms_since(t0);
    for (auto& r : results) {
      if (!r.ok()) {
        fmt::print(stderr, "compile failed: {}\n", r.message());
        std::exit(1);
      }
    }
    fmt::print("| {} worker(s) | {:.0f} |\n", workers, ms);
  }
}

int bench_gpu() {
  auto ctx_r = Context::get(0);
  if (!ctx_r.ok()) {
    fmt::print(stderr, "error: {}\n", ctx_r.message());
    return 1;
  }
  Context& ctx = **ctx_r;
  set_debug_launch_checks(false);
  const DeviceInfo& info = ctx.info();
  fmt::print("device: {} (sm_{}, {} SMs), CUDA driver {}\n", info.name, info.cc(), info.sm_count,
             info.driver_version);
  auto archs = supported_archs();
  if (!archs.ok()) return 1;
  auto choice = choose_target(info.cc(), false, *archs, nvrtc_version());
  if (!choice.ok()) return 1;
  const Target target = choice->target;

  bench_compile(target);

  // Module load: a small and a template-heavy cubin, and PTX that the driver JIT-compiles.
  CompileOptions heavy;
  heavy.headers = {{"tl.cuh", heavy_header()}};
  auto small_prog = compile(kSmall, {}, target);
  auto heavy_prog = compile(kHeavy, heavy, target);
  Target ptx_target = target;
  ptx_target.ptx_only = true;
  auto heavy_ptx = compile(kHeavy, heavy, ptx_target);
  if (!small_prog.ok() || !heavy_prog.ok() || !heavy_ptx.ok()) return 1;
  fmt::print("\n### Module load (cuModuleLoadData + cuModuleUnload, median of 20, ms)\n\n");
  fmt::print("| image | bytes | load ms |\n|---|---|---|\n");
  struct Img {
    const char* what;
    const std::string* image;
  };
  for (Img img : {Img{"small cubin", &small_prog->cubin}, Img{"template-heavy cubin", &heavy_prog->cubin},
                  Img{"template-heavy PTX (driver JIT)", &heavy_ptx->ptx}}) {
    std::vector<double> ms;
    for (int i = 0; i < 20; ++i) {
      auto t0 = Clock::now();
      auto m = Module::load(ctx, *img.image);
      const double dt = ms_since(t0);
      if (!m.ok()) {
        fmt::print(stderr, "{}\n", m.message());
        return 1;
      }
      ms.push_back(dt);
    }
    fmt::print("| {} | {} | {:.3f} |\n", img.what, img.image->size(), median(ms));
  }

  // Launch overhead: N back-to-back launches of an empty kernel.
  auto empty_prog = compile(kEmpty, {}, target);
  if (!empty_prog.ok()) return 1;
  auto mod = Module::load(ctx, empty_prog->cubin);
  auto stream = Stream::create(ctx);
  if (!mod.ok() || !stream.ok()) return 1;
  auto k = mod->kernel("empty");
  if (!k.ok()) return 1;
  Kernel kernel = *k;
  Stream& s = *stream;
  KernelArgs args = KernelArgs::of(0);
  constexpr int kLaunches = 1000;
  auto sequence = [&]() -> Status {
    for (int i = 0; i < kLaunches; ++i) LJ_RT_TRY(launch(s, kernel, LaunchConfig::linear(1, 32), args));
    return {};
  };
  // Host-side cost of issuing launches (what the CPU pays per kernel), and the GPU-side time of the
  // whole sequence by events, eager and as one graph.
  std::vector<double> host_us;
  for (int rep = 0; rep < 7; ++rep) {
    if (!s.synchronize().ok()) return 1;
    auto t0 = Clock::now();
    if (!sequence().ok()) return 1;
    host_us.push_back(ms_since(t0) * 1e3 / kLaunches);
    if (!s.synchronize().ok()) return 1;
  }
  auto graph = Graph::capture(s, sequence);
  if (!graph.ok()) {
    fmt::print(stderr, "{}\n", graph.message());
    return 1;
  }
  std::vector<double> graph_host_us;
  for (int rep = 0; rep < 7; ++rep) {
    if (!s.synchronize().ok()) return 1;
    auto t0 = Clock::now();
    if (!graph->replay(s).ok()) return 1;
    graph_host_us.push_back(ms_since(t0) * 1e3 / kLaunches);
  }
  auto eager_t = time_on_stream(s, [&](int) { return sequence(); }, TimerOptions{2, 10, 1});
  auto graph_t = time_on_stream(s, [&](int) { return graph->replay(s); }, TimerOptions{2, 10, 1});
  if (!eager_t.ok() || !graph_t.ok()) return 1;
  fmt::print("\n### Launch overhead, empty kernel <<<1, 32>>>, {} launches back to back (us per kernel)\n\n",
             kLaunches);
  fmt::print("| path | host issue (median of 7) | GPU time by events (median of 10) |\n|---|---|---|\n");
  fmt::print("| eager cuLaunchKernelEx | {:.2f} | {:.2f} |\n", median(host_us), eager_t->median_ms * 1e3 / kLaunches);
  fmt::print("| CUDA graph replay | {:.3f} | {:.2f} |\n", median(graph_host_us), graph_t->median_ms * 1e3 / kLaunches);

  // Why the timer rotates inputs: a copy whose 32 MB working set fits in L2, timed over one buffer
  // pair and over enough pairs to span twice the L2.
  auto copy_prog = compile(kCopy, {}, target);
  if (!copy_prog.ok()) return 1;
  auto copy_mod = Module::load(ctx, copy_prog->cubin);
  if (!copy_mod.ok()) return 1;
  auto copy_k = copy_mod->kernel("copy4");
  if (!copy_k.ok()) return 1;
  Kernel copy = *copy_k;
  const int n4 = 1 << 20;  // 16 MB in, 16 MB out
  const size_t bytes = static_cast<size_t>(n4) * 16;
  const int rot = rotations_for(2 * bytes, static_cast<size_t>(info.l2_bytes));
  std::vector<DeviceBuffer> ins;
  std::vector<DeviceBuffer> outs;
  for (int i = 0; i < rot; ++i) {
    auto a = DeviceBuffer::allocate(ctx, bytes);
    auto b = DeviceBuffer::allocate(ctx, bytes);
    if (!a.ok() || !b.ok()) return 1;
    if (!fill_random_f32(s, a->ptr(), bytes / 4, static_cast<std::uint64_t>(i), -1.0f, 1.0f).ok()) return 1;
    ins.push_back(std::move(*a));
    outs.push_back(std::move(*b));
  }
  fmt::print("\n### Timer input rotation: 16 MB float4 copy (32 MB moved), L2 {} MB\n\n", info.l2_bytes >> 20);
  fmt::print("| inputs | median us | GB/s |\n|---|---|---|\n");
  for (int rotations : {1, rot}) {
    auto t = time_on_stream(
        s,
        [&](int r) {
          KernelArgs a = KernelArgs::of(outs[static_cast<size_t>(r)].ptr(), ins[static_cast<size_t>(r)].ptr(), n4);
          return launch(s, copy, LaunchConfig::linear(static_cast<unsigned>(info.sm_count) * 4, 512), a);
        },
        TimerOptions{5, 50, rotations});
    if (!t.ok()) return 1;
    fmt::print("| {} buffer pair(s) | {:.2f} | {:.0f} |\n", rotations, t->median_ms * 1e3,
               2.0 * static_cast<double>(bytes) / (t->median_ms * 1e-3) / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--compile-only") == 0) {
    auto t = Target::parse(argc > 2 ? argv[2] : "sm_90a");
    if (!t.ok()) {
      fmt::print(stderr, "{}\n", t.message());
      return 2;
    }
    bench_compile(*t);
    return 0;
  }
  return bench_gpu();
}
