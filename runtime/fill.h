// Test-data fills on the device: a seeded random fill whose values the host can regenerate exactly
// (runtime/device/random.cuh), and a NaN poison fill for outputs, so a kernel that leaves an element
// unwritten fails the comparison instead of passing on stale zeros.
#pragma once

#include <cstdint>
#include <vector>

#include "layerjit/types.h"
#include "runtime/stream.h"

namespace lj::rt {

/// out[i] = uniform(seed, i) in [lo, hi), for n floats.
Status fill_random_f32(Stream& stream, CUdeviceptr out, size_t n, std::uint64_t seed, float lo, float hi);
/// The same values rounded to bfloat16 (n 16-bit elements).
Status fill_random_bf16(Stream& stream, CUdeviceptr out, size_t n, std::uint64_t seed, float lo, float hi);
/// n elements of `dtype` (any: f16, fp8 and i8 are what the device fills above do not cover) uniform
/// in [lo, hi) and rounded to the dtype, encoded on the host: random 16-bit indices into a table of
/// 65536 encoded values, so that a 64M-element operand takes a fraction of a second. u4 and i4: every
/// code, uniform random bytes (lo and hi unused).
Result<std::vector<unsigned char>> random_encoded_host(size_t n, DType dtype, std::uint64_t seed, float lo, float hi);
/// The same values uploaded to `out`. Synchronises the stream (the host copy is freed on return).
Status fill_random_encoded(Stream& stream, CUdeviceptr out, size_t n, DType dtype, std::uint64_t seed, float lo, float hi);
/// An operand of `dtype` with random values for tuning and benchmarks, one rule for every caller:
/// floating-point types uniform in [-1, 1) rounded to the type (bf16 and f32 filled on the device),
/// i8 codes in [-127, 127], u4 and i4 every code (uniform bytes), i32 (positions, page tables) zeros,
/// valid indices for any cache or table.
Status fill_random_operand(Stream& stream, CUdeviceptr out, size_t n, DType dtype, std::uint64_t seed);
/// The host twin of fill_random_f32: the value of element i, bit for bit.
float host_random_f32(std::uint64_t seed, std::uint64_t i, float lo, float hi);

/// Fills `bytes` with a NaN pattern for elements of `element_bytes` (1: 0x7F, a NaN in both fp8
/// formats; 2 or 4: repeated 0x7FC1, a NaN as f16, bf16 and, paired, f32). Uses the copy engine's
/// memset: exact, and no kernel to compile.
Status fill_poison(Stream& stream, CUdeviceptr out, size_t bytes, size_t element_bytes);
/// Zeroes `bytes` (kernel scratch buffers start zeroed; see codegen KernelParam::Kind::Scratch).
Status fill_zero(Stream& stream, CUdeviceptr out, size_t bytes);
/// True for the f32 poison pattern (to count unwritten outputs).
bool is_poison_f32(float value);

}  // namespace lj::rt
