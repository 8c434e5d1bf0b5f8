// Integer inputs for generated runs: block tables name distinct pool pages, positions fit every
// cache they index (contiguous or paged, one token or several).
#include <catch2/catch.hpp>

#include <set>

#include "jit/index_inputs.h"
#include "layerjit/text.h"

using namespace lj;

namespace {

ValueId input_named(const Graph& g, const std::string& name) {
  for (ValueId v : g.inputs())
    if (g.value(v).name == name) return v;
  FAIL("no input " << name);
  return -1;
}

}  // namespace

TEST_CASE("index inputs: distinct pages for block tables, positions inside paged and contiguous caches", "[exec]") {
  Module m = parse_module(R"(
graph @g(%q: bf16[B, 2, 4, 64], %kn: bf16[B, 2, 1, 64], %pool: bf16[P, 16, 1, 64], %pos: i32[B], %bt: i32[B, 3],
         %c: bf16[B, 40, 1, 64], %pos2: i32[B], %tok: i32[T]) {
  %kp = kv_cache_write(%pool, %kn, %pos, %bt)
  %o = attention(%q, %kp, %kp, %pos, %bt) {causal = true}
  %c2 = kv_cache_write(%c, %kn, %pos2)
  return %o, %c2
})", "<test>");
  const Graph& g = m.graphs[0];
  Bindings b;
  b.set("B", 5);
  b.set("P", 20);
  b.set("T", 9);
  for (uint64_t seed : {1, 2, 3}) {
    const HostTensor bt = jit::index_input(g, input_named(g, "bt"), b, seed, jit::IndexFill::Random);
    std::set<double> pages(bt.data.begin(), bt.data.end());
    CHECK(pages.size() == bt.data.size());  // 15 distinct pages of 20
    for (double p : bt.data) CHECK((p >= 0 && p < 20));
    // Paged: 3 x 16 = 48 positions, 2 new tokens -> pos in [0, 46].
    for (jit::IndexFill f : {jit::IndexFill::Random, jit::IndexFill::Last}) {
      const HostTensor pos = jit::index_input(g, input_named(g, "pos"), b, seed, f);
      for (double p : pos.data) CHECK((p >= 0 && p <= 46));
      const HostTensor pos2 = jit::index_input(g, input_named(g, "pos2"), b, seed, f);
      for (double p : pos2.data) CHECK((p >= 0 && p <= 38));  // 40 positions, 2 tokens
      if (f == jit::IndexFill::Last) {
        CHECK(pos.data == std::vector<double>(5, 46.0));
        CHECK(pos2.data == std::vector<double>(5, 38.0));
      }
    }
  }
  const HostTensor tok = jit::index_input(g, input_named(g, "tok"), b, 1, jit::IndexFill::Last);
  CHECK(tok.data == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8});
}
