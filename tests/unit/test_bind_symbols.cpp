// bind_symbols: specialising a graph to concrete symbol values.
#include <catch2/catch.hpp>

#include "layerjit/builder.h"
#include "layerjit/passes.h"
#include "layerjit/text.h"

using namespace lj;

namespace {
Graph small_graph() {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 64});
  auto r = b.reshape(x, {Dim::sym("T"), 4, 16}).named("r");
  return b.finish({r});
}
}  // namespace

TEST_CASE("binding replaces symbols in input types, results and shape attributes", "[passes]") {
  Bindings bind;
  bind.set("T", 7);
  Graph g = bind_symbols(small_graph(), bind);
  CHECK(print_graph(g) ==
        "graph @g(\n"
        "    %x: bf16[7, 64]) -> bf16[7, 4, 16] {\n"
        "  %r = reshape(%x) {shape = [7, 4, 16]}  // bf16[7, 4, 16]\n"
        "  return %r\n"
        "}\n");
}

TEST_CASE("unbound symbols stay symbolic", "[passes]") {
  Bindings bind;
  bind.set("B", 3);
  CHECK(print_graph(bind_symbols(small_graph(), bind)) == print_graph(small_graph()));
}

TEST_CASE("non-positive bindings are rejected", "[passes]") {
  Bindings bind;
  bind.set("T", 0);
  CHECK_THROWS_WITH(bind_symbols(small_graph(), bind), "symbol T bound to 0: symbol values must be positive");
}

TEST_CASE("binding keeps names, params and attributes, and is idempotent", "[passes]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 64});
  auto w = b.param("w", DType::BF16, {64});
  Graph g = b.finish({b.rms_norm(x, w, 1e-6).named("h")});
  Bindings bind;
  bind.set("T", 5);
  Graph once = bind_symbols(g, bind);
  Graph twice = bind_symbols(once, bind);
  CHECK(print_graph(once) == print_graph(twice));
  CHECK(once.value(once.inputs()[1]).is_param);
  CHECK(once.node(0).attrs.get_float("eps") == 1e-6);
  CHECK(once.value(once.outputs()[0]).name == "h");
}
