// GPU tier of the runtime: NVRTC-compiled kernels against CPU results (random non-zero inputs, NaN-
// poisoned outputs), dynamic shared memory above 48 KB, PTX loaded through the driver's JIT, graph
// replay bit for bit against eager launches (and after an argument update), timer scaling, arena
// reuse, launch errors, and `layerjit devices`. Without a driver every test exits 77 (skipped).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/device/random.cuh"
#include "runtime/fill.h"
#include "runtime/graph.h"
#include "runtime/memory.h"
#include "runtime/timer.h"
#include "tests/gpu/gpu_test_support.h"
#include "tools/cmd_devices.h"

using namespace lj::rt;
using lj_test::gpu;
using lj_test::kernel;
using lj_test::load;

namespace {

constexpr const char* kKernels = R"(// GPU-tier test kernels
extern "C" __global__ void saxpy(float* out, const float* x, const float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// Reverses each block-sized chunk through dynamic shared memory (chunk floats per block).
extern "C" __global__ void reverse_chunks(float* out, const float* in, int chunk, int n) {
  extern __shared__ float tile[];
  const int base = blockIdx.x * chunk;
  for (int i = threadIdx.x; i < chunk; i += blockDim.x)
    tile[i] = base + i < n ? in[base + i] : 0.0f;
  __syncthreads();
  for (int i = threadIdx.x; i < chunk; i += blockDim.x)
    if (base + i < n) out[base + i] = tile[chunk - 1 - i];
}

// Deterministic block sums: a fixed tree order, so eager and graph runs agree bit for bit.
extern "C" __global__ void block_sum(float* partial, const float* in, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * 256 + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

extern "C" __global__ void scale_by_partial(float* out, const float* in, const float* partial, int n) {
  int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) out[i] = in[i] * rsqrtf(fabsf(partial[blockIdx.x]) + 1.0f);
}

// A dependent chain of `iters` multiply-adds per thread: run time proportional to iters.
extern "C" __global__ void spin(float* out, int iters) {
  float v = threadIdx.x * 1e-3f;
  for (int k = 0; k < iters; ++k) v = v * 0.999f + 1e-4f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
)";

std::vector<float> download_f32(Stream& s, const DeviceBuffer& b, size_t n) {
  std::vector<float> out(n);
  auto staging = HostStaging::create(s.context());
  LJ_REQUIRE_OK(staging);
  LJ_REQUIRE_OK(staging->download(s, std::span<float>(out), b));
  return out;
}

DeviceBuffer alloc(Context& ctx, size_t bytes) {
  auto b = DeviceBuffer::allocate(ctx, bytes);
  LJ_REQUIRE_OK(b);
  return std::move(*b);
}

Stream stream(Context& ctx) {
  auto s = Stream::create(ctx);
  LJ_REQUIRE_OK(s);
  return std::move(*s);
}

/// Counts elements that differ from the reference beyond tol*(1+|ref|), and elements left poisoned.
struct Compare {
  size_t wrong = 0;
  size_t unwritten = 0;
};
Compare compare(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  Compare c;
  for (size_t i = 0; i < want.size(); ++i) {
    if (is_poison_f32(got[i])) ++c.unwritten;
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.0f + std::fabs(want[i])))) ++c.wrong;
  }
  return c;
}

}  // namespace

TEST_CASE("device info is read and `layerjit devices` prints it", "[gpu]") {
  Context& ctx = gpu();
  const DeviceInfo& d = ctx.info();
  CHECK(!d.name.empty());
  CHECK(d.cc_major >= 7);
  CHECK(d.sm_count > 0);
  CHECK(d.max_smem_per_block_optin >= d.max_smem_per_block_default);
  CHECK(d.l2_bytes > 0);
  CHECK(d.regs_per_sm > 0);
  CHECK(d.theoretical_bandwidth() > 1e11);
  CHECK(d.driver_version >= 12000);
  char name[] = "devices";
  char* argv[] = {name, nullptr};
  CHECK(cmd_devices(1, argv) == 0);
}

