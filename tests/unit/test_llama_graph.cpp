// The built-in Llama-3-8B decoder layer: structure, types and sizes.
#include <catch2/catch.hpp>

#include "layerjit/llama.h"

using namespace lj;

namespace {
int count(const Graph& g, OpKind k) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.kind == k;
  return n;
}
}  // namespace

TEST_CASE("prefill layer: ops, outputs and parameter bytes", "[llama]") {
  Graph g = llama_prefill(LlamaConfig::llama3_8b());
  CHECK(g.name() == "llama3_8b_prefill");
  CHECK(count(g, OpKind::Matmul) == 4);
  CHECK(count(g, OpKind::RmsNorm) == 2);
  CHECK(count(g, OpKind::Rope) == 2);
  CHECK(count(g, OpKind::Attention) == 1);
  REQUIRE(g.outputs().size() == 3);
  CHECK(g.value(g.outputs()[0]).type.str() == "bf16[T, 4096]");
  CHECK(g.value(g.outputs()[1]).type.str() == "bf16[T, 8, 128]");
  // 4096*6144 + 4096*4096 + 28672*4096 + 4096*14336 weights + two norms, all bf16.
  CHECK(g.param_bytes() == 2 * (4096LL * 6144 + 4096LL * 4096 + 28672LL * 4096 + 4096LL * 14336 + 2 * 4096));
  CHECK(g.symbols() == std::vector<std::string>{"T"});
}

TEST_CASE("decode layer: cache writes feed attention over the cache", "[llama]") {
  Graph g = llama_decode(LlamaConfig::llama3_8b());
  CHECK(count(g, OpKind::KvCacheWrite) == 2);
  CHECK(g.symbols() == std::vector<std::string>{"B", "C"});
  const Node* attn = nullptr;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::Attention) attn = &n;
  REQUIRE(attn != nullptr);
  REQUIRE(attn->operands.size() == 4);
  CHECK(g.value(attn->operands[1]).name == "k_cache_new");
  CHECK(g.value(attn->operands[0]).type.str() == "bf16[B, 1, 32, 128]");
  CHECK(attn->attrs.get_bool("causal"));
}

TEST_CASE("the small config matches the documented sizes", "[llama]") {
  LlamaConfig c = LlamaConfig::small();
  Graph g = llama_prefill(c);
  CHECK(g.value(g.inputs()[0]).type.str() == "bf16[T, 64]");
  CHECK(g.value(g.outputs()[1]).type.str() == "bf16[T, 2, 16]");
  CHECK(g.name() == "llama_small_prefill");
}

TEST_CASE("building twice gives identical graphs", "[llama]") {
  Graph a = llama_decode(LlamaConfig::small());
  Graph b = llama_decode(LlamaConfig::small());
  REQUIRE(a.nodes().size() == b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    CHECK(a.nodes()[i].kind == b.nodes()[i].kind);
    CHECK(a.nodes()[i].attrs == b.nodes()[i].attrs);
  }
}
