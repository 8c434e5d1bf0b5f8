// Graphs whose generated kernels the codegen tests compile and run: the Llama layers and small
// graphs with shapes that are not multiples of any vector width or block size.
#pragma once

#include <string>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"

namespace lj_test {

inline const char* kOddGraphs = R"(
graph @odd_rows(%x: bf16[T, 4095], %o: bf16[T, 4095], %w: param bf16[4095]) {
  %h = add(%x, %o)
  %n = rms_norm(%h, %w) {eps = 1e-5}
  return %h, %n
}
graph @odd_wide(%x: f32[T, 4097], %w: param f32[4097], %b: param f32[4097]) {
  %y = layer_norm(%x, %w, %b) {eps = 1e-5}
  %z = gelu(%y) {approx = "tanh"}
  return %z
}
graph @tiny_rows(%x: f16[T, 7], %s: f16[T, 1]) {
  %p = softmax(%x)
  %q = mul(%p, %s)
  return %q
}
graph @one_col(%x: bf16[T, 1], %y: bf16[T, 1]) {
  %z = sub(%x, %y)
  %e = exp(%z)
  return %e
}
graph @swiglu_odd(%gu: bf16[T, 2002]) {
  %g, %u = split(%gu) {axis = 1, sizes = [1001, 1001]}
  %a = silu(%g)
  %m = mul(%a, %u)
  return %m
}
graph @quant(%x: bf16[T, 96], %s: f32[], %sc: f32[96]) {
  %n = relu(%x)
  %q = quantize(%n, %s) {dtype = f8e4m3}
  %d = dequantize(%q, %s) {dtype = f32}
  %q8 = quantize(%x, %sc) {dtype = i8, axis = 1}
  %q5 = quantize(%x, %s) {dtype = f8e5m2}
  return %d, %q8, %q5
}
graph @rope_interleaved(%x: f16[T, 3, 64], %pos: i32[T]) {
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %y = rope(%x, %c, %s) {style = "interleaved"}
  return %y
}
)";

/// Every graph the codegen tests cover.
inline std::vector<lj::Graph> codegen_graphs() {
  std::vector<lj::Graph> out;
  for (const auto& c : {lj::LlamaConfig::llama3_8b(), lj::LlamaConfig::small()}) {
    out.push_back(lj::llama_prefill(c));
    out.push_back(lj::llama_decode(c));
  }
  for (auto& g : lj::parse_module(kOddGraphs, "codegen_graphs.h").graphs) out.push_back(std::move(g));
  return out;
}

}  // namespace lj_test
