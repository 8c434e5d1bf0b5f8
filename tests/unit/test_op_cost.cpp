// FLOP and minimum-byte counts used for roofline reporting.
#include <catch2/catch.hpp>

#include "layerjit/builder.h"
#include "ops/op_schema.h"

using namespace lj;

namespace {
OpCost cost_of(const Graph& g, NodeId id, const Bindings& b) {
  const Node& n = g.node(id);
  std::vector<TensorType> ops, res;
  for (ValueId v : n.operands) ops.push_back(g.value(v).type);
  for (ValueId v : n.results) res.push_back(g.value(v).type);
  return op_cost(n.kind, ops, res, n.attrs, b);
}
}  // namespace

TEST_CASE("matmul costs 2*M*N*K flops and reads both operands once", "[cost]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::BF16, {Dim::sym("T"), 4096});
  auto w = b.param("w", DType::BF16, {6144, 4096});
  Graph g = b.finish({b.matmul(x, w)});
  Bindings bind;
  bind.set("T", 7);
  OpCost c = cost_of(g, 0, bind);
  CHECK(c.flops == 2.0 * 7 * 6144 * 4096);
  CHECK(c.bytes == 2.0 * (7 * 4096 + 6144 * 4096 + 7 * 6144));
}

TEST_CASE("causal attention counts only the unmasked pairs", "[cost]") {
  GraphBuilder b("g");
  auto q = b.input("q", DType::BF16, {Dim::sym("T"), 4, 16});
  auto k = b.input("k", DType::BF16, {Dim::sym("T"), 2, 16});
  Graph g = b.finish({b.attention(q, k, k, true), b.attention(q, k, k, false)});
  Bindings bind;
  bind.set("T", 10);
  CHECK(cost_of(g, 0, bind).flops == 4.0 * 4 * 16 * 55);  // 10 + 9 + ... + 1 pairs
  CHECK(cost_of(g, 1, bind).flops == 4.0 * 4 * 16 * 100);
}

TEST_CASE("kv_cache_write moves only the new entries and reshape moves nothing", "[cost]") {
  GraphBuilder b("g");
  auto cache = b.input("cache", DType::BF16, {2, 1000, 8, 128});
  auto x = b.input("x", DType::BF16, {2, 8, 128});
  auto pos = b.input("pos", DType::I32, {2});
  auto w = b.kv_cache_write(cache, x, pos);
  auto r = b.reshape(x, {2, 1024});
  Graph g = b.finish({w, r});
  CHECK(cost_of(g, 0, {}).bytes == 2.0 * 2 * 8 * 128 * 2 + 2 * 4);
  CHECK(cost_of(g, 1, {}).bytes == 0);
}

TEST_CASE("elementwise costs scale with the output", "[cost]") {
  GraphBuilder b("g");
  auto x = b.input("x", DType::F32, {3, 5});
  Graph g = b.finish({b.silu(x)});
  OpCost c = cost_of(g, 0, {});
  CHECK(c.flops == 4 * 15);
  CHECK(c.bytes == 2 * 15 * 4);
}
