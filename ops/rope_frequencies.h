// RoPE's inverse frequencies, the one home of the formula: the CPU reference rotates by
// pos * inv_freq[i], and the generated kernels read the same doubles from a table emitted into
// their source (codegen/emit_common.cpp), so the two agree to the last bit of the angle.
//
//   plain:  inv_freq[i] = theta^(-2i/dim)
//   linear: inv_freq[i] / factor (positions interpolated: Hugging Face's "linear" rope_type)
//   llama3: Llama-3.1's bands (Hugging Face's "llama3" rope_type). With L = original_max_pos and
//           wavelength 2 pi / inv_freq[i]: wavelengths above L / low_freq_factor are divided by
//           factor, those below L / high_freq_factor are kept, and those between blend the two
//           with weight s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor):
//           (1 - s) * inv_freq / factor + s * inv_freq.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layerjit/op_attrs.h"

namespace lj {

/// inv_freq[0 .. dim/2) for a rope_table of head dimension `dim`, base `theta` and `scaling`.
std::vector<double> rope_inv_freq(int64_t dim, double theta, const attr::RopeScaling& scaling);

/// Why `scaling` is not a valid set of parameters ("" when it is): checked when a rope_table is
/// made, in the words of the attribute names.
std::string rope_scaling_problem(const attr::RopeScaling& scaling);

/// The formula as a comment for generated source: "theta^(-2i/dim)", or that with the scaling named.
std::string rope_inv_freq_formula(const attr::RopeScaling& scaling);

}  // namespace lj
