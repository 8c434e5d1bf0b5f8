// Runtime logic that needs neither GPU nor driver: target parsing and choice, timing statistics,
// L2 rotation counts, arena rounding, argument packing, tensor-map limits, the shared host/device
// random numbers and the host encodings of device elements.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/device/random.cuh"
#include "runtime/fill.h"
#include "runtime/host_values.h"
#include "runtime/launch.h"
#include "runtime/memory.h"
#include "runtime/nvrtc.h"
#include "runtime/tensor_map.h"
#include "runtime/timer.h"

using namespace lj::rt;

TEST_CASE("targets parse and print", "[nvrtc]") {
  for (const char* s : {"sm_80", "sm_90", "sm_90a", "compute_90", "sm_100a"}) {
    auto t = Target::parse(s);
    REQUIRE(t.ok());
    CHECK(t->name() == s);
  }
  CHECK(Target::parse("sm_90a")->arch_specific);
  CHECK(Target::parse("compute_90")->ptx_only);
  for (const char* s : {"sm90", "sm_", "sm_9x", "compute_", "gfx90a"}) {
    INFO(s);
    CHECK(!Target::parse(s).ok());
  }
}

TEST_CASE("choose_target: known arch, newer arch, older arch", "[nvrtc]") {
  const std::vector<int> archs = {75, 80, 86, 89, 90, 100, 120};
  auto h100 = choose_target(90, true, archs, "13.0");
  REQUIRE(h100.ok());
  CHECK(h100->target.name() == "sm_90a");
  CHECK(h100->warning.empty());
  CHECK(choose_target(80, false, archs, "13.0")->target.name() == "sm_80");

  // Newer than NVRTC knows: PTX for the newest virtual arch, with a warning that says so.
  auto future = choose_target(130, true, archs, "13.0");
  REQUIRE(future.ok());
  CHECK(future->target.name() == "compute_120");
  CHECK_THAT(future->warning, Catch::Contains("newer than NVRTC 13.0 knows"));
  CHECK_THAT(future->warning, Catch::Contains("driver JIT"));

  auto old = choose_target(50, false, archs, "13.0");
  REQUIRE(!old.ok());
  CHECK_THAT(old.message(), Catch::Contains("older than NVRTC 13.0 supports"));

  // A minor revision NVRTC lacks runs the same major's older cubin.
  auto minor = choose_target(87, false, archs, "13.0");
  REQUIRE(minor.ok());
  CHECK(minor->target.name() == "sm_86");
  CHECK(!minor->warning.empty());
}

TEST_CASE("timing statistics: median, quantiles, spread", "[timer]") {
  Timing t = summarize({5, 1, 4, 2, 3});
  CHECK(t.median_ms == 3);
  CHECK(t.min_ms == 1);
  CHECK(t.max_ms == 5);
  CHECK(t.p10_ms == Approx(1.4));
  CHECK(t.p90_ms == Approx(4.6));
  CHECK(t.spread() == Approx(3.2 / 3));
  CHECK(t.samples_ms == std::vector<double>{5, 1, 4, 2, 3});  // kept in run order
  CHECK(summarize({}).median_ms == 0);
}

TEST_CASE("rotation count spans twice the L2", "[timer]") {
  const size_t l2 = 60u << 20;
  CHECK(rotations_for(l2 * 4, l2) == 1);
  CHECK(rotations_for(l2, l2) == 2);
  CHECK(rotations_for(l2 / 3, l2) == 6);
  CHECK(rotations_for(1, l2) == 64);
  CHECK(rotations_for(0, l2) == 1);
}

TEST_CASE("arena rounds requests to its granules", "[memory]") {
  CHECK(Arena::round_up(0) == 256);
  CHECK(Arena::round_up(1) == 256);
  CHECK(Arena::round_up(257) == 512);
  CHECK(Arena::round_up((1u << 20) + 1) == (2u << 20));
  CHECK(Arena::round_up(3u << 20) == (4u << 20));
}

TEST_CASE("kernel arguments are packed at their alignment", "[launch]") {
  KernelArgs a = KernelArgs::of(char{1}, double{2.5}, int{7});
  REQUIRE(a.count() == 3);
  CHECK(a.sizes() == std::vector<size_t>{1, 8, 4});
  void** p = a.pointers();
  CHECK(*static_cast<char*>(p[0]) == 1);
  CHECK(reinterpret_cast<uintptr_t>(p[1]) % alignof(double) == 0);
  double d = 0;
  std::memcpy(&d, p[1], sizeof d);
  CHECK(d == 2.5);
  a.set(2, int{9});
  CHECK(*static_cast<int*>(a.pointers()[2]) == 9);
}

