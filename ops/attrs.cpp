// Attribute values: text spelling and typed access.
#include "layerjit/attrs.h"

#include <cmath>

#include <fmt/format.h>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj {

namespace {
// Shortest text that reads back to the same double, always marked as a float ("5.0", "1e-05").
std::string float_str(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;
}  // namespace

std::string AttrValue::str() const {
  return std::visit(Overloaded{
                        [](int64_t i) { return std::to_string(i); },
                        [](double d) { return float_str(d); },
                        [](bool b) { return std::string(b ? "true" : "false"); },
                        [](const std::string& s) {
                          std::string out = "\"";
                          for (char c : s) {
                            if (c == '"' || c == '\\') out += '\\';
                            out += c;
                          }
                          return out + "\"";
                        },
                        [](DType t) { return std::string(dtype_name(t)); },
                        [](const Name& n) { return n.text; },
                        [](const AttrList& l) {
                          std::string out = "[";
                          for (size_t i = 0; i < l.size(); ++i) {
                            if (i) out += ", ";
                            out += l[i].str();
                          }
                          return out + "]";
                        },
                    },
                    v);
}

const char* AttrValue::kind_name() const {
  return std::visit(Overloaded{
                        [](int64_t) { return "integer"; },
                        [](double) { return "float"; },
                        [](bool) { return "bool"; },
                        [](const std::string&) { return "string"; },
                        [](DType) { return "dtype"; },
                        [](const Name&) { return "name"; },
                        [](const AttrList&) { return "list"; },
                    },
                    v);
}

void Attrs::set(std::string name, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

namespace {
const AttrValue& need(const Attrs& a, std::string_view name) {
  const AttrValue* v = a.find(name);
  LJ_ASSERT(v != nullptr, "attribute '{}' missing after verification", name);
  return *v;
}
template <class T>
const T& need_as(const Attrs& a, std::string_view name) {
  const AttrValue& v = need(a, name);
  const T* p = std::get_if<T>(&v.v);
  LJ_ASSERT(p != nullptr, "attribute '{}' is a {}", name, v.kind_name());
  return *p;
}
}  // namespace

int64_t Attrs::get_int(std::string_view name) const { return need_as<int64_t>(*this, name); }
bool Attrs::get_bool(std::string_view name) const { return need_as<bool>(*this, name); }
const std::string& Attrs::get_string(std::string_view name) const { return need_as<std::string>(*this, name); }
DType Attrs::get_dtype(std::string_view name) const { return need_as<DType>(*this, name); }
const AttrList& Attrs::get_list(std::string_view name) const { return need_as<AttrList>(*this, name); }

double Attrs::get_float(std::string_view name) const {
  const AttrValue& v = need(*this, name);
  if (const auto* i = std::get_if<int64_t>(&v.v)) return static_cast<double>(*i);
  return need_as<double>(*this, name);
}

std::vector<int64_t> Attrs::get_int_list(std::string_view name) const {
  std::vector<int64_t> out;
  for (const auto& e : get_list(name)) {
    const auto* i = std::get_if<int64_t>(&e.v);
    LJ_ASSERT(i != nullptr, "attribute '{}' holds a {}", name, e.kind_name());
    out.push_back(*i);
  }
  return out;
}

Shape Attrs::get_shape(std::string_view name) const {
  Shape out;
  for (const auto& e : get_list(name)) {
    if (const auto* i = std::get_if<int64_t>(&e.v)) {
      out.emplace_back(*i);
    } else if (const auto* n = std::get_if<Name>(&e.v)) {
      out.push_back(Dim::sym(n->text));
    } else {
      LJ_ASSERT(false, "attribute '{}' holds a {}", name, e.kind_name());
    }
  }
  return out;
}

}  // namespace lj