TEST_CASE("random fill matches the host generator bit for bit", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  const size_t n = (1u << 20) + 123;
  DeviceBuffer buf = alloc(ctx, n * 4);
  LJ_REQUIRE_OK(fill_poison(s, buf.ptr(), n * 4, 4));
  LJ_REQUIRE_OK(fill_random_f32(s, buf.ptr(), n, 1234, -2.0f, 3.0f));
  std::vector<float> got = download_f32(s, buf, n);
  size_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) mismatches += got[i] != host_random_f32(1234, i, -2.0f, 3.0f);
  CHECK(mismatches == 0);

  DeviceBuffer b16 = alloc(ctx, n * 2);
  LJ_REQUIRE_OK(fill_random_bf16(s, b16.ptr(), n, 99, -1.0f, 1.0f));
  std::vector<unsigned short> h16(n);
  auto staging = HostStaging::create(ctx);
  LJ_REQUIRE_OK(staging);
  LJ_REQUIRE_OK(staging->download(s, std::span<unsigned short>(h16), b16));
  size_t bad16 = 0;
  for (size_t i = 0; i < n; ++i) bad16 += h16[i] != lj_device::float_to_bf16_bits(host_random_f32(99, i, -1.0f, 1.0f));
  CHECK(bad16 == 0);
}

TEST_CASE("an NVRTC-compiled kernel equals the CPU on random inputs, every output written", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  Module mod = load(ctx, kKernels);
  Kernel saxpy = kernel(mod, "saxpy");
  const int n = (1 << 22) + 77;  // not a multiple of the block size
  const size_t bytes = static_cast<size_t>(n) * 4;
  DeviceBuffer x = alloc(ctx, bytes);
  DeviceBuffer y = alloc(ctx, bytes);
  DeviceBuffer out = alloc(ctx, bytes);
  // x from the device generator; y uploaded from the host through pinned staging.
  LJ_REQUIRE_OK(fill_random_f32(s, x.ptr(), n, 1, 0.5f, 2.0f));
  std::vector<float> hy(static_cast<size_t>(n));
  for (size_t i = 0; i < hy.size(); ++i) hy[i] = host_random_f32(2, i, -3.0f, -0.25f);
  auto staging = HostStaging::create(ctx, 1 << 20);  // several chunks
  LJ_REQUIRE_OK(staging);
  LJ_REQUIRE_OK(staging->upload(s, y, std::span<const float>(hy)));
  LJ_REQUIRE_OK(fill_poison(s, out.ptr(), bytes, 4));
  const float a = 1.75f;
  KernelArgs args = KernelArgs::of(out.ptr(), x.ptr(), y.ptr(), a, n);
  LJ_REQUIRE_OK(launch(s, saxpy, LaunchConfig::cover(static_cast<size_t>(n), 256), args));
  std::vector<float> got = download_f32(s, out, static_cast<size_t>(n));
  std::vector<float> want(static_cast<size_t>(n));
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::fma(a, host_random_f32(1, i, 0.5f, 2.0f), hy[i]);
  Compare c = compare(got, want, 1e-6f);
  CHECK(c.unwritten == 0);
  CHECK(c.wrong == 0);
}

TEST_CASE("dynamic shared memory above 48 KB is raised and works", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  Module mod = load(ctx, kKernels);
  Kernel rev = kernel(mod, "reverse_chunks");
  const int chunk = 40 * 1024;  // 160 KB of floats per block
  const unsigned smem = chunk * 4;
  REQUIRE(static_cast<int>(smem) <= ctx.info().max_smem_per_block_optin);
  const int n = chunk * 5 + 1000;  // last block partial
  DeviceBuffer in = alloc(ctx, static_cast<size_t>(n) * 4);
  DeviceBuffer out = alloc(ctx, static_cast<size_t>(n) * 4);
  LJ_REQUIRE_OK(fill_random_f32(s, in.ptr(), static_cast<size_t>(n), 5, 1.0f, 2.0f));
  LJ_REQUIRE_OK(fill_poison(s, out.ptr(), static_cast<size_t>(n) * 4, 4));
  KernelArgs args = KernelArgs::of(out.ptr(), in.ptr(), chunk, n);
  const unsigned blocks = static_cast<unsigned>((n + chunk - 1) / chunk);
  LJ_REQUIRE_OK(launch(s, rev, LaunchConfig::linear(blocks, 512, smem), args));
  std::vector<float> got = download_f32(s, out, static_cast<size_t>(n));
  std::vector<float> want(static_cast<size_t>(n));
  for (int b = 0; b * chunk < n; ++b) {
    for (int i = 0; i < chunk && b * chunk + i < n; ++i) {
      const int src = b * chunk + (chunk - 1 - i);
      want[static_cast<size_t>(b * chunk + i)] = src < n ? host_random_f32(5, static_cast<uint64_t>(src), 1.0f, 2.0f) : 0.0f;
    }
  }
  Compare c = compare(got, want, 0.0f);
  CHECK(c.unwritten == 0);
  CHECK(c.wrong == 0);
  auto limit = rev.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  LJ_REQUIRE_OK(limit);
  CHECK(*limit == static_cast<int>(smem));
}