TEST_CASE("host random numbers: deterministic, in range, seed-dependent", "[fill]") {
  float lo = -1.0f;
  float hi = 1.0f;
  int differ = 0;
  for (unsigned i = 0; i < 1000; ++i) {
    const float v = host_random_f32(42, i, lo, hi);
    CHECK(v >= lo);
    CHECK(v < hi);
    CHECK(v == host_random_f32(42, i, lo, hi));
    differ += v != host_random_f32(43, i, lo, hi);
  }
  CHECK(differ > 990);
  CHECK(lj_device::float_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(lj_device::float_to_bf16_bits(-2.0f) == 0xC000);
  CHECK(lj_device::float_to_bf16_bits(1.00390625f) == 0x3F80);  // tie rounds to even
  float nan_pair = 0;
  const unsigned pattern = 0x7FC17FC1u;
  std::memcpy(&nan_pair, &pattern, sizeof nan_pair);
  CHECK(nan_pair != nan_pair);
  CHECK(is_poison_f32(nan_pair));
}

TEST_CASE("roofline: the bound and the fraction of the attainable throughput", "[timer]") {
  const double peak_flops = 800e12, peak_bw = 4e12;  // ridge point: 200 FLOP per byte
  // A 4096^3 GEMM moving 96 MiB: intensity ~1365, compute-bound; 0.2 ms is 687 TFLOP/s, 86 %.
  const double gemm_flops = 2.0 * 4096 * 4096 * 4096, gemm_bytes = 3.0 * 4096 * 4096 * 2;
  const RooflinePoint gemm = roofline(gemm_flops, gemm_bytes, 0.2e-3, peak_flops, peak_bw);
  CHECK(gemm.compute_bound);
  CHECK(gemm.fraction == Approx(gemm_flops / 0.2e-3 / peak_flops));
  // A GEMV (2 FLOP per 2-byte weight): memory-bound; 1 GB/ms of weights is 1 TB/s = 25 % of 4 TB/s.
  const RooflinePoint gemv = roofline(1e9, 1e9, 1e-3, peak_flops, peak_bw);
  CHECK_FALSE(gemv.compute_bound);
  CHECK(gemv.fraction == Approx(0.25));
  // A copy: no FLOPs, the fraction of the bandwidth.
  const RooflinePoint copy = roofline(0, 2e9, 1e-3, peak_flops, peak_bw);
  CHECK_FALSE(copy.compute_bound);
  CHECK(copy.fraction == Approx(0.5));
  // Exactly at the ridge point both ceilings agree.
  CHECK(roofline(200e9, 1e9, 1e-3, peak_flops, peak_bw).fraction == Approx(0.25));
  CHECK(roofline(1, 1, 0, peak_flops, peak_bw).fraction == 0);  // no time measured: no claim
}

TEST_CASE("tensor maps: views the driver would refuse are named with the limit they break", "[tensor_map]") {
  using lj::DType;
  // x of a [4096, 4096] bf16 GEMM in 128 x 64 boxes, and W's rows in boxes of 128.
  CHECK(tensor_map_problem(0x10000, DType::BF16, 4096, 4096, 8192, 128, 64).empty());
  CHECK(tensor_map_problem(0x10000, DType::BF16, 1, 8, 16, 256, 64).empty());
  CHECK_THAT(tensor_map_problem(0x10008, DType::BF16, 4096, 4096, 8192, 128, 64), Catch::Contains("start address is not 16-byte aligned"));
  CHECK_THAT(tensor_map_problem(0x10000, DType::BF16, 4096, 4095, 8190, 128, 64), Catch::Contains("row stride is not a multiple of 16"));
  CHECK_THAT(tensor_map_problem(0x10000, DType::BF16, 4096, 4096, 8192, 128, 128), Catch::Contains("wider than the 128-byte swizzle"));
  CHECK_THAT(tensor_map_problem(0x10000, DType::BF16, 4096, 4096, 8192, 512, 64), Catch::Contains("more than 256 rows"));
  // A narrower swizzle bounds the box row by its span (4-bit codes: rows of 32 bytes, the 32-byte one).
  CHECK(tensor_map_problem(0x10000, DType::I8, 4096, 2048, 2048, 64, 32, 32).empty());
  CHECK(tensor_map_problem(0x10000, DType::I8, 4096, 2048, 2048, 64, 128, 0).empty());
  CHECK_THAT(tensor_map_problem(0x10000, DType::I8, 4096, 2048, 2048, 64, 64, 32), Catch::Contains("wider than the 32-byte swizzle"));
  CHECK_THAT(tensor_map_problem(0x10000, DType::I8, 4096, 2048, 2048, 64, 32, 16), Catch::Contains("a swizzle of 16 bytes"));
  CHECK_THAT(tensor_map_problem(0x10000, DType::BF16, 0, 4096, 8192, 128, 64), Catch::Contains("the tensor is empty"));
  // The message says which view: its size, dtype, address, stride and box.
  CHECK_THAT(tensor_map_problem(0x10008, DType::F16, 7, 64, 128, 128, 64),
             Catch::Contains("tensor map over 7 x 64 f16 at 0x10008 (row stride 128 B, box 128 x 64)"));
}

TEST_CASE("fp8 elements encode to the code they decode from, and nothing else encodes", "[host_values]") {
  for (lj::DType t : {lj::DType::F8E4M3, lj::DType::F8E5M2}) {
    INFO(lj::dtype_name(t));
    int values = 0;
    for (int c = 0; c < 256; ++c) {
      const unsigned char code = static_cast<unsigned char>(c);
      const double v = decode_element(t, &code);
      unsigned char back = 0x5a;
      INFO("code 0x" << std::hex << c);
      if (std::isnan(v)) {
        CHECK_FALSE(encode_element(t, v, &back));
        continue;
      }
      REQUIRE(encode_element(t, v, &back));
      CHECK(back == code);  // -0 keeps its sign bit
      ++values;
      // Halfway to the next code up (or past the largest) is no value of the format.
      unsigned char next = static_cast<unsigned char>(c + 1);
      const double above = (c & 0x7f) == 0x7f ? INFINITY : decode_element(t, &next);
      if (std::isfinite(v) && v > 0 && !std::isnan(above)) {
        const double mid = std::isinf(above) ? v * 1.0625 : (v + above) / 2;
        CHECK_FALSE(encode_element(t, mid, &back));
      }
    }
    CHECK(values == (t == lj::DType::F8E4M3 ? 254 : 250));  // e4m3: 2 NaN codes; e5m2: 6
  }
  unsigned char b = 0;
  CHECK_FALSE(encode_element(lj::DType::F8E4M3, 480.0, &b));  // past e4m3's 448
  CHECK_FALSE(encode_element(lj::DType::F8E4M3, INFINITY, &b));
  CHECK(encode_element(lj::DType::F8E5M2, -INFINITY, &b));
  CHECK(b == 0xfc);
  CHECK_FALSE(encode_element(lj::DType::F8E5M2, 65536.0, &b));  // past e5m2's 57344
}

TEST_CASE("random encoded fills hold values of the whole range, not only the few exact ones", "[fill]") {
  // The table used to encode unrounded values: fp8 then held no code at all but zeros (seen in the
  // fp8 benchmarks' operands, 2026-12-01).
  for (lj::DType t : {lj::DType::F8E4M3, lj::DType::F8E5M2, lj::DType::F16, lj::DType::I8}) {
    INFO(lj::dtype_name(t));
    auto host = random_encoded_host(4096, t, 7, -1.f, 1.f);
    REQUIRE(host.ok());
    const size_t eb = static_cast<size_t>(lj::dtype_bytes(t));
    int zeros = 0, negative = 0;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < 4096; ++i) {
      const double v = decode_element(t, host->data() + i * eb);
      REQUIRE(std::isfinite(v));
      zeros += v == 0;
      negative += v < 0;
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    CHECK(lo >= -1.0);
    CHECK(hi <= 1.0);
    if (t == lj::DType::I8) {  // [-1, 1) rounds to -1, 0 and 1: about a quarter, a half, a quarter
      CHECK(negative > 700);
      CHECK(negative < 1350);
      continue;
    }
    CHECK(zeros < 200);
    CHECK(lo < -0.9);
    CHECK(hi > 0.9);
    CHECK(negative > 1750);
    CHECK(negative < 2350);
  }
}
