#include "runtime/tensor_map.h"

#include <cstring>

#include <fmt/format.h>

namespace lj::rt {

std::string tensor_map_problem(CUdeviceptr base, DType dtype, uint64_t rows, uint64_t cols, uint64_t row_stride_bytes,
                               uint32_t box_rows, uint32_t box_cols, int swizzle_bytes) {
  const auto eb = static_cast<uint64_t>(dtype_bytes(dtype));
  const uint64_t span = swizzle_bytes > 0 ? static_cast<uint64_t>(swizzle_bytes) : 128;
  // The driver rejects these with a bare CUDA_ERROR_INVALID_VALUE; say which limit the view breaks.
  std::string why = swizzle_bytes != 0 && swizzle_bytes != 32 && swizzle_bytes != 64 && swizzle_bytes != 128
                        ? fmt::format("a swizzle of {} bytes (TMA has 32, 64 and 128)", swizzle_bytes)
                    : base % 16 != 0                    ? "the start address is not 16-byte aligned"
                    : row_stride_bytes % 16 != 0        ? "the row stride is not a multiple of 16 bytes"
                    : box_cols * eb > span              ? fmt::format("a box row is wider than the {}-byte swizzle", span)
                    : box_rows == 0 || box_rows > 256   ? "a box has 0 or more than 256 rows"
                    : rows == 0 || cols == 0            ? "the tensor is empty"
                                                        : "";
  if (why.empty()) return "";
  return fmt::format("tensor map over {} x {} {} at {:#x} (row stride {} B, box {} x {}): {}", rows, cols, dtype_name(dtype), base,
                     row_stride_bytes, box_rows, box_cols, why);
}

Result<TensorMapBytes> encode_tensor_map_2d(const Context& ctx, CUdeviceptr base, DType dtype, uint64_t rows, uint64_t cols,
                                            uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols, int swizzle_bytes) {
  CUtensorMapDataType type;
  switch (dtype) {
    case DType::BF16: type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    case DType::F16: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DType::F32: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; break;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::I8: type = CU_TENSOR_MAP_DATA_TYPE_UINT8; break;  // bytes: the kernel interprets them
    default: return Error{fmt::format("tensor map: no TMA element type for {}", dtype_name(dtype))};
  }
  if (std::string why = tensor_map_problem(base, dtype, rows, cols, row_stride_bytes, box_rows, box_cols, swizzle_bytes); !why.empty())
    return Error{std::move(why)};
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  CUresult r = ctx.api().cuTensorMapEncodeTiled_(&map, type, 2, reinterpret_cast<void*>(base), dims, strides, box,
                                                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                  swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                  : swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                                        : CU_TENSOR_MAP_SWIZZLE_NONE,
                                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Error{fmt::format("tensor map over {} x {} {} (row stride {} B, box {} x {}): {}", rows, cols, dtype_name(dtype),
                             row_stride_bytes, box_rows, box_cols, ctx.driver().describe(r, "cuTensorMapEncodeTiled"))};
  }
  TensorMapBytes out;
  static_assert(sizeof(map) == sizeof(out.bytes));
  std::memcpy(out.bytes, &map, sizeof(map));
  return out;
}

}  // namespace lj::rt
