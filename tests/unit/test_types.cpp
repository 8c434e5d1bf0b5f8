// DType tables, dimensions, shapes, symbolic element counts and bindings.
#include <catch2/catch.hpp>

#include "layerjit/error.h"
#include "layerjit/types.h"
#include "layerjit/check.h"

using namespace lj;

TEST_CASE("every dtype name parses back to the same dtype", "[types]") {
  for (DType t : all_dtypes()) {
    auto parsed = parse_dtype(dtype_name(t));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == t);
  }
  CHECK(all_dtypes().size() == 9);
}

TEST_CASE("dtype sizes and kinds", "[types]") {
  CHECK(dtype_bytes(DType::F32) == 4);
  CHECK(dtype_bytes(DType::BF16) == 2);
  CHECK(dtype_bytes(DType::F16) == 2);
  CHECK(dtype_bytes(DType::F8E4M3) == 1);
  CHECK(dtype_bytes(DType::F8E5M2) == 1);
  CHECK(dtype_bytes(DType::I8) == 1);
  CHECK(dtype_bytes(DType::I32) == 4);
  CHECK(dtype_bits(DType::U4) == 4);
  CHECK(dtype_bits(DType::I4) == 4);
  CHECK_FALSE(is_float(DType::U4));
  CHECK(is_float(DType::BF16));
  CHECK(is_float(DType::F8E4M3));
  CHECK_FALSE(is_float(DType::I8));
  CHECK_FALSE(is_float(DType::I32));
  CHECK(is_fp8(DType::F8E5M2));
  CHECK_FALSE(is_fp8(DType::BF16));
}

TEST_CASE("unknown dtype names are rejected", "[types]") {
  CHECK_FALSE(parse_dtype("float32").has_value());
  CHECK_FALSE(parse_dtype("BF16").has_value());
  CHECK_FALSE(parse_dtype("").has_value());
}

TEST_CASE("dims are constants or symbols", "[types]") {
  Dim c(4096);
  Dim s = Dim::sym("T");
  CHECK(c.is_const());
  CHECK(c.value() == 4096);
  CHECK(s.is_symbol());
  CHECK(s.symbol() == "T");
  CHECK(c.str() == "4096");
  CHECK(s.str() == "T");
  CHECK(Dim::sym("T") == s);
  CHECK_FALSE(Dim(1) == Dim::sym("T"));
}

TEST_CASE("shapes and tensor types print as in the text format", "[types]") {
  CHECK(shape_str({}) == "[]");
  CHECK(shape_str({Dim::sym("T"), 4096}) == "[T, 4096]");
  TensorType t{DType::BF16, {Dim::sym("B"), Dim::sym("C"), 8, 128}};
  CHECK(t.str() == "bf16[B, C, 8, 128]");
  CHECK(t.rank() == 4);
}

TEST_CASE("symbolic element counts compare products", "[types]") {
  auto a = dim_product({Dim::sym("T"), 4096});
  auto b = dim_product({Dim::sym("T"), 32, 128});
  auto c = dim_product({32, Dim::sym("T"), 128});
  auto d = dim_product({Dim::sym("B"), 4096});
  CHECK(a == b);
  CHECK(b == c);
  CHECK_FALSE(a == d);
  CHECK(a.str() == "4096*T");
  CHECK(dim_product({}).constant == 1);
}

TEST_CASE("element count overflow is flagged, not wrapped", "[types]") {
  auto p = dim_product({int64_t{1} << 40, int64_t{1} << 40});
  CHECK(p.overflow);
}

TEST_CASE("bindings resolve symbols and report unbound ones", "[types]") {
  Bindings b;
  b.set("T", 7);
  b.set("B", 2);
  b.set("T", 9);  // rebinding replaces
  CHECK(b.get("T") == 9);
  CHECK_FALSE(b.get("C").has_value());
  CHECK(resolve({Dim::sym("T"), 4096}, b) == std::vector<int64_t>{9, 4096});
  CHECK(numel({9, 4096}) == 9 * 4096);
  try {
    resolve(Dim::sym("C"), b);
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "symbol 'C' has no value: bind it, e.g. --bind C=16");
  }
}

TEST_CASE("user errors format with and without a location", "[types]") {
  UserError with("bad thing", SourceLoc{"a.lj", 3, 7});
  UserError without("bad thing");
  CHECK(with.formatted() == "a.lj:3:7: error: bad thing");
  CHECK(without.formatted() == "error: bad thing");
}

TEST_CASE("a user error's overlong line is elided in the middle, other lines kept", "[types]") {
  const std::string quoted = "got \"" + std::string(1000000, 'A') + "\" (expected a style)";
  UserError e("first line\n" + quoted + "\nlast line");
  const std::string m = e.what();
  CHECK(m.size() < 1000);
  CHECK(m.rfind("first line\ngot \"AAAA", 0) == 0);
  CHECK_THAT(m, Catch::Contains(" ... [999225 characters] ... "));
  CHECK_THAT(m, Catch::EndsWith("AAAA\" (expected a style)\nlast line"));
  // Under the limit nothing changes, and a multi-byte character is never cut in two.
  CHECK(std::string(UserError(std::string(1000, 'b')).what()) == std::string(1000, 'b'));
  std::string wide;
  for (int i = 0; i < 700; ++i) wide += "\xc3\xa9";  // é
  const std::string w = UserError(wide).what();
  CHECK(w.find(" ... [") % 2 == 0);
  CHECK(w.size() < wide.size());
}

TEST_CASE("internal errors ask to be reported", "[types]") {
  try {
    LJ_ASSERT(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL("expected an internal error");
  } catch (const InternalError& e) {
    std::string msg = e.what();
    CHECK(msg.find("internal error: assertion `1 + 1 == 3` failed: arithmetic is broken") == 0);
    CHECK(msg.find("please report") != std::string::npos);
  }
}
