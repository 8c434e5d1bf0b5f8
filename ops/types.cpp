// DType tables, dimension and shape printing, symbolic element counts and binding resolution.
#include "layerjit/types.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
  bool is_float;
};
constexpr bool kFloat = true;
constexpr bool kInt = false;
constexpr DTypeInfo kDTypes[] = {
#define LJ_X(id, name, bits, kind) {DType::id, name, bits, k##kind},
    LJ_DTYPES(LJ_X)
#undef LJ_X
};
const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  LJ_ASSERT(false, "unknown dtype {}", static_cast<int>(t));
  __builtin_unreachable();
}
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
int dtype_bits(DType t) { return info(t).bits; }
int dtype_bytes(DType t) {
  LJ_ASSERT(!is_packed(t), "{} packs two elements per byte: its sizes come from storage_bytes", dtype_name(t));
  return info(t).bits / 8;
}
int64_t storage_bytes(DType t, int64_t n) {
  LJ_ASSERT(n >= 0, "storage_bytes of {} elements", n);
  if (is_packed(t)) {
    LJ_ASSERT(n % 2 == 0, "{} elements of {} do not fill whole bytes", n, dtype_name(t));
    return n / 2;
  }
  const int64_t eb = info(t).bits / 8;
  if (n > INT64_MAX / eb) throw UserError(fmt::format("{} elements of {} are more bytes than int64 counts", n, dtype_name(t)));
  return n * eb;
}
int64_t tensor_bytes(DType t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    LJ_ASSERT(d >= 0, "tensor_bytes: negative dimension {}", d);
    if (d != 0 && n > INT64_MAX / d)
      throw UserError(fmt::format("a {}[{}] tensor has more elements than int64 counts", dtype_name(t), fmt::join(dims, ", ")));
    n *= d;
  }
  if (is_packed(t) && (dims.empty() || dims.back() % 2 != 0))
    throw UserError(fmt::format("a {}[{}] tensor: {} packs two elements per byte, so its last dimension must be even", dtype_name(t),
                                fmt::join(dims, ", "), dtype_name(t)));
  return storage_bytes(t, n);
}
bool is_float(DType t) { return info(t).is_float; }
bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }
bool is_packed(DType t) { return info(t).bits == 4; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

std::vector<DType> all_dtypes() {
  std::vector<DType> out;
  for (const auto& d : kDTypes) out.push_back(d.type);
  return out;
}

std::string Dim::str() const { return is_const() ? std::to_string(value_) : symbol_; }

bool is_valid_symbol(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  if (parse_dtype(name)) return false;
  return name != "true" && name != "false";  // in an attribute list these read as bools
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

std::string TensorType::str() const { return fmt::format("{}{}", dtype_name(dtype), shape_str(shape)); }

std::string DimProduct::str() const {
  std::string out = symbols.empty() || constant != 1 ? std::to_string(constant) : "";
  for (const auto& s : symbols) out += (out.empty() ? "" : "*") + s;
  return out;
}

DimProduct dim_product(const Shape& s) {
  DimProduct p;
  for (const auto& d : s) {
    if (d.is_symbol()) {
      p.symbols.push_back(d.symbol());
    } else if (__builtin_mul_overflow(p.constant, d.value(), &p.constant)) {
      p.overflow = true;
    }
  }
  std::sort(p.symbols.begin(), p.symbols.end());
  return p;
}

std::optional<int64_t> Bindings::get(std::string_view symbol) const {
  for (const auto& [k, v] : values)
    if (k == symbol) return v;
  return std::nullopt;
}

void Bindings::set(std::string symbol, int64_t value) {
  for (auto& [k, v] : values) {
    if (k == symbol) {
      v = value;
      return;
    }
  }
  values.emplace_back(std::move(symbol), value);
}

int64_t resolve(const Dim& d, const Bindings& b) {
  if (d.is_const()) return d.value();
  auto v = b.get(d.symbol());
  LJ_CHECK(v.has_value(), SourceLoc{}, "symbol '{}' has no value: bind it, e.g. --bind {}=16", d.symbol(),
           d.symbol());
  return *v;
}

std::vector<int64_t> resolve(const Shape& s, const Bindings& b) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& d : s) out.push_back(resolve(d, b));
  return out;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d > 0 && n > INT64_MAX / d)  // checked: a wrapped product was undefined behaviour (UBSan)
      throw UserError(fmt::format("a [{}] tensor has more elements than int64 counts", fmt::join(dims, ", ")));
    n *= d;
  }
  return n;
}

}  // namespace lj
