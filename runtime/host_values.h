// Device element encodings on the host: the value of one element in its device encoding, for every IR
// dtype, exactly, and back (bf16/f16/fp8 widen to double without rounding). Used wherever a kernel's output
// is compared on the host: the GPU tests against the CPU reference, the autotuner between configs.
#pragma once

#include <optional>

#include "layerjit/host_tensor.h"
#include "layerjit/types.h"

namespace lj::rt {

/// The element of dtype `t` whose bytes start at `p` (NaN encodings give NaN). Not for the packed
/// 4-bit types, whose elements have no byte address of their own: decode_at.
double decode_element(DType t, const unsigned char* p);
/// Writes `v` in dtype `t`'s device encoding at `p`. False (bytes unspecified) when `v` is not exactly
/// representable in `t`: round first (HostTensor::round_to_dtype). Not for the packed types: encode_at.
bool encode_element(DType t, double v, unsigned char* p);
/// Element `i` of a row-major buffer of dtype `t` starting at `base`, every dtype: a 4-bit element is
/// the low nibble of byte i / 2 when i is even, the high nibble when odd (u4 0..15, i4 -8..7).
double decode_at(DType t, const unsigned char* base, size_t i);
/// Writes element `i` of such a buffer (a 4-bit element changes only its own nibble). False when `v`
/// is not exactly representable in `t`.
bool encode_at(DType t, double v, unsigned char* base, size_t i);
/// The whole tensor in its device encoding (row-major, storage_bytes(dtype, numel) from `out`). Returns the
/// index of the first element its dtype cannot hold exactly (the bytes are then unspecified), or
/// nullopt when every element was written.
std::optional<size_t> encode_tensor(const HostTensor& t, unsigned char* out);

}  // namespace lj::rt
