#include "runtime/host_values.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "layerjit/check.h"

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

namespace {

// The fp8 code of v, field by field, checked by decoding it: false where v is not exactly one of the
// format's values (between two codes, past the largest, NaN). Direct, where a scan of the 256 codes
// per element took minutes over a 117M-element weight (`layerjit run` of an fp8 layer).
bool fp8_code(DType t, double v, unsigned char* p) {
  if (std::isnan(v)) return false;
  const bool e4m3 = t == DType::F8E4M3;
  const int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;  // mantissa bits, exponent bias
  const double a = std::fabs(v);
  unsigned code = 0;  // +-0: the sign bit alone
  if (std::isinf(a)) {
    if (e4m3) return false;  // e4m3 has no infinity
    code = 31u << 2;
  } else if (a != 0) {
    int e = 0;
    std::frexp(a, &e);
    --e;                                         // a in [2^e, 2^(e+1))
    const int emin = 1 - bias;                   // the smallest normal exponent
    const int field = e < emin ? 0 : e + bias;   // 0: subnormal
    if (field > (e4m3 ? 15 : 30)) return false;  // past the largest finite exponent
    const double steps = a / std::ldexp(1.0, (field == 0 ? emin : e) - mb) - (field == 0 ? 0 : 1 << mb);
    if (steps < 0 || steps >= (1 << mb) || steps != std::floor(steps)) return false;
    code = static_cast<unsigned>(field) << mb | static_cast<unsigned>(steps);
  }
  *p = static_cast<unsigned char>((std::signbit(v) ? 0x80u : 0u) | code);
  return decode_element(t, p) == v;  // e4m3's S.1111.111 decodes to NaN: not a value
}

uint16_t f16_bits(double v) {
  if (std::isnan(v)) return 0x7e00;
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e = static_cast<int>(std::floor(std::log2(a)));
  if (std::ldexp(1.0, e) > a) --e;
  if (e < -14) return sign | static_cast<uint16_t>(std::lround(a * std::ldexp(1.0, 24)));
  return sign | static_cast<uint16_t>(((e + 15) << 10) | std::lround((a / std::ldexp(1.0, e) - 1.0) * 1024));
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
    case DType::U4:
    case DType::I4: break;
  }
  LJ_ASSERT(false, "decode_element: {} elements have no byte address (decode_at)", dtype_name(t));
  __builtin_unreachable();
}

bool encode_element(DType t, double v, unsigned char* p) {
  switch (t) {
    case DType::F32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return static_cast<double>(f) == v || std::isnan(v); }
    case DType::BF16: {
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t b = static_cast<uint16_t>(u >> 16);
      std::memcpy(p, &b, 2);
      return decode_element(t, p) == v || std::isnan(v);
    }
    case DType::F16: { const uint16_t b = f16_bits(v); std::memcpy(p, &b, 2); return decode_element(t, p) == v || std::isnan(v); }
    case DType::F8E4M3:
    case DType::F8E5M2: return fp8_code(t, v, p);
    case DType::I8: { const int8_t b = static_cast<int8_t>(v); std::memcpy(p, &b, 1); return b == v; }
    case DType::I32: { const int32_t b = static_cast<int32_t>(v); std::memcpy(p, &b, 4); return b == v; }
    case DType::U4:
    case DType::I4: break;
  }
  LJ_ASSERT(false, "encode_element: {} elements have no byte address (encode_at)", dtype_name(t));
  __builtin_unreachable();
}

double decode_at(DType t, const unsigned char* base, size_t i) {
  if (!is_packed(t)) return decode_element(t, base + i * static_cast<size_t>(dtype_bytes(t)));
  const unsigned nibble = (i % 2 ? base[i / 2] >> 4 : base[i / 2]) & 0xFu;
  return t == DType::I4 && nibble >= 8 ? static_cast<double>(nibble) - 16.0 : static_cast<double>(nibble);
}

bool encode_at(DType t, double v, unsigned char* base, size_t i) {
  if (!is_packed(t)) return encode_element(t, v, base + i * static_cast<size_t>(dtype_bytes(t)));
  const double lo = t == DType::I4 ? -8.0 : 0.0;
  if (!(v >= lo && v <= lo + 15.0) || v != std::floor(v)) return false;  // NaN fails too
  const unsigned nibble = static_cast<unsigned>(static_cast<int>(v) & 0xF);
  unsigned char& b = base[i / 2];
  b = static_cast<unsigned char>(i % 2 ? (b & 0x0Fu) | (nibble << 4) : (b & 0xF0u) | nibble);
  return true;
}

std::optional<size_t> encode_tensor(const HostTensor& t, unsigned char* out) {
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!encode_at(t.dtype, t.data[i], out, i)) return i;
  return std::nullopt;
}

}  // namespace lj::rt
