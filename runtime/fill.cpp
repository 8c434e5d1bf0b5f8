// Random and poison fills (see fill.h). The random-fill kernels are compiled with NVRTC once per
// device, for the device's own arch, on first use.
#include "runtime/fill.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "runtime/device/random.cuh"
#include "runtime/host_values.h"
#include "runtime/launch.h"
#include "runtime/memory.h"
#include "runtime/nvrtc.h"

namespace lj::rt {
namespace {

constexpr const char* kFillSource = R"(// layerjit fill kernels
#include "layerjit/random.cuh"

extern "C" __global__ void lj_fill_random_f32(float* out, unsigned long long n, unsigned long long seed,
                                              float lo, float hi) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = lj_device::uniform(seed, i, lo, hi);
  }
}

extern "C" __global__ void lj_fill_random_bf16(unsigned short* out, unsigned long long n,
                                               unsigned long long seed, float lo, float hi) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = lj_device::float_to_bf16_bits(lj_device::uniform(seed, i, lo, hi));
  }
}
)";

struct FillKernels {
  Module module;
  Kernel f32;
  Kernel bf16;
};

Result<FillKernels*> fill_kernels(const Context& ctx) {
  static std::mutex mu;
  static std::map<const Context*, std::unique_ptr<FillKernels>> cache;  // kept for the process
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(&ctx); it != cache.end()) return it->second.get();
  LJ_RT_ASSIGN(std::vector<int> archs, supported_archs());
  LJ_RT_ASSIGN(TargetChoice choice, choose_target(ctx.info().cc(), false, archs, nvrtc_version()));
  CompileOptions opts;
  opts.program_name = "lj_fill.cu";
  opts.extra = {"-fmad=false"};  // bit-exact with host_random_f32 (see random.cuh)
  LJ_RT_ASSIGN(CompiledProgram prog, compile(kFillSource, opts, choice.target));
  LJ_RT_ASSIGN(Module mod, Module::load(ctx, prog.image()));
  LJ_RT_ASSIGN(Kernel f32, mod.kernel("lj_fill_random_f32"));
  LJ_RT_ASSIGN(Kernel bf16, mod.kernel("lj_fill_random_bf16"));
  auto k = std::make_unique<FillKernels>(FillKernels{std::move(mod), std::move(f32), std::move(bf16)});
  FillKernels* raw = k.get();
  cache.emplace(&ctx, std::move(k));
  return raw;
}

Status fill_random(Stream& stream, bool bf16, CUdeviceptr out, size_t n, std::uint64_t seed, float lo, float hi) {
  if (n == 0) return {};
  LJ_RT_ASSIGN(FillKernels * k, fill_kernels(stream.context()));
  // A grid-stride loop over a grid that fills the GPU a few times over.
  const unsigned threads = 256;
  const size_t max_blocks = static_cast<size_t>(stream.context().info().sm_count) * 8;
  const unsigned blocks = static_cast<unsigned>(std::min((n + threads - 1) / threads, max_blocks));
  KernelArgs args = KernelArgs::of(out, static_cast<unsigned long long>(n), static_cast<unsigned long long>(seed),
                                   lo, hi);
  return launch(stream, bf16 ? k->bf16 : k->f32, LaunchConfig::linear(blocks, threads), args);
}

}  // namespace

Status fill_random_f32(Stream& stream, CUdeviceptr out, size_t n, std::uint64_t seed, float lo, float hi) {
  return fill_random(stream, false, out, n, seed, lo, hi);
}

Status fill_random_bf16(Stream& stream, CUdeviceptr out, size_t n, std::uint64_t seed, float lo, float hi) {
  return fill_random(stream, true, out, n, seed, lo, hi);
}

float host_random_f32(std::uint64_t seed, std::uint64_t i, float lo, float hi) {
  return lj_device::uniform(seed, i, lo, hi);
}

Status fill_poison(Stream& stream, CUdeviceptr out, size_t bytes, size_t element_bytes) {
  const Driver& drv = stream.context().driver();
  if (element_bytes == 1) {
    LJ_CU(drv, cuMemsetD8Async, out, 0x7F, bytes, stream.handle());
    return {};
  }
  if (element_bytes != 2 && element_bytes != 4) {
    return Error{fmt::format("poison fill: no NaN pattern for {}-byte elements", element_bytes)};
  }
  if (bytes % 2 != 0 || out % 2 != 0) return Error{"poison fill: 16-bit pattern needs an even size and address"};
  LJ_CU(drv, cuMemsetD16Async, out, 0x7FC1, bytes / 2, stream.handle());
  return {};
}

Status fill_zero(Stream& stream, CUdeviceptr out, size_t bytes) {
  LJ_CU(stream.context().driver(), cuMemsetD8Async, out, 0, bytes, stream.handle());
  return {};
}

Status fill_random_operand(Stream& stream, CUdeviceptr out, size_t n, DType dtype, std::uint64_t seed) {
  switch (dtype) {
    case DType::BF16: return fill_random_bf16(stream, out, n, seed, -1.f, 1.f);
    case DType::F32: return fill_random_f32(stream, out, n, seed, -1.f, 1.f);
    case DType::I32: return fill_zero(stream, out, n * 4);
    case DType::I8: return fill_random_encoded(stream, out, n, dtype, seed, -127.f, 127.f);
    case DType::U4:
    case DType::I4: return fill_random_encoded(stream, out, n, dtype, seed, 0.f, 0.f);  // every code
    case DType::F16:
    case DType::F8E4M3:
    case DType::F8E5M2: return fill_random_encoded(stream, out, n, dtype, seed, -1.f, 1.f);
  }
  return Error{fmt::format("fill_random_operand: no fill for dtype {}", static_cast<int>(dtype))};
}

bool is_poison_f32(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits == 0x7FC17FC1u;
}

Result<std::vector<unsigned char>> random_encoded_host(size_t n, DType dtype, std::uint64_t seed, float lo, float hi) {
  if (is_packed(dtype)) {  // every byte is two valid codes: uniform bytes, whatever lo and hi
    std::vector<unsigned char> host(static_cast<size_t>(storage_bytes(dtype, static_cast<int64_t>(n))));
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;  // xorshift64*
    for (auto& b : host) {
      x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
      b = static_cast<unsigned char>((x * 0x2545F4914F6CDD1Dull) >> 56);
    }
    return host;
  }
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype));
  std::vector<unsigned char> table(65536 * eb), host(n * eb);
  for (size_t j = 0; j < 65536; ++j) {
    const double v = round_to(dtype, lo + (hi - lo) * (static_cast<double>(j) + 0.5) / 65536.0);
    if (!encode_element(dtype, v, table.data() + j * eb))
      return Error{fmt::format("random_encoded_host: {} does not encode as {}", v, dtype_name(dtype))};
  }
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;  // xorshift64*
  for (size_t i = 0; i < n; ++i) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    const size_t j = static_cast<size_t>((x * 0x2545F4914F6CDD1Dull) >> 48);
    std::memcpy(host.data() + i * eb, table.data() + j * eb, eb);
  }
  return host;
}

Status fill_random_encoded(Stream& stream, CUdeviceptr out, size_t n, DType dtype, std::uint64_t seed, float lo, float hi) {
  LJ_RT_ASSIGN(std::vector<unsigned char> host, random_encoded_host(n, dtype, seed, lo, hi));
  LJ_RT_TRY(copy_to_device(stream, out, host.data(), host.size()));
  return stream.synchronize();  // `host` goes out of scope
}

}  // namespace lj::rt
