// The builder: value naming, misuse of handles, inputs, finishing and declared result types.
#include <functional>

#include <catch2/catch.hpp>

#include "tests/unit/error_of.h"

#include "layerjit/builder.h"
#include "layerjit/text.h"

using namespace lj;

using lj_test::error_of;

TEST_CASE("results get fresh numeric names unless named", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  auto y = b.silu(x);
  auto z = b.relu(y).named("z");
  CHECK(y.name() == "0");
  CHECK(z.name() == "z");
}

TEST_CASE("fresh names skip names the user already took", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("0", DType::F32, {4});
  CHECK(b.silu(x).name() == "1");
}

TEST_CASE("naming a value twice the same is allowed, a clash is not", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  auto y = b.silu(x).named("y");
  CHECK(y.named("y").name() == "y");
  CHECK(error_of([&] { b.relu(x).named("y"); }) == "redefinition of value '%y' in @g");
  CHECK(error_of([&] { b.relu(x).named("bad name"); }) == "invalid value name 'bad name': use letters, digits, '_' and '.'");
}

TEST_CASE("inputs: duplicates and bad dimensions", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  CHECK(error_of([&] { b.input("x", DType::F32, {4}); }) == "redefinition of value '%x' in @g");
  CHECK(error_of([&] { b.input("y", DType::F32, {0}); }) == "bad dimension 0 in [0]: dimensions must be positive");
  CHECK(error_of([&] { b.input("z", DType::F32, {Dim::sym("not ok")}); }) ==
        "bad dimension 'not ok': a symbol is a name starting with a letter or '_', other than a dtype, true or false");
  // Symbols that would print back as something else are refused.
  CHECK(error_of([&] { b.input("z", DType::F32, {Dim::sym("3")}); }).find("bad dimension '3'") == 0);
  CHECK(error_of([&] { b.input("z", DType::F32, {Dim::sym("bf16")}); }).find("bad dimension 'bf16'") == 0);
  CHECK(error_of([&] { b.input("z", DType::F32, {Dim::sym("true")}); }).find("bad dimension 'true'") == 0);
  b.silu(x);
  // Inputs may still be declared after ops; they keep declaration order.
  auto w = b.param("w", DType::F32, {4});
  Graph g = b.finish({w});
  CHECK(g.inputs() == std::vector<ValueId>{x.id(), w.id()});
}

TEST_CASE("a value from another graph is rejected", "[builder]") {
  GraphBuilder a("a");
  GraphBuilder b("b");
  auto x = a.input("x", DType::F32, {4});
  auto y = b.input("y", DType::F32, {4});
  CHECK(error_of([&] { b.add(y, x); }) == "add: operand 1 (%x) belongs to another graph");
}

TEST_CASE("an empty value handle is rejected", "[builder]") {
  GraphBuilder b("g");
  auto y = b.input("y", DType::F32, {4});
  CHECK(error_of([&] { b.add(y, Value()); }) == "add: operand 1 is an empty Value handle");
  CHECK_FALSE(Value().valid());
}

TEST_CASE("a graph must return something", "[builder]") {
  GraphBuilder b("g");
  b.input("x", DType::F32, {4});
  CHECK(error_of([&] { b.finish({}); }) == "graph @g has no return: a graph must return at least one value");
}

TEST_CASE("the builder is spent after finish", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  Graph g = b.finish({x});
  CHECK(g.outputs().size() == 1);
  CHECK(error_of([&] { b.silu(x); }) == "graph builder used after finish()");
}

TEST_CASE("declared result types are checked at finish", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {Dim::sym("T"), 4});
  auto y = b.silu(x).named("y");
  b.declare_outputs({TensorType{DType::BF16, {Dim::sym("T"), 4}}});
  CHECK(error_of([&] { b.finish({y}); }) == "@g declares result 1 of 1 as bf16[T, 4] but returns %y of type f32[T, 4]");
}

TEST_CASE("declared result count is checked at finish", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  b.declare_outputs({x.type(), x.type()});
  CHECK(error_of([&] { b.finish({x}); }) == "@g declares 2 result types but returns 1 value");
}

