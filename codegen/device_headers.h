// The device headers generated kernels include (codegen/templates/layerjit/*.cuh), embedded into the
// library at build time: NVRTC gets them from memory and never reads the source tree at run time.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lj {

using DeviceHeaders = std::vector<std::pair<std::string, std::string>>;

/// (include name, text) pairs, e.g. ("layerjit/vec.cuh", ...), in a stable order; pass them to the
/// NVRTC compile of every generated kernel. The embedded texts, except where the environment variable
/// LAYERJIT_DEVICE_HEADERS names a directory: its files replace the embedded ones of the same include
/// name (DIR/layerjit/gemm.cuh replaces layerjit/gemm.cuh), so a template can be changed and measured
/// without rebuilding. Cache keys hash the texts, so kernels built from changed headers never mix with
/// the others. The replacement is reported on stderr once; a directory that replaces nothing, or a
/// file that cannot be read, is a UserError.
const DeviceHeaders& codegen_device_headers();

/// The texts compiled into the library (codegen/templates/layerjit/*.cuh at build time).
const DeviceHeaders& embedded_codegen_device_headers();

/// `base` with each header that `dir` holds under the same include name replaced by the file's text.
/// Returns the number replaced; `error` (if given) says why a replacement could not be read.
int override_device_headers(DeviceHeaders& base, const std::string& dir, std::string* error = nullptr);

}  // namespace lj
