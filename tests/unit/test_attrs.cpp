// Attribute values: text spelling (the printer's round-trip contract) and typed access.
#include <catch2/catch.hpp>

#include "layerjit/attrs.h"
#include "layerjit/error.h"

using namespace lj;

TEST_CASE("floats print as the shortest text that reads back, always marked as floats", "[attrs]") {
  CHECK(AttrValue(1e-5).str() == "1e-05");
  CHECK(AttrValue(500000.0).str() == "500000.0");
  CHECK(AttrValue(0.5).str() == "0.5");
  CHECK(AttrValue(-2.0).str() == "-2.0");
  CHECK(AttrValue(0.08838834764831845).str() == "0.08838834764831845");
  double back = std::stod(AttrValue(0.1 + 0.2).str());
  CHECK(back == 0.1 + 0.2);
}

TEST_CASE("other attribute kinds print in text-format spelling", "[attrs]") {
  CHECK(AttrValue(int64_t{-1}).str() == "-1");
  CHECK(AttrValue(true).str() == "true");
  CHECK(AttrValue(false).str() == "false");
  CHECK(AttrValue("half").str() == "\"half\"");
  CHECK(AttrValue("a\"b\\c").str() == "\"a\\\"b\\\\c\"");
  CHECK(AttrValue(DType::F8E4M3).str() == "f8e4m3");
  CHECK(AttrValue(Name{"none"}).str() == "none");
  CHECK(AttrValue(AttrList{AttrValue(Name{"T"}), AttrValue(32), AttrValue(128)}).str() == "[T, 32, 128]");
  CHECK(AttrValue(AttrList{}).str() == "[]");
}

TEST_CASE("attribute kind names for diagnostics", "[attrs]") {
  CHECK(std::string(AttrValue(1).kind_name()) == "integer");
  CHECK(std::string(AttrValue(1.0).kind_name()) == "float");
  CHECK(std::string(AttrValue("x").kind_name()) == "string");
  CHECK(std::string(AttrValue(AttrList{}).kind_name()) == "list");
  CHECK(std::string(AttrValue(Name{"n"}).kind_name()) == "name");
  CHECK(std::string(AttrValue(DType::I8).kind_name()) == "dtype");
  CHECK(std::string(AttrValue(false).kind_name()) == "bool");
}

TEST_CASE("attrs keep insertion order and replace on set", "[attrs]") {
  Attrs a;
  a.set("b", 1);
  a.set("a", 2);
  a.set("b", 3);
  REQUIRE(a.items().size() == 2);
  CHECK(a.items()[0].first == "b");
  CHECK(a.get_int("b") == 3);
  CHECK(a.get_int("a") == 2);
  CHECK(a.has("a"));
  CHECK_FALSE(a.has("c"));
}

TEST_CASE("typed getters", "[attrs]") {
  Attrs a;
  a.set("eps", 1);  // integers read as floats
  a.set("shape", AttrList{AttrValue(Name{"T"}), AttrValue(4)});
  a.set("perm", AttrList{AttrValue(1), AttrValue(0)});
  a.set("dtype", DType::BF16);
  CHECK(a.get_float("eps") == 1.0);
  CHECK(a.get_int_list("perm") == std::vector<int64_t>{1, 0});
  Shape s = a.get_shape("shape");
  REQUIRE(s.size() == 2);
  CHECK(s[0] == Dim::sym("T"));
  CHECK(s[1] == Dim(4));
  CHECK(a.get_dtype("dtype") == DType::BF16);
}

TEST_CASE("a getter of the wrong kind is an internal error", "[attrs]") {
  Attrs a;
  a.set("eps", "small");
  CHECK_THROWS_AS(a.get_float("eps"), InternalError);
  CHECK_THROWS_AS(a.get_int("missing"), InternalError);
}