TEST_CASE("PTX loaded through the driver's JIT gives the same results", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  auto archs = supported_archs();
  LJ_REQUIRE_OK(archs);
  auto choice = choose_target(ctx.info().cc(), false, *archs, nvrtc_version());
  LJ_REQUIRE_OK(choice);
  Target ptx = choice->target;
  ptx.ptx_only = true;
  auto prog = compile(kKernels, {}, ptx);
  LJ_REQUIRE_OK(prog);
  auto mod = Module::load(ctx, prog->image());
  LJ_REQUIRE_OK(mod);
  Kernel saxpy = kernel(*mod, "saxpy");
  const int n = 100003;
  DeviceBuffer x = alloc(ctx, n * 4u);
  DeviceBuffer out = alloc(ctx, n * 4u);
  LJ_REQUIRE_OK(fill_random_f32(s, x.ptr(), n, 8, -1.0f, 1.0f));
  LJ_REQUIRE_OK(fill_poison(s, out.ptr(), n * 4u, 4));
  KernelArgs args = KernelArgs::of(out.ptr(), x.ptr(), x.ptr(), 2.0f, n);
  LJ_REQUIRE_OK(launch(s, saxpy, LaunchConfig::cover(n, 128), args));
  std::vector<float> got = download_f32(s, out, n);
  std::vector<float> want(n);
  for (size_t i = 0; i < want.size(); ++i) {
    const float v = host_random_f32(8, i, -1.0f, 1.0f);
    want[i] = std::fma(2.0f, v, v);
  }
  Compare c = compare(got, want, 1e-6f);
  CHECK(c.unwritten == 0);
  CHECK(c.wrong == 0);
}

TEST_CASE("graph replay equals eager launches bit for bit, also after an argument update", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  Module mod = load(ctx, kKernels);
  Kernel saxpy = kernel(mod, "saxpy");
  Kernel bsum = kernel(mod, "block_sum");
  Kernel scale = kernel(mod, "scale_by_partial");
  const int n = 3 * 256 * 1000 + 11;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  DeviceBuffer x = alloc(ctx, n * 4u);
  DeviceBuffer y = alloc(ctx, n * 4u);
  DeviceBuffer t = alloc(ctx, n * 4u);
  DeviceBuffer partial = alloc(ctx, blocks * 4u);
  DeviceBuffer out = alloc(ctx, n * 4u);
  LJ_REQUIRE_OK(fill_random_f32(s, x.ptr(), n, 11, -1.0f, 1.0f));
  LJ_REQUIRE_OK(fill_random_f32(s, y.ptr(), n, 12, -1.0f, 1.0f));

  KernelArgs a0 = KernelArgs::of(t.ptr(), x.ptr(), y.ptr(), 0.5f, n);
  KernelArgs a1 = KernelArgs::of(partial.ptr(), t.ptr(), n);
  KernelArgs a2 = KernelArgs::of(out.ptr(), t.ptr(), partial.ptr(), n);
  auto sequence = [&]() -> Status {
    LJ_RT_TRY(launch(s, saxpy, LaunchConfig::linear(blocks, 256), a0));
    LJ_RT_TRY(launch(s, bsum, LaunchConfig::linear(blocks, 256), a1));
    return launch(s, scale, LaunchConfig::linear(blocks, 256), a2);
  };
  auto run_eager = [&](float alpha) {
    a0.set(3, alpha);
    LJ_REQUIRE_OK(fill_poison(s, out.ptr(), n * 4u, 4));
    LJ_REQUIRE_OK(sequence());
    return download_f32(s, out, n);
  };
  const std::vector<float> eager = run_eager(0.5f);
  const std::vector<float> eager2 = run_eager(-1.25f);
  a0.set(3, 0.5f);

  auto graph = Graph::capture(s, sequence);
  LJ_REQUIRE_OK(graph);
  CHECK(graph->launch_count() == 3);
  LJ_REQUIRE_OK(fill_poison(s, out.ptr(), n * 4u, 4));
  LJ_REQUIRE_OK(graph->replay(s));
  std::vector<float> replayed = download_f32(s, out, n);
  CHECK(std::memcmp(replayed.data(), eager.data(), eager.size() * 4) == 0);
  CHECK(compare(replayed, eager, 0.0f).unwritten == 0);

  // A changed scalar (as a changed symbol value would be) patched into the instantiated graph.
  KernelArgs updated = KernelArgs::of(t.ptr(), x.ptr(), y.ptr(), -1.25f, n);
  LJ_REQUIRE_OK(graph->update_args(0, updated));
  LJ_REQUIRE_OK(fill_poison(s, out.ptr(), n * 4u, 4));
  LJ_REQUIRE_OK(graph->replay(s));
  std::vector<float> replayed2 = download_f32(s, out, n);
  CHECK(std::memcmp(replayed2.data(), eager2.data(), eager2.size() * 4) == 0);
  CHECK(std::memcmp(eager.data(), eager2.data(), eager.size() * 4) != 0);

  KernelArgs wrong = KernelArgs::of(t.ptr(), 1.0f);
  auto bad = graph->update_args(0, wrong);
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("saxpy"));
  CHECK(!graph->update_args(3, updated).ok());
}

