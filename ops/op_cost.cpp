// FLOP and minimum-byte counts per op, for roofline reporting (`layerjit plan`, `bench`).
//
// Conventions: a multiply-add is 2 FLOPs; elementwise ops count the arithmetic a kernel does per
// element (silu: exp, add, divide, multiply = 4); minimum bytes read each operand once and write each
// result once, except kv_cache_write, which touches only the entries it writes (the cache is
// updated in place).
#include <algorithm>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "ops/op_schema.h"
#include "layerjit/op_attrs.h"

namespace lj {

namespace {
double elems(const TensorType& t, const Bindings& b) { return static_cast<double>(numel(resolve(t.shape, b))); }
double bytes(const TensorType& t, const Bindings& b) { return elems(t, b) * dtype_bits(t.dtype) / 8; }
}  // namespace

OpCost op_cost(OpKind k, const std::vector<TensorType>& ops, const std::vector<TensorType>& res, const Attrs& attrs,
               const Bindings& b) {
  OpCost c;
  for (const auto& t : ops) c.bytes += bytes(t, b);
  for (const auto& t : res) c.bytes += bytes(t, b);
  const double out = res.empty() ? 0 : elems(res[0], b);
  switch (k) {
    case OpKind::Matmul: {
      double kdim = static_cast<double>(resolve(ops[0].shape.back(), b));
      c.flops = 2.0 * out * kdim + (ops.size() == 3 ? out : 0);  // the row scale: one product per output
      break;
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Relu:
    case OpKind::Exp:
    case OpKind::Rsqrt:
    case OpKind::Cast: c.flops = out; break;
    case OpKind::Silu: c.flops = 4 * out; break;
    case OpKind::Gelu: c.flops = 8 * out; break;
    case OpKind::RmsNorm: c.flops = 4 * out; break;      // square-add, scale by rsqrt, by weight
    case OpKind::RmsScale: c.flops = 2 * elems(ops[0], b); break;  // square-add per element
    case OpKind::LayerNorm: c.flops = 7 * out; break;    // mean, variance, normalise, affine
    case OpKind::RopeTable: c.flops = 2 * 2 * out; break;  // angle, then cos and sin
    case OpKind::Rope: c.flops = 3 * out; break;           // two products and an add per element
    case OpKind::Softmax: c.flops = 4 * out; break;
    case OpKind::Attention: {
      // q [.., T, Hq, D], k [.., S, Hkv, D]: QK^T and PV, 2*2*T*S*D per head; causal halves it.
      const int r = ops[0].rank();
      auto d = [&](const TensorType& t, int i) { return static_cast<double>(resolve(t.shape[static_cast<size_t>(r + i)], b)); };
      double batch = r == 4 ? d(ops[0], -4) : 1.0;
      double T = d(ops[0], -3), S = d(ops[1], -3), H = d(ops[0], -2), D = d(ops[0], -1);
      if (ops.size() == 5) {
        // Paged: each sequence addresses pages x page keys of the pool; the pool itself may be larger.
        S = static_cast<double>(resolve(ops[4].shape[1], b)) * S;
        c.bytes -= bytes(ops[1], b) + bytes(ops[2], b);
        c.bytes += 2 * batch * S * d(ops[1], -2) * D * dtype_bytes(ops[1].dtype);
      }
      double pairs = T * S;
      if (attr::causal(attrs) && ops.size() == 3) pairs = T * S - T * (T - 1) / 2.0;
      if (const std::optional<int64_t> w = attr::window(attrs); w && ops.size() == 3) {
        // Each query sees at most `window` keys.
        pairs = std::min(pairs, T * std::min(S, static_cast<double>(*w)));
      }
      c.flops = 4.0 * batch * H * D * pairs;
      break;
    }
    case OpKind::KvCacheWrite:
      // Read the new entries and the positions (and a paged cache's block table), write the new entries.
      c.bytes = 2 * bytes(ops[1], b) + bytes(ops[2], b) + (ops.size() == 4 ? bytes(ops[3], b) : 0.0);
      c.flops = 0;
      break;
    case OpKind::Reshape:
      c.bytes = 0;  // a view: no data moves
      break;
    case OpKind::Transpose:
    case OpKind::Split:
    case OpKind::Concat: c.flops = 0; break;
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMean: c.flops = elems(ops[0], b); break;
    // Divide and round; without a scale operand also |x| and the max that find the scale.
    case OpKind::Quantize: c.flops = (ops.size() == 1 ? 4 : 2) * out; break;
    case OpKind::Dequantize: c.flops = 2 * out; break;
    case OpKind::Embedding:
      // Only the gathered rows of the table are read.
      c.bytes = bytes(ops[1], b) + 2 * bytes(res[0], b);
      c.flops = 0;
      break;
    case OpKind::Argmax: c.flops = elems(ops[0], b); break;  // one comparison per element
    case OpKind::AllReduce: c.flops = elems(ops[0], b); break;  // one add per element and rank (the ring's share)
  }
  return c;
}

}  // namespace lj