TEST_CASE("result names given to op() must match the result count and be unique", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {6});
  Attrs a;
  a.set("axis", 0);
  a.set("sizes", AttrList{AttrValue(2), AttrValue(4)});
  CHECK(error_of([&] { b.op(OpKind::Split, {x}, a, {}, {"p"}); }) == "split: produces 2 results but 1 name is given");
  CHECK(error_of([&] { b.op(OpKind::Split, {x}, a, {}, {"p", "p"}); }) == "redefinition of value '%p' in @g");
  CHECK(error_of([&] { b.op(OpKind::Split, {x}, a, {}, {"x", "q"}); }) == "redefinition of value '%x' in @g");
  auto r = b.op(OpKind::Split, {x}, a, {}, {"p", "q"});
  CHECK(r[1].name() == "q");
}

TEST_CASE("errors from op creation carry the given source location", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  try {
    b.op(OpKind::RmsNorm, {x}, {}, SourceLoc{"f.lj", 5, 9});
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(e.formatted() == "f.lj:5:9: error: rms_norm: expected 2 operands (x, w), got 1");
  }
}

TEST_CASE("nodes record operands, results, attributes and locations", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  auto w = b.param("w", DType::F32, {4});
  b.op(OpKind::RmsNorm, {x, w}, {}, SourceLoc{"f.lj", 2, 3});
  auto y = b.lookup("0");
  REQUIRE(y.has_value());
  Graph g = b.finish({*y});
  REQUIRE(g.nodes().size() == 1);
  const Node& n = g.node(0);
  CHECK(n.kind == OpKind::RmsNorm);
  CHECK(n.operands == std::vector<ValueId>{x.id(), w.id()});
  CHECK(n.attrs.get_float("eps") == 1e-5);
  CHECK(n.loc.str() == "f.lj:2:3");
  CHECK(g.value(n.results[0]).producer == 0);
  CHECK(g.value(w.id()).is_param);
  CHECK_FALSE(g.value(x.id()).is_param);
}

TEST_CASE("lookup finds values by name, also after a rename", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {4});
  CHECK(b.lookup("x").has_value());
  CHECK_FALSE(b.lookup("y").has_value());
  auto s = b.silu(x).named("s");
  s.named("t");
  CHECK_FALSE(b.lookup("s").has_value());
  REQUIRE(b.lookup("t").has_value());
  CHECK(b.lookup("t")->id() == s.id());
  b.relu(x).named("s");  // the old name is free again
}

TEST_CASE("graph names must be identifiers", "[builder]") {
  CHECK(error_of([] { GraphBuilder b("has space"); }) == "invalid graph name 'has space': use letters, digits, '_' and '.'");
}

TEST_CASE("printing a hand-built graph", "[builder]") {
  GraphBuilder b("mlp");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 8});
  auto w = b.param("w", DType::BF16, {16, 8});
  auto y = b.gelu(b.matmul(x, w).named("xw"), "none").named("y");
  Graph g = b.finish({y});
  CHECK(print_graph(g) ==
        "graph @mlp(\n"
        "    %x: bf16[T, 8],\n"
        "    %w: param bf16[16, 8]) -> bf16[T, 16] {\n"
        "  %xw = matmul(%x, %w)  // bf16[T, 16]\n"
        "  %y = gelu(%xw) {approx = \"none\"}  // bf16[T, 16]\n"
        "  return %y\n"
        "}\n");
}

TEST_CASE("a graph with no inputs prints an empty parameter list", "[builder]") {
  GraphBuilder b("empty");
  // Only inputs can start a graph, so a graph without inputs has nothing to return.
  CHECK(error_of([&] { b.finish({}); }).find("has no return") != std::string::npos);
}

TEST_CASE("names that are one C++ identifier are refused where the second is declared or renamed", "[builder]") {
  GraphBuilder b("g");
  auto x = b.input("x.in", DType::F32, {4, 8});
  CHECK_THROWS_WITH(b.input("x_in", DType::F32, {4, 8}),
                    "values %x.in and %x_in are one C++ identifier, x_in, in the kernels layerjit generates for @g: rename one "
                    "(names differing only in '.' and '_' collide)");
  auto y = b.silu(x);
  CHECK_THROWS_WITH(y.named("x_in"), Catch::Contains("values %x.in and %x_in are one C++ identifier"));
  // Renaming a value to another name of its own identifier is fine; renaming it away frees the identifier.
  auto z = b.relu(x).named("z.out");
  CHECK_NOTHROW(z.named("z_out"));
  CHECK_THROWS(b.input("z.out", DType::F32, {4, 8}));
  z.named("zz");
  CHECK_NOTHROW(b.input("z.out", DType::F32, {4, 8}));
}
