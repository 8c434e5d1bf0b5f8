// Reference rotary position embedding.
//   rope_table: cos[n, i] = cos(pos[n] * inv_freq[i]), sin likewise, for i < dim/2 (f32 tables), with
//               inv_freq[i] = theta^(-2i/dim) or its scaled form (ops/rope_frequencies.h).
//   rope:       x [..., H, D] rotated pairwise by the angles of cos/sin [..., D/2], whose leading
//               dimensions are x's without the head dimension (every head of a token shares them).
//     "half"        pairs (i, i + D/2): out[i] = x[i] cos - x[i+D/2] sin, out[i+D/2] = x[i+D/2] cos + x[i] sin
//                   (GPT-NeoX / Llama in Hugging Face layout)
//     "interleaved" pairs (2i, 2i + 1), the same rotation (GPT-J / original Meta Llama layout)
#include <cmath>

#include "ops/reference/reference_ops.h"

namespace lj::ref {

std::vector<HostTensor> rope_table(const HostTensor& pos, const std::vector<double>& inv_freq,
                                   const std::vector<TensorType>& out) {
  HostTensor cos_t = make_result(out.at(0));
  HostTensor sin_t = make_result(out.at(1));
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t n = 0; n < pos.numel(); ++n) {
    const double p = pos.data[static_cast<size_t>(n)];
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * inv_freq[static_cast<size_t>(i)];
      const size_t at = static_cast<size_t>(n * half + i);
      cos_t.data[at] = round_to(cos_t.dtype, std::cos(angle));
      sin_t.data[at] = round_to(sin_t.dtype, std::sin(angle));
    }
  }
  return {std::move(cos_t), std::move(sin_t)};
}

HostTensor rope(const HostTensor& x, const HostTensor& cos, const HostTensor& sin, RopeStyle style,
                const TensorType& out) {
  HostTensor y = make_result(out);
  const int64_t d = x.dim(-1);
  const int64_t half = d / 2;
  const int64_t heads = x.dim(-2);
  const int64_t lead = heads * d == 0 ? 0 : x.numel() / (heads * d);  // rows of the cos/sin tables
  for (int64_t l = 0; l < lead; ++l) {
    const double* c = cos.data.data() + l * half;
    const double* s = sin.data.data() + l * half;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (l * heads + h) * d;
      const double* xv = x.data.data() + base;
      double* yv = y.data.data() + base;
      for (int64_t i = 0; i < half; ++i) {
        // The pair (a, b) is rotated by angle i: (a cos - b sin, b cos + a sin).
        int64_t ia = 0;
        int64_t ib = 0;
        switch (style) {
          case RopeStyle::Half:
            ia = i;
            ib = i + half;
            break;
          case RopeStyle::Interleaved:
            ia = 2 * i;
            ib = 2 * i + 1;
            break;
        }
        const double a = xv[ia];
        const double b = xv[ib];
        yv[ia] = round_to(out.dtype, a * c[i] - b * s[i]);
        yv[ib] = round_to(out.dtype, b * c[i] + a * s[i]);
      }
    }
  }
  return y;
}

}  // namespace lj::ref
