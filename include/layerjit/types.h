// Element types, dimensions and tensor types of the layerjit IR.
//
// A dimension is either an integer constant or a named symbol (`T`, `B`, `C`). Constants become
// compile-time constants in generated kernels; symbols become run-time kernel arguments, so a decode
// step whose context grows by one token never recompiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lj {

/// A value's index in its graph's value table (graph.h).
using ValueId = int32_t;

// The one list of element types: name in the text format, size in bits, kind. The 4-bit types are
// packed two to a byte: element 2j of a row in the low nibble of byte j, element 2j+1 in the high
// nibble (u4 codes 0..15, i4 two's complement -8..7), so a 4-bit tensor's last dimension is a
// constant even number and its rows are whole bytes (ir.md, "Packed 4-bit types").
#define LJ_DTYPES(X)             \
  X(F32, "f32", 32, Float)       \
  X(F16, "f16", 16, Float)       \
  X(BF16, "bf16", 16, Float)     \
  X(F8E4M3, "f8e4m3", 8, Float)  \
  X(F8E5M2, "f8e5m2", 8, Float)  \
  X(I8, "i8", 8, Int)            \
  X(I32, "i32", 32, Int)         \
  X(U4, "u4", 4, Int)            \
  X(I4, "i4", 4, Int)

enum class DType : uint8_t {
#define LJ_X(id, name, bits, kind) id,
  LJ_DTYPES(LJ_X)
#undef LJ_X
};

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
int dtype_bits(DType t);
/// Bytes of one element; not defined for the packed 4-bit types (an internal error): sizes of
/// tensors come from storage_bytes, which every type has.
int dtype_bytes(DType t);
/// Bytes that `numel` elements occupy (4-bit types: numel / 2, numel even); throws UserError when
/// the product overflows int64.
int64_t storage_bytes(DType t, int64_t numel);
/// Bytes of a dense row-major tensor of that shape: its element count, overflow-checked, times the
/// element size. Throws UserError naming the shape when the count overflows int64 or when a 4-bit
/// tensor's last dimension is odd (or it has none), which would split a byte between rows.
int64_t tensor_bytes(DType t, const std::vector<int64_t>& dims);
/// The most dimensions a tensor may have. Every kernel family indexes each dimension of a view in
/// its generated source, so a rank in the thousands made NVRTC run for minutes; 8 is what TensorRT
/// allows and more than any layer here needs (the KV caches are rank 4).
inline constexpr size_t kMaxRank = 8;
bool is_float(DType t);
bool is_fp8(DType t);
/// u4 or i4: two elements per byte.
bool is_packed(DType t);
std::vector<DType> all_dtypes();

/// One dimension: an integer constant (>= 0) or a named symbol bound at run time.
class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : value_(value) {}  // NOLINT: implicit, so shapes read as {T, 4096}
  static Dim sym(std::string name) {
    Dim d;
    d.symbol_ = std::move(name);
    return d;
  }
  bool is_const() const { return symbol_.empty(); }
  bool is_symbol() const { return !symbol_.empty(); }
  int64_t value() const { return value_; }          // only meaningful if is_const()
  const std::string& symbol() const { return symbol_; }
  std::string str() const;
  bool operator==(const Dim& o) const = default;

 private:
  int64_t value_ = 0;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);  // "[T, 4096]"

/// A symbol name prints back unambiguously: a letter or '_' first, then letters, digits, '_' or '.',
/// and not a dtype name, `true` or `false` (in a shape attribute those would read back as another kind).
bool is_valid_symbol(std::string_view name);

/// Number of elements as a symbolic product: constant factor times a sorted list of symbols.
/// Two shapes hold the same number of elements iff their products are equal.
struct DimProduct {
  int64_t constant = 1;
  std::vector<std::string> symbols;  // sorted, with repeats
  bool overflow = false;
  bool operator==(const DimProduct& o) const = default;
  std::string str() const;
};
DimProduct dim_product(const Shape& s);

/// Type of an SSA value: element type and shape.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  int rank() const { return static_cast<int>(shape.size()); }
  std::string str() const;  // "bf16[T, 4096]"
  bool operator==(const TensorType& o) const = default;
};

/// Values of the symbols for one call (e.g. T=7, B=2, C=64).
struct Bindings {
  std::vector<std::pair<std::string, int64_t>> values;
  std::optional<int64_t> get(std::string_view symbol) const;
  void set(std::string symbol, int64_t value);
};

/// Resolve a dimension or shape against bindings; throws UserError naming the unbound symbol.
int64_t resolve(const Dim& d, const Bindings& b);
std::vector<int64_t> resolve(const Shape& s, const Bindings& b);
/// The product of `dims`; throws UserError naming them when it overflows int64.
int64_t numel(const std::vector<int64_t>& dims);

}  // namespace lj