TEST_CASE("the timer scales: twice the work measures 1.8-2.2 times", "[gpu]") {
  Context& ctx = gpu();
  set_debug_launch_checks(false);  // a sync after each launch would time the host, not the GPU
  Stream s = stream(ctx);
  Module mod = load(ctx, kKernels);
  Kernel spin = kernel(mod, "spin");
  const unsigned blocks = static_cast<unsigned>(ctx.info().sm_count) * 8;
  DeviceBuffer out = alloc(ctx, blocks * 256u * 4u);
  auto time_iters = [&](int iters) {
    KernelArgs args = KernelArgs::of(out.ptr(), iters);
    auto t = time_on_stream(s, [&](int) { return launch(s, spin, LaunchConfig::linear(blocks, 256), args); },
                            TimerOptions{5, 30, 1});
    LJ_REQUIRE_OK(t);
    return *t;
  };
  const Timing one = time_iters(1 << 15);
  const Timing two = time_iters(1 << 16);
  const double ratio = two.median_ms / one.median_ms;
  INFO("1x: " << one.format() << "\n2x: " << two.format() << "\nratio " << ratio);
  CHECK(one.median_ms > 0.05);
  CHECK(ratio >= 1.8);
  CHECK(ratio <= 2.2);
  std::printf("timer: 1x %s; 2x %s; ratio %.3f\n", one.format().c_str(), two.format().c_str(), ratio);

  // Rotation: the body sees rotation indices 0..k-1 in turn.
  std::vector<int> seen;
  auto r = time_on_stream(s, [&](int rot) { seen.push_back(rot); return Status(); }, TimerOptions{0, 6, 3});
  LJ_REQUIRE_OK(r);
  CHECK(seen == std::vector<int>{0, 1, 2, 0, 1, 2});

  // Steps in order: the second step does twice the first's work and is timed apart from it.
  KernelArgs a1 = KernelArgs::of(out.ptr(), 1 << 15), a2 = KernelArgs::of(out.ptr(), 1 << 16);
  auto steps = time_steps_on_stream(s, {[&] { return launch(s, spin, LaunchConfig::linear(blocks, 256), a1); },
                                        [&] { return launch(s, spin, LaunchConfig::linear(blocks, 256), a2); }},
                                    TimerOptions{3, 20, 1});
  LJ_REQUIRE_OK(steps);
  REQUIRE(steps->size() == 2);
  const double step_ratio = (*steps)[1].median_ms / (*steps)[0].median_ms;
  INFO("step 1: " << (*steps)[0].format() << "\nstep 2: " << (*steps)[1].format());
  CHECK((*steps)[0].samples_ms.size() == 20);
  CHECK(step_ratio >= 1.8);
  CHECK(step_ratio <= 2.2);
  CHECK_FALSE(time_steps_on_stream(s, {}, TimerOptions{}).ok());
  set_debug_launch_checks(true);
}

