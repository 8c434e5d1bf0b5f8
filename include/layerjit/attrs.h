// Op attributes: a small typed value (integer, float, bool, string, dtype, bare name, list) and an
// ordered name -> value map. Order is the op schema's order, so printing is deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "layerjit/types.h"

namespace lj {

/// A bare identifier attribute value, e.g. `axis = none` or the `T` in `shape = [T, 32]`.
struct Name {
  std::string text;
  bool operator==(const Name& o) const = default;
};

struct AttrValue;
using AttrList = std::vector<AttrValue>;

struct AttrValue {
  std::variant<int64_t, double, bool, std::string, DType, Name, AttrList> v;

  AttrValue() : v(int64_t{0}) {}
  AttrValue(int64_t i) : v(i) {}              // NOLINT
  AttrValue(int i) : v(int64_t{i}) {}         // NOLINT
  AttrValue(double d) : v(d) {}               // NOLINT
  AttrValue(bool b) : v(b) {}                 // NOLINT
  AttrValue(std::string s) : v(std::move(s)) {}  // NOLINT
  AttrValue(const char* s) : v(std::string(s)) {}  // NOLINT
  AttrValue(DType t) : v(t) {}                // NOLINT
  AttrValue(Name n) : v(std::move(n)) {}      // NOLINT
  AttrValue(AttrList l) : v(std::move(l)) {}  // NOLINT

  bool operator==(const AttrValue& o) const = default;
  /// Text-format spelling: 5, 1e-05, true, "half", bf16, none, [T, 32, 128].
  std::string str() const;
  /// Human name of the held kind, for diagnostics: "integer", "float", "list", ...
  const char* kind_name() const;
};

/// Ordered attribute map.
class Attrs {
 public:
  void set(std::string name, AttrValue value);
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  bool operator==(const Attrs& o) const = default;

  // Typed getters; the verifier has already checked kinds, so a mismatch here is internal.
  int64_t get_int(std::string_view name) const;
  double get_float(std::string_view name) const;  // accepts an integer value too
  bool get_bool(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;
  DType get_dtype(std::string_view name) const;
  const AttrList& get_list(std::string_view name) const;
  std::vector<int64_t> get_int_list(std::string_view name) const;
  Shape get_shape(std::string_view name) const;  // list of integers and names

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace lj
