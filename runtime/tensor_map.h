// TMA tensor maps: the 128-byte descriptor a kernel's `cp.async.bulk.tensor` reads, encoded on the
// host by the driver (cuTensorMapEncodeTiled) and passed to the kernel by value.
#pragma once

#include <cstdint>
#include <string>

#include "layerjit/types.h"
#include "runtime/context.h"
#include "runtime/result.h"

namespace lj::rt {

/// The encoded map as kernel-argument bytes (KernelArgs copies them; the driver aligns the parameter).
struct TensorMapBytes {
  unsigned char bytes[128];
};

/// A 2-D tiled map over `rows` x `cols` elements of `dtype` at `base`, rows `row_stride_bytes` apart,
/// loaded in boxes of box_rows x box_cols with the 128-byte swizzle (or the 32- or 64-byte one, or,
/// `swizzle_bytes` 0, as dense rows of the box); out-of-range elements read as
/// zeros. Errors (from the driver or the checks here) say which limit the view breaks: 16-byte
/// aligned start and stride, a box row of at most the swizzle span (128 bytes unswizzled), at most
/// 256 rows per box.
/// Why the driver would refuse such a map (empty when it fits the limits checked here): the start
/// address and the row stride must be 16-byte aligned, a box row at most the swizzle span (0, 32, 64
/// or 128 bytes; 128 without one), a box 1-256 rows, the tensor non-empty. Pure, so its messages are
/// tested without a GPU.
std::string tensor_map_problem(CUdeviceptr base, DType dtype, uint64_t rows, uint64_t cols, uint64_t row_stride_bytes,
                               uint32_t box_rows, uint32_t box_cols, int swizzle_bytes = 128);

Result<TensorMapBytes> encode_tensor_map_2d(const Context& ctx, CUdeviceptr base, DType dtype, uint64_t rows, uint64_t cols,
                                            uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols, int swizzle_bytes = 128);

}  // namespace lj::rt
