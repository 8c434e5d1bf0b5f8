// Typed attribute access: the attribute names as the schema table declares them.
#include "layerjit/op_attrs.h"

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj::attr {

double eps(const Attrs& a) { return a.get_float("eps"); }
int64_t rope_dim(const Attrs& a) { return a.get_int("dim"); }
double rope_theta(const Attrs& a) { return a.get_float("theta"); }

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