TEST_CASE("the arena reuses released memory", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  Arena arena(ctx);
  CUdeviceptr first = 0;
  {
    auto b = arena.acquire(3u << 20);
    LJ_REQUIRE_OK(b);
    first = b->ptr();
    // The block is real device memory.
    LJ_REQUIRE_OK(fill_random_f32(s, b->ptr(), (3u << 20) / 4, 3, 1.0f, 2.0f));
    LJ_REQUIRE_OK(s.synchronize());
  }
  CHECK(arena.stats().driver_allocations == 1);
  CHECK(arena.stats().bytes_on_loan == 0);
  CHECK(arena.stats().bytes_cached == (4u << 20));
  {
    auto again = arena.acquire((3u << 20) + 4096);  // rounds to the same 4 MiB block
    LJ_REQUIRE_OK(again);
    CHECK(again->ptr() == first);
    CHECK(arena.stats().reuses == 1);
    CHECK(arena.stats().driver_allocations == 1);
    auto other = arena.acquire(1024);  // the cached 4 MiB block is on loan: a new allocation
    LJ_REQUIRE_OK(other);
    CHECK(other->ptr() != first);
    CHECK(arena.stats().driver_allocations == 2);
  }
  auto big = arena.acquire(64u << 20);  // far larger than anything cached: not served from cache
  LJ_REQUIRE_OK(big);
  CHECK(arena.stats().driver_allocations == 3);
  big = ArenaBlock();
  LJ_REQUIRE_OK(arena.trim());
  CHECK(arena.stats().bytes_cached == 0);
}

TEST_CASE("bad launches fail with the kernel's name and the driver's reason", "[gpu]") {
  Context& ctx = gpu();
  Stream s = stream(ctx);
  Module mod = load(ctx, kKernels);
  Kernel saxpy = kernel(mod, "saxpy");
  REQUIRE(saxpy.param_sizes_known());
  CHECK(saxpy.param_sizes() == std::vector<size_t>{8, 8, 8, 4, 4});
  DeviceBuffer buf = alloc(ctx, 4096);

  KernelArgs too_few = KernelArgs::of(buf.ptr(), 1.0f);
  auto r1 = launch(s, saxpy, LaunchConfig::linear(1, 32), too_few);
  REQUIRE(!r1.ok());
  CHECK_THAT(r1.message(), Catch::Contains("kernel `saxpy` takes 5 argument(s) but the launch passes 2"));

  KernelArgs wrong_size = KernelArgs::of(buf.ptr(), buf.ptr(), buf.ptr(), 1.0, 1);  // double, not float
  auto r2 = launch(s, saxpy, LaunchConfig::linear(1, 32), wrong_size);
  REQUIRE(!r2.ok());
  CHECK_THAT(r2.message(), Catch::Contains("argument 3 is 4 bytes but the launch passes 8 bytes"));

  KernelArgs ok = KernelArgs::of(buf.ptr(), buf.ptr(), buf.ptr(), 1.0f, 1);
  auto r3 = launch(s, saxpy, LaunchConfig::linear(1, 4096), ok);  // more threads than a block may have
  REQUIRE(!r3.ok());
  CHECK_THAT(r3.message(), Catch::Contains("launching `saxpy`"));
  CHECK_THAT(r3.message(), Catch::Contains("cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE"));

  const unsigned too_much = static_cast<unsigned>(ctx.info().max_smem_per_block_optin) + 1024;
  auto r4 = launch(s, saxpy, LaunchConfig::linear(1, 32, too_much), ok);
  REQUIRE(!r4.ok());
  CHECK_THAT(r4.message(), Catch::Contains("dynamic shared memory"));

  // The context is still healthy after rejected launches.
  LJ_REQUIRE_OK(launch(s, saxpy, LaunchConfig::linear(1, 32), ok));
  LJ_REQUIRE_OK(s.synchronize());
}
