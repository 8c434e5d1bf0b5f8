// HostTensor, deterministic random filling, and the shape/index helpers shared by the reference ops.
//
// fill_uniform draws from splitmix64 rather than a <random> distribution: the standard leaves the
// algorithms of std::uniform_real_distribution to each library, so libstdc++ and libc++ would give
// different "random" tensors for the same seed, and a golden value would hold on one toolchain only.
#include <cmath>

#include "layerjit/error.h"
#include "ops/reference/reference_ops.h"
#include "layerjit/check.h"

namespace lj {

HostTensor::HostTensor(DType dt, std::vector<int64_t> shp) : dtype(dt), shape(std::move(shp)) {
  for (int64_t d : shape)
    LJ_CHECK(d >= 0, SourceLoc{}, "HostTensor: dimension {} is negative in a {} tensor", d, dtype_name(dt));
  data.assign(static_cast<size_t>(lj::numel(shape)), 0.0);
}

void HostTensor::round_to_dtype() {
  for (double& x : data) x = round_to(dtype, x);
}

namespace {

// splitmix64 (Steele, Lea and Flood 2014): a 64-bit counter passed through a bijective mixer.
uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 53 random bits.
double unit_uniform(uint64_t& state) { return static_cast<double>(splitmix64_next(state) >> 11) * 0x1.0p-53; }

}  // namespace

void fill_codes(HostTensor& t, uint64_t seed) {
  LJ_ASSERT(is_packed(t.dtype), "fill_codes: {} is not a 4-bit type", dtype_name(t.dtype));
  const double lo = t.dtype == DType::I4 ? -8.0 : 0.0;
  fill_uniform(t, seed, lo - 0.5, lo + 15.5);
}

void fill_uniform(HostTensor& t, uint64_t seed, double lo, double hi) {
  LJ_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo < hi, SourceLoc{},
           "fill_uniform: need finite lo < hi, got [{}, {})", lo, hi);
  const bool integer = !is_float(t.dtype);
  uint64_t state = seed;
  for (double& x : t.data) {
    // A draw whose rounded value falls outside [lo, hi) (rounding up to hi, or an integer dtype's
    // floor below a fractional lo) is drawn again. A range holding no value of the dtype would never
    // end, so the number of tries is bounded.
    bool found = false;
    for (int attempt = 0; attempt < 64 && !found; ++attempt) {
      double u = lo + (hi - lo) * unit_uniform(state);
      double r = round_to(t.dtype, integer ? std::floor(u) : u);
      if (r >= lo && r < hi) {
        x = r;
        found = true;
      }
    }
    LJ_CHECK(found, SourceLoc{}, "fill_uniform: [{}, {}) holds (almost) no {} values", lo, hi, dtype_name(t.dtype));
  }
}

namespace ref {

std::vector<int64_t> const_dims(const TensorType& t) {
  std::vector<int64_t> out;
  out.reserve(t.shape.size());
  for (const Dim& d : t.shape) {
    LJ_ASSERT(d.is_const(), "reference result type {} still has a symbol", t.str());
    out.push_back(d.value());
  }
  return out;
}

HostTensor make_result(const TensorType& t) { return HostTensor(t.dtype, const_dims(t)); }

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

int normalize_axis(int64_t axis, int rank) {
  LJ_ASSERT(axis >= -rank && axis < rank, "axis {} out of range for rank {} after shape inference", axis, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

AxisView view_around(const std::vector<int64_t>& shape, int axis) {
  AxisView v;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    const int64_t d = shape[static_cast<size_t>(i)];
    if (i < axis) v.outer *= d;
    else if (i == axis) v.n = d;
    else v.inner *= d;
  }
  return v;
}

int64_t as_index(const HostTensor& t, int64_t i) {
  const double x = t.data.at(static_cast<size_t>(i));
  LJ_ASSERT(t.dtype == DType::I32 && x == std::floor(x), "index tensor element {} is {} ({})", i, x, dtype_name(t.dtype));
  return static_cast<int64_t>(x);
}

}  // namespace ref

}  // namespace lj
