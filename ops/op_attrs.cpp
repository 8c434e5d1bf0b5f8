// Typed attribute access: the attribute names as the schema table declares them.
#include "layerjit/op_attrs.h"

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::attr {

double eps(const Attrs& a) { return a.get_float("eps"); }
int64_t rope_dim(const Attrs& a) { return a.get_int("dim"); }
double rope_theta(const Attrs& a) { return a.get_float("theta"); }

RopeScaling rope_scaling(const Attrs& a) {
  RopeScaling s;
  if (!a.has("scaling")) return s;
  const std::string& kind = a.get_string("scaling");
  LJ_ASSERT(kind == "linear" || kind == "llama3", "rope_table scaling '{}' passed verification", kind);
  s.kind = kind == "linear" ? RopeScaling::Kind::Linear : RopeScaling::Kind::Llama3;
  s.factor = a.get_float("factor");
  if (s.kind == RopeScaling::Kind::Llama3) {
    s.low_freq_factor = a.get_float("low_freq_factor");
    s.high_freq_factor = a.get_float("high_freq_factor");
    s.original_max_pos = a.get_int("original_max_pos");
  }
  return s;
}

RopeStyle rope_style(const Attrs& a) {
  const std::string& s = a.get_string("style");
  LJ_ASSERT(s == "half" || s == "interleaved", "rope style '{}' passed verification", s);
  return s == "half" ? RopeStyle::Half : RopeStyle::Interleaved;
}

GeluApprox gelu_approx(const Attrs& a) {
  const std::string& s = a.get_string("approx");
  LJ_ASSERT(s == "tanh" || s == "none", "gelu approx '{}' passed verification", s);
  return s == "tanh" ? GeluApprox::Tanh : GeluApprox::Erf;
}

int64_t axis(const Attrs& a) { return a.get_int("axis"); }

std::optional<int64_t> scale_axis(const Attrs& a) {
  const AttrValue* v = a.find("axis");
  LJ_ASSERT(v != nullptr, "attribute 'axis' missing after verification");
  if (const auto* i = std::get_if<int64_t>(&v->v)) return *i;
  return std::nullopt;  // `none`
}

bool causal(const Attrs& a) { return a.get_bool("causal"); }
bool returns_lse(const Attrs& a) { return a.get_bool("lse"); }

std::optional<double> scale(const Attrs& a) {
  if (!a.has("scale")) return std::nullopt;
  return a.get_float("scale");
}

std::optional<int64_t> window(const Attrs& a) {
  if (!a.has("window")) return std::nullopt;
  return a.get_int("window");
}

std::optional<int64_t> group(const Attrs& a) {
  if (!a.has("group")) return std::nullopt;
  return a.get_int("group");
}

DType dtype(const Attrs& a) { return a.get_dtype("dtype"); }

std::optional<DType> out_dtype(const Attrs& a) {
  if (!a.has("out_dtype")) return std::nullopt;
  return a.get_dtype("out_dtype");
}

Shape shape(const Attrs& a) { return a.get_shape("shape"); }
std::vector<int64_t> perm(const Attrs& a) { return a.get_int_list("perm"); }
std::vector<int64_t> sizes(const Attrs& a) { return a.get_int_list("sizes"); }
bool keepdim(const Attrs& a) { return a.get_bool("keepdim"); }

}  // namespace lj::attr
