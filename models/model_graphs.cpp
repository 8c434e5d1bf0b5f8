// The model's embedding and head graphs; the layer graphs come from the layer builder.
#include "models/model_graphs.h"

#include "layerjit/builder.h"

namespace lj::models {

namespace {

Graph embed_graph(const ModelConfig& c) {
  GraphBuilder b(c.layer.name + "_embed");
  Value ids = b.input("ids", DType::I32, {Dim::sym("N")});
  Value table = b.param("embed_tokens", c.layer.dtype, {c.vocab, c.layer.hidden});
  return b.finish({b.embedding(table, ids).named("x")});
}

// Logits in f32 straight from the matmul's fp32 sums (one rounding), then the greedy choice.
Graph head_graph(const ModelConfig& c) {
  GraphBuilder b(c.layer.name + "_head");
  Value x = b.input("x", c.layer.dtype, {Dim::sym("B"), c.layer.hidden});
  Value norm = b.param("norm", c.layer.dtype, {c.layer.hidden});
  Value lm_head = b.param("lm_head", c.layer.dtype, {c.vocab, c.layer.hidden});
  Value h = b.rms_norm(x, norm, c.layer.eps).named("h");
  Value logits = b.matmul(h, lm_head, DType::F32).named("logits");
  Value next = b.argmax(logits).named("next");
  return b.finish({logits, next});
}

}  // namespace

ModelGraphs model_graphs(const ModelConfig& c) {
  return {embed_graph(c), llama_prefill(c.layer), llama_decode(c.layer), head_graph(c)};
}

Module model_module(const ModelConfig& c) {
  ModelGraphs g = model_graphs(c);
  Module m;
  m.graphs.push_back(std::move(g.embed));
  m.graphs.push_back(std::move(g.prefill));
  m.graphs.push_back(std::move(g.decode));
  m.graphs.push_back(std::move(g.head));
  return m;
}

}  // namespace lj::models
