// Internal interface of the CPU reference: one function per op family, called by the dispatch in
// reference_op.cpp after it has checked attributes and operand shapes against the shape rules.
// Every function receives the result type already inferred with constant dimensions, computes in
// double and rounds each stored element to the result dtype (round_to), so the returned tensor
// holds only values its dtype can represent.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "layerjit/reference.h"

namespace lj::ref {

// ---- shapes and indexing (tensor.cpp) ----

/// Constant dimensions of a type whose shape has no symbols (asserted).
std::vector<int64_t> const_dims(const TensorType& t);
/// A zero-filled tensor of a type whose shape has no symbols.
HostTensor make_result(const TensorType& t);
/// Row-major element strides of a shape.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);
/// Axis in [0, rank) for an axis that the shape rules have already range-checked.
int normalize_axis(int64_t axis, int rank);

/// A shape viewed around one axis as [outer, n, inner]: element (o, i, j) lives at (o * n + i) * inner + j.
struct AxisView {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
AxisView view_around(const std::vector<int64_t>& shape, int axis);

/// Reads an i32 tensor element as an integer (i32 tensors hold integral doubles).
int64_t as_index(const HostTensor& t, int64_t i);

// ---- families ----

// elementwise.cpp
enum class BinaryOp { Add, Sub, Mul, Div };
enum class UnaryOp { Silu, GeluTanh, GeluErf, Relu, Exp, Rsqrt };
HostTensor binary(BinaryOp op, const HostTensor& a, const HostTensor& b, const TensorType& out);
HostTensor unary(UnaryOp op, const HostTensor& x, const TensorType& out);
HostTensor cast(const HostTensor& x, const TensorType& out);

// matmul.cpp
/// With `row_scale` (one factor per row of x), each row's sums are scaled before rounding.
HostTensor matmul(const HostTensor& x, const HostTensor& w, const HostTensor* row_scale, const TensorType& out);

// norms.cpp
HostTensor rms_norm(const HostTensor& x, const HostTensor& w, double eps, const TensorType& out);
/// 1 / sqrt(mean(x^2) + eps) per row of the last dimension: rms_norm's factor.
HostTensor rms_scale(const HostTensor& x, double eps, const TensorType& out);
HostTensor layer_norm(const HostTensor& x, const HostTensor& w, const HostTensor& b, double eps,
                      const TensorType& out);

// rope.cpp
enum class RopeStyle { Half, Interleaved };
/// cos/sin of pos * inv_freq[i], the frequencies of ops/rope_frequencies.h.
std::vector<HostTensor> rope_table(const HostTensor& pos, const std::vector<double>& inv_freq,
                                   const std::vector<TensorType>& out);
HostTensor rope(const HostTensor& x, const HostTensor& cos, const HostTensor& sin, RopeStyle style,
                const TensorType& out);

// reductions.cpp
enum class ReduceOp { Sum, Max, Mean };
HostTensor softmax(const HostTensor& x, int64_t axis, const TensorType& out);
HostTensor reduce(ReduceOp op, const HostTensor& x, int64_t axis, const TensorType& out);
/// The index of each last-axis row's first largest element (NaN compares as larger than any number,
/// as torch.argmax treats it).
HostTensor argmax(const HostTensor& x, const TensorType& out);

// attention.cpp
// The output, and with a second result type the log-sum-exp of each query row.
std::vector<HostTensor> attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor* cache_pos,
                                  const HostTensor* block_table, bool causal, std::optional<double> scale,
                                  std::optional<int64_t> window, const std::vector<TensorType>& out);

// kv_cache.cpp
HostTensor kv_cache_write(const HostTensor& cache, const HostTensor& entries, const HostTensor& pos, const HostTensor* block_table,
                          const TensorType& out);

// movement.cpp
HostTensor reshape(const HostTensor& x, const TensorType& out);
HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm, const TensorType& out);
std::vector<HostTensor> split(const HostTensor& x, int64_t axis, const std::vector<TensorType>& out);
HostTensor concat(const std::vector<const HostTensor*>& xs, int64_t axis, const TensorType& out);
/// Rows of table [V, H] by ids; an id outside [0, V) is a UserError naming it.
HostTensor embedding(const HostTensor& table, const HostTensor& ids, const TensorType& out);

// quantize.cpp: `axis` empty means one scale for the whole tensor.
HostTensor quantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis, const TensorType& out);
/// Quantize without a scale operand: {codes, scale}, the scale computed from the amax (see quantize.cpp).
std::vector<HostTensor> quantize_dynamic(const HostTensor& x, std::optional<int64_t> axis,
                                         const std::vector<TensorType>& out);
/// Largest finite magnitude of a quantized dtype: 448 (f8e4m3), 57344 (f8e5m2), 127 (i8).
double quantize_max(DType t);
/// The dynamic scale for a group whose largest magnitude is `amax` (an f32 value).
double dynamic_scale(DType t, double amax);
HostTensor dequantize(const HostTensor& x, const HostTensor& scale, std::optional<int64_t> axis,
                      const TensorType& out);
/// Group-wise: `group` consecutive elements of the last axis share scale[.., k / group] and, where
/// `zero` is given, zero[.., k / group]: y = f32((x - zero) * scale) rounded to out's dtype.
HostTensor dequantize_groups(const HostTensor& x, const HostTensor& scale, const HostTensor* zero, int64_t group,
                             const TensorType& out);

}  // namespace lj::ref
