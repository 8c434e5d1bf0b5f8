// Elementwise reference ops: broadcasting add/sub/mul/div, the activations and cast.
//
// Broadcasting is numpy's: shapes align at the right, a missing or size-1 dimension repeats. Math
// is done in double on the stored operand values and rounded once to the result dtype. Integer
// tensors: add/sub/mul saturate (the result is rounded like every store), div truncates toward zero
// as C and CUDA do, and an integer division by zero is an error rather than an arbitrary value.
#include <cmath>
#include <numbers>

#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

namespace lj::ref {

namespace {

// Element strides of `in` as seen from an output of rank `rank`: 0 along broadcast dimensions.
std::vector<int64_t> broadcast_strides(const HostTensor& in, const std::vector<int64_t>& out_shape) {
  const size_t rank = out_shape.size();
  const size_t offset = rank - in.shape.size();
  const std::vector<int64_t> own = row_major_strides(in.shape);
  std::vector<int64_t> s(rank, 0);
  for (size_t i = offset; i < rank; ++i)
    s[i] = in.shape[i - offset] == 1 && out_shape[i] != 1 ? 0 : own[i - offset];
  return s;
}

double apply_binary(BinaryOp op, double a, double b, bool integer) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div:
      if (!integer) return a / b;
      LJ_CHECK(b != 0.0, SourceLoc{}, "div: integer division by zero ({} / {})", a, b);
      return static_cast<double>(static_cast<int64_t>(a) / static_cast<int64_t>(b));
  }
  LJ_ASSERT(false, "unknown binary op {}", static_cast<int>(op));
  __builtin_unreachable();
}

double apply_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Silu: return x / (1.0 + std::exp(-x));
    case UnaryOp::GeluTanh: {
      // The tanh approximation (Hendrycks and Gimpel), as PyTorch's gelu(approximate="tanh").
      const double c = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
    case UnaryOp::GeluErf: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    case UnaryOp::Relu: return x < 0.0 ? 0.0 : x;  // NaN propagates, as in PyTorch
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Rsqrt: return 1.0 / std::sqrt(x);
  }
  LJ_ASSERT(false, "unknown unary op {}", static_cast<int>(op));
  __builtin_unreachable();
}

}  // namespace

HostTensor binary(BinaryOp op, const HostTensor& a, const HostTensor& b, const TensorType& out) {
  HostTensor y = make_result(out);
  const size_t rank = y.shape.size();
  const std::vector<int64_t> sa = broadcast_strides(a, y.shape);
  const std::vector<int64_t> sb = broadcast_strides(b, y.shape);
  const bool integer = !is_float(out.dtype);
  // Walk the output in row-major order with an index counter, moving both input offsets along.
  std::vector<int64_t> idx(rank, 0);
  int64_t ia = 0;
  int64_t ib = 0;
  for (int64_t n = 0; n < y.numel(); ++n) {
    y.data[static_cast<size_t>(n)] =
        round_to(out.dtype, apply_binary(op, a.data[static_cast<size_t>(ia)], b.data[static_cast<size_t>(ib)], integer));
    for (size_t d = rank; d-- > 0;) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < y.shape[d]) break;
      ia -= sa[d] * y.shape[d];
      ib -= sb[d] * y.shape[d];
      idx[d] = 0;
    }
  }
  return y;
}

HostTensor unary(UnaryOp op, const HostTensor& x, const TensorType& out) {
  HostTensor y = make_result(out);
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = round_to(out.dtype, apply_unary(op, x.data[i]));
  return y;
}

HostTensor cast(const HostTensor& x, const TensorType& out) {
  HostTensor y = make_result(out);
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = round_to(out.dtype, x.data[i]);
  return y;
}

}  // namespace lj::ref
