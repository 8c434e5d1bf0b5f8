// Packed 4-bit weights: the host packing over every code pair (the nibble order the IR defines),
// byte sizes and their refusals, safetensors round trips, and the reference's group-wise
// dequantize and matmul over it against sums written out here from the codes, scales and zeros.
#include <cmath>
#include <filesystem>

#include "exec/safetensors.h"
#include "runtime/host_values.h"
#include "tests/reference/ref_test_util.h"

namespace lj {
namespace {

using test::attrs;
using test::random_tensor;
using test::run1;

// Random codes covering the dtype's whole range (every code equally likely).
HostTensor random_codes(DType t, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor h(t, std::move(shape));
  fill_codes(h, seed);
  return h;
}

TEST_CASE("4-bit pairs pack into one byte, element 2j low, and unpack to the same codes", "[int4][host_values]") {
  for (DType t : {DType::U4, DType::I4}) {
    const int lo = t == DType::I4 ? -8 : 0;
    INFO(dtype_name(t));
    for (int a = lo; a < lo + 16; ++a)
      for (int b = lo; b < lo + 16; ++b) {
        unsigned char byte[2] = {0x5A, 0xC3};  // the second byte must stay as it was
        REQUIRE(rt::encode_at(t, a, byte, 0));
        REQUIRE(rt::encode_at(t, b, byte, 1));
        CHECK(byte[0] == static_cast<unsigned char>((a & 15) | ((b & 15) << 4)));
        CHECK(byte[1] == 0xC3);
        CHECK(rt::decode_at(t, byte, 0) == a);
        CHECK(rt::decode_at(t, byte, 1) == b);
      }
    unsigned char byte = 0;
    for (double bad : {lo - 1.0, lo + 16.0, 0.5, double(NAN), double(INFINITY)}) CHECK_FALSE(rt::encode_at(t, bad, &byte, 0));
  }
  // Every byte value decodes to a pair that encodes back to it.
  for (int v = 0; v < 256; ++v) {
    const unsigned char byte = static_cast<unsigned char>(v);
    unsigned char back = 0;
    REQUIRE(rt::encode_at(DType::I4, rt::decode_at(DType::I4, &byte, 0), &back, 0));
    REQUIRE(rt::encode_at(DType::I4, rt::decode_at(DType::I4, &byte, 1), &back, 1));
    CHECK(back == byte);
  }
}

TEST_CASE("4-bit values round and saturate to their codes", "[int4][rounding]") {
  CHECK(round_to(DType::U4, 2.5) == 2);
  CHECK(round_to(DType::U4, 3.5) == 4);
  CHECK(round_to(DType::U4, -3.0) == 0);
  CHECK(round_to(DType::U4, 99.0) == 15);
  CHECK(round_to(DType::I4, -8.7) == -8);
  CHECK(round_to(DType::I4, 7.6) == 7);
  CHECK(round_to(DType::I4, -0.4) == 0);
  CHECK_FALSE(std::signbit(round_to(DType::I4, -0.4)));
}

TEST_CASE("4-bit tensors take half a byte per element and whole bytes per row", "[int4][types]") {
  CHECK(dtype_bits(DType::U4) == 4);
  CHECK(is_packed(DType::I4));
  CHECK_FALSE(is_packed(DType::I8));
  CHECK(tensor_bytes(DType::U4, {96, 256}) == 96 * 128);
  CHECK(tensor_bytes(DType::BF16, {3, 5}) == 30);
  CHECK(storage_bytes(DType::I4, 14) == 7);
  auto message = [](DType t, std::vector<int64_t> dims) {
    try {
      (void)tensor_bytes(t, dims);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message(DType::U4, {4, 7}) == "a u4[4, 7] tensor: u4 packs two elements per byte, so its last dimension must be even");
  CHECK(message(DType::I4, {}) == "a i4[] tensor: i4 packs two elements per byte, so its last dimension must be even");
  CHECK(message(DType::F32, {1LL << 40, 1LL << 40}) == "a f32[1099511627776, 1099511627776] tensor has more elements than int64 counts");
  CHECK(message(DType::F32, {1LL << 31, 1LL << 31}) == "4611686018427387904 elements of f32 are more bytes than int64 counts");
}

TEST_CASE("4-bit tensors round-trip through safetensors with their logical shape", "[int4][safetensors]") {
  const std::string path = (std::filesystem::temp_directory_path() / "layerjit_test_int4.safetensors").string();
  HostTensor u = random_codes(DType::U4, {3, 10}, 7), i = random_codes(DType::I4, {1, 6}, 8);
  exec::write_safetensors(path, {{"u", u}, {"i", i}});
  const exec::SafetensorsFile f = exec::SafetensorsFile::open(path);
  const exec::SafeTensor* tu = f.find("u");
  REQUIRE(tu != nullptr);
  CHECK(tu->dtype == DType::U4);
  CHECK(tu->shape == std::vector<int64_t>{3, 10});
  CHECK(tu->bytes == 15);
  CHECK(f.read(*tu).data == u.data);
  CHECK(f.read(*f.find("i")).data == i.data);
  std::filesystem::remove(path);
}

// w[n][k] = f32((q[n][k] - z[n][k / G]) * s[n][k / G]) rounded to bf16, written out from the definition.
double dequantized(const HostTensor& q, const HostTensor& s, const HostTensor* z, int64_t g, int64_t n, int64_t k) {
  const int64_t kk = q.shape[1], groups = kk / g;
  const auto at = static_cast<size_t>(n * groups + k / g);
  const double zero = z ? z->data[at] : 0.0;
  const float p = static_cast<float>(q.data[static_cast<size_t>(n * kk + k)] - zero) * static_cast<float>(s.data[at]);
  return round_to(DType::BF16, p);
}

TEST_CASE("group-wise dequantize: (q - zero) * scale per group of 32, 64, 128 or the whole row", "[int4][quantize]") {
  const int64_t n = 5, k = 256;
  for (int64_t g : {32, 64, 128, 256}) {
    for (DType sd : {DType::F16, DType::BF16, DType::F32}) {
      INFO("group " << g << ", scales " << dtype_name(sd));
      HostTensor q = random_codes(DType::U4, {n, k}, 11 + static_cast<uint64_t>(g));
      HostTensor s = random_tensor(sd, {n, k / g}, 12, 0.001, 0.05);
      // Zero points: u4 where each row has an even number of groups, i8 for one group per row.
      HostTensor z = k / g % 2 == 0 ? random_codes(DType::U4, {n, k / g}, 13) : random_tensor(DType::I8, {n, 1}, 13, 0, 15);
      HostTensor w = run1(OpKind::Dequantize, {&q, &s, &z}, attrs({{"dtype", DType::BF16}, {"group", g}}));
      HostTensor w0 = run1(OpKind::Dequantize, {&q, &s}, attrs({{"dtype", DType::BF16}, {"group", g}}));
      REQUIRE(w.shape == q.shape);
      REQUIRE(w.dtype == DType::BF16);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c) {
          REQUIRE(w.data[static_cast<size_t>(r * k + c)] == dequantized(q, s, &z, g, r, c));
          REQUIRE(w0.data[static_cast<size_t>(r * k + c)] == dequantized(q, s, nullptr, g, r, c));
        }
    }
  }
  // Signed codes, no zero point.
  HostTensor q = random_codes(DType::I4, {3, 64}, 21);
  HostTensor s = random_tensor(DType::F16, {3, 2}, 22, 0.01, 0.1);
  HostTensor w = run1(OpKind::Dequantize, {&q, &s}, attrs({{"dtype", DType::F16}, {"group", 32}}));
  for (int64_t i = 0; i < 3 * 64; ++i) {
    const double want = round_to(DType::F16, q.data[static_cast<size_t>(i)] * s.data[static_cast<size_t>(i / 32)]);
    REQUIRE(w.data[static_cast<size_t>(i)] == want);
  }
}

TEST_CASE("matmul over group-dequantized weights sums x times the dequantized codes", "[int4][matmul]") {
  const int64_t m = 3, n = 7, k = 192, g = 64;
  HostTensor x = random_tensor(DType::BF16, {m, k}, 31);
  HostTensor q = random_codes(DType::U4, {n, k}, 32);
  HostTensor s = random_tensor(DType::F16, {n, k / g}, 33, 0.001, 0.02);
  HostTensor z = random_tensor(DType::I8, {n, k / g}, 34, 0, 15);  // 3 groups per row: odd, so i8
  HostTensor w = run1(OpKind::Dequantize, {&q, &s, &z}, attrs({{"dtype", DType::BF16}, {"group", g}}));
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += x.data[static_cast<size_t>(r * k + j)] * dequantized(q, s, &z, g, c, j);
      CHECK(y.data[static_cast<size_t>(r * n + c)] == round_to(DType::BF16, acc));
    }
}

TEST_CASE("i8 x i8 matmul: exact integer sums, f32 by default, times the row scale", "[int8][matmul]") {
  const int64_t m = 4, n = 5, k = 300;
  HostTensor x = random_tensor(DType::I8, {m, k}, 41, -127, 127), w = random_tensor(DType::I8, {n, k}, 42, -127, 127);
  HostTensor rs = random_tensor(DType::F32, {m}, 43, 0.01, 0.1);
  HostTensor y = run1(OpKind::Matmul, {&x, &w});
  HostTensor ys = run1(OpKind::Matmul, {&x, &w, &rs});
  REQUIRE(y.dtype == DType::F32);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      int64_t acc = 0;
      for (int64_t j = 0; j < k; ++j)
        acc += static_cast<int64_t>(x.data[static_cast<size_t>(r * k + j)]) * static_cast<int64_t>(w.data[static_cast<size_t>(c * k + j)]);
      CHECK(y.data[static_cast<size_t>(r * n + c)] == static_cast<double>(acc));  // |acc| < 2^24: exact in f32
      CHECK(ys.data[static_cast<size_t>(r * n + c)] == round_to(DType::F32, static_cast<double>(acc) * rs.data[static_cast<size_t>(r)]));
    }
}

}  // namespace
}  // namespace lj
