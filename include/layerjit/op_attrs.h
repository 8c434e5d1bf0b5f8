// Typed accessors of op attributes: one function per attribute, over a node's checked attribute map
// (check_attrs has filled the defaults and verified the kinds), so no code path looks an attribute
// up by its name. The schema table (ops/op_schema.cpp) declares the attributes and their defaults;
// these functions are the only other place that names them. Each asserts the attribute is there: a
// node of another op kind is an internal error.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "layerjit/attrs.h"
#include "layerjit/types.h"

namespace lj::attr {

/// rope's pairing: (i, i + D/2) within each head, or (2i, 2i + 1).
enum class RopeStyle : uint8_t { Half, Interleaved };
/// gelu's formula: the tanh approximation, or the exact erf form ("none").
enum class GeluApprox : uint8_t { Tanh, Erf };

/// rope_table's frequency scaling: the "scaling" attribute and its parameters (ops/rope_frequencies.h
/// turns them into frequencies). Verified when the node is made: a kind's parameters are all given,
/// and no parameter without its kind.
struct RopeScaling {
  enum class Kind : uint8_t { None, Linear, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;            ///< linear, llama3: positions (low frequencies) divided by it
  double low_freq_factor = 1.0;   ///< llama3: wavelengths above original_max_pos / this are scaled
  double high_freq_factor = 1.0;  ///< llama3: wavelengths below original_max_pos / this are kept
  int64_t original_max_pos = 0;   ///< llama3: the context the model was trained at first
};

double eps(const Attrs& a);             ///< rms_norm, rms_scale, layer_norm
int64_t rope_dim(const Attrs& a);       ///< rope_table: the head_dim its tables serve ("dim")
double rope_theta(const Attrs& a);      ///< rope_table: the frequency base ("theta")
RopeScaling rope_scaling(const Attrs& a);  ///< rope_table ("scaling", "factor", ...)
RopeStyle rope_style(const Attrs& a);   ///< rope ("style")
GeluApprox gelu_approx(const Attrs& a); ///< gelu ("approx")
/// softmax, split, concat, reduce_*: the axis as written (negative counts from the end).
int64_t axis(const Attrs& a);
/// quantize, dequantize: the scale's axis, or nullopt for `axis = none` (one scale per tensor, or
/// per row where a dynamic quantize computes it).
std::optional<int64_t> scale_axis(const Attrs& a);
bool causal(const Attrs& a);                 ///< attention
bool returns_lse(const Attrs& a);            ///< attention ("lse"): a log-sum-exp result too
std::optional<double> scale(const Attrs& a); ///< attention: nullopt where unset (1/sqrt(head_dim))
/// attention ("window"): a query at position p sees keys at positions p - window + 1 .. p (and no
/// later ones: a window implies causal); nullopt where unset (every key the mask allows).
std::optional<int64_t> window(const Attrs& a);
/// dequantize ("group"): how many consecutive elements along the last axis share one scale (and zero
/// point); nullopt where unset (per tensor or per `axis`).
std::optional<int64_t> group(const Attrs& a);
DType dtype(const Attrs& a);                 ///< cast, quantize, dequantize: the result's dtype
std::optional<DType> out_dtype(const Attrs& a);  ///< matmul: nullopt where unset (x's dtype)
Shape shape(const Attrs& a);                 ///< reshape
std::vector<int64_t> perm(const Attrs& a);   ///< transpose
std::vector<int64_t> sizes(const Attrs& a);  ///< split
bool keepdim(const Attrs& a);                ///< reduce_*

}  // namespace lj::attr
