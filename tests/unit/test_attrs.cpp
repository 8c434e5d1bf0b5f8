// Attribute values: text spelling (the printer's round-trip contract) and typed access.
#include <catch2/catch.hpp>

#include "layerjit/attrs.h"
#include "layerjit/error.h"
#include "layerjit/graph.h"
#include "layerjit/op_attrs.h"
#include "layerjit/text.h"

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

TEST_CASE("typed op attribute accessors read what the text says, defaults filled by the schema", "[attrs]") {
  const Module m = parse_module(R"(
graph @a(%x: bf16[T, 64], %w: param bf16[64], %p: i32[T], %s: f32[], %c: f32[64], %kv: bf16[T, 2, 32]) {
  %n = rms_norm(%x, %w) {eps = 1e-6}
  %g = gelu(%n) {approx = "none"}
  %h = gelu(%g)
  %cos, %sin = rope_table(%p) {dim = 32, theta = 500000.0}
  %r = rope(%kv, %cos, %sin) {style = "interleaved"}
  %r2 = rope(%kv, %cos, %sin)
  %q = quantize(%x, %s) {dtype = f8e4m3}
  %q8 = quantize(%x, %c) {dtype = i8, axis = -1}
  %a, %b = split(%x) {axis = -1, sizes = [40, 24]}
  %t = transpose(%kv) {perm = [1, 0, 2]}
  %v = reshape(%x) {shape = [T, 8, 8]}
  %sm = softmax(%x)
  %rs = reduce_sum(%x) {axis = 0, keepdim = true}
  %y = matmul(%x, %x) {out_dtype = f32}
  %y2 = matmul(%x, %x)
  %o = attention(%kv, %kv, %kv) {causal = true, scale = 0.5}
  %o2, %lse = attention(%kv, %kv, %kv) {lse = true}
  %f = cast(%n) {dtype = f32}
  return %h, %r, %r2, %q, %q8, %a, %b, %t, %v, %sm, %rs, %y, %y2, %o, %o2, %lse, %f
}
)");
  const Graph& g = m.graphs.at(0);
  auto at = [&](const char* name) -> const Attrs& {
    for (const Node& n : g.nodes())
      for (ValueId r : n.results)
        if (g.value(r).name == name) return n.attrs;
    FAIL("no value " << name);
    return g.nodes().at(0).attrs;
  };
  CHECK(attr::eps(at("n")) == 1e-6);
  CHECK(attr::gelu_approx(at("g")) == attr::GeluApprox::Erf);
  CHECK(attr::gelu_approx(at("h")) == attr::GeluApprox::Tanh);  // the default
  CHECK(attr::rope_dim(at("cos")) == 32);
  CHECK(attr::rope_theta(at("cos")) == 500000.0);
  CHECK(attr::rope_style(at("r")) == attr::RopeStyle::Interleaved);
  CHECK(attr::rope_style(at("r2")) == attr::RopeStyle::Half);
  CHECK(attr::dtype(at("q")) == DType::F8E4M3);
  CHECK(!attr::scale_axis(at("q")).has_value());  // axis = none
  CHECK(attr::scale_axis(at("q8")) == -1);
  CHECK(attr::axis(at("a")) == -1);
  CHECK(attr::sizes(at("a")) == std::vector<int64_t>{40, 24});
  CHECK(attr::perm(at("t")) == std::vector<int64_t>{1, 0, 2});
  CHECK(attr::shape(at("v")) == Shape{Dim::sym("T"), Dim(8), Dim(8)});
  CHECK(attr::axis(at("sm")) == -1);
  CHECK(attr::axis(at("rs")) == 0);
  CHECK(attr::keepdim(at("rs")));
  CHECK(attr::out_dtype(at("y")) == DType::F32);
  CHECK(!attr::out_dtype(at("y2")).has_value());
  CHECK(attr::causal(at("o")));
  CHECK(attr::scale(at("o")) == 0.5);
  CHECK(!attr::causal(at("o2")));
  CHECK(!attr::scale(at("o2")).has_value());
  CHECK(attr::returns_lse(at("o2")));
  CHECK(!attr::returns_lse(at("o")));
  CHECK(attr::dtype(at("f")) == DType::F32);
  CHECK_THROWS_AS(attr::eps(at("t")), InternalError);  // transpose has no eps
}
