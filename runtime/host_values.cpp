#include "runtime/host_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace lj::rt {

namespace {

double f16_value(uint16_t b) {
  const double s = (b & 0x8000) ? -1 : 1;
  const int e = (b >> 10) & 31, m = b & 1023;
  if (e == 31) return m ? NAN : s * INFINITY;
  if (e == 0) return s * m * std::ldexp(1.0, -24);
  return s * (1 + m / 1024.0) * std::ldexp(1.0, e - 15);
}
double fp8_value(DType t, uint8_t b) {
  const double s = (b & 0x80) ? -1 : 1;
  if (t == DType::F8E4M3) {
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    return e == 0 ? s * m * std::ldexp(1.0, -9) : s * (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  }
  const int e = (b >> 2) & 31, m = b & 3;
  if (e == 31) return m ? NAN : s * INFINITY;
  return e == 0 ? s * m * std::ldexp(1.0, -16) : s * (1 + m / 4.0) * std::ldexp(1.0, e - 15);
}

}  // namespace

double decode_element(DType t, const unsigned char* p) {
  switch (t) {
    case DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::BF16: { uint16_t b; std::memcpy(&b, p, 2); uint32_t u = static_cast<uint32_t>(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
    case DType::F16: { uint16_t b; std::memcpy(&b, p, 2); return f16_value(b); }
    case DType::F8E4M3:
    case DType::F8E5M2: return fp8_value(t, *p);
    case DType::I8: return static_cast<int8_t>(*p);
    case DType::I32: { int32_t b; std::memcpy(&b, p, 4); return b; }
  }
  return NAN;
}

}  // namespace lj::rt
