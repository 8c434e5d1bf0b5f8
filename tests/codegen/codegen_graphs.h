// Graphs whose generated kernels the codegen tests compile and run: the Llama layers and small
// graphs with shapes that are not multiples of any vector width or block size, among them per-row
// dynamic quantization after rms_norm, layer_norm and softmax (+ cast) and alone (rows of 1). The @mm_* graphs
// cover the GEMV kernel: (N, K) from (1, 7) to (129, 4095), bf16/f16/f32 inputs, an f32 output,
// x as a strided view of a split (offset 120 of a 1128-wide row: 16-byte loads; offset 1125:
// scalar loads of a 3-element row) and a rank-3 x. @rope_wide_cache has more RoPE pairs and cache
// runs per row than a CTA stages in registers (the loop after the barrier). @rope_copy_views and
// @rope_copy_odd return views of the buffer their RoPE kernel reads, which the kernel copies into
// buffers of their own: [T, H, D] and [T, D], 16-byte runs (one more than a CTA stages) and, in an
// odd-width row, scalar ones. The @attn_* graphs cover
// both attention kernels: prefill with GQA 4, MQA (f16, head_dim 64, a scale), MHA over strided views,
// and split-KV decode over a cache with positions and over the last of T keys, and over a paged cache
// (pool pages through a block table) written in the same graph; the GQA prefill and the cached decode
// also return each row's log-sum-exp. @embed_odd and @head_odd cover the embedding and argmax kernels
// (a 301-row table, rank-2 ids, an f32 table of odd width; argmax over 301, 128256 and 7 columns),
// the @dequant_* graphs the group-wise dequantize kernel (u4 codes with u4 zero points, i4 codes,
// u4 with i8 zeros and one scale per 34-wide row, i8 codes in groups; f16, bf16 and f32 scales), and
// @dotted.names names with '.' (value, symbol and graph: '_' in C++), and family_configs() the model
// families' layers.
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
graph @norm_fp8_rows(%x: bf16[T, 4095], %r: bf16[T, 4095], %w: param bf16[4095]) {
  %h = add(%x, %r)
  %n = rms_norm(%h, %w) {eps = 1e-5}
  %q, %qs = quantize(%n) {dtype = f8e4m3, axis = 0}
  return %h, %q, %qs
}
graph @layer_norm_e5m2_rows(%x: f32[T, 4096], %w: param f32[4096], %b: param f32[4096]) {
  %y = layer_norm(%x, %w, %b) {eps = 1e-5}
  %q, %qs = quantize(%y) {dtype = f8e5m2, axis = 0}
  return %q, %qs
}
graph @softmax_i8_rows(%x: f16[T, 7]) {
  %p = softmax(%x)
  %c = cast(%p) {dtype = bf16}
  %q, %qs = quantize(%c) {dtype = i8, axis = 0}
  return %q, %qs
}
graph @quant_one_col(%x: bf16[T, 1], %y: bf16[T, 1]) {
  %s = sub(%x, %y)
  %q, %qs = quantize(%s) {dtype = f8e4m3, axis = -2}
  return %q, %qs
}
graph @rope_interleaved(%x: f16[T, 3, 64], %pos: i32[T]) {
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %y = rope(%x, %c, %s) {style = "interleaved"}
  return %y
}
graph @rope_wide_cache(%x: f16[T, 20, 64], %v: bf16[T, 40, 128], %kc: f16[T, 9, 20, 64], %vc: bf16[T, 9, 40, 128],
                       %pos: i32[T]) {
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %y = rope(%x, %c, %s) {style = "interleaved"}
  %kn = kv_cache_write(%kc, %y, %pos)
  %vn = kv_cache_write(%vc, %v, %pos)
  return %y, %kn, %vn
}
graph @rope_copy_views(%x: bf16[T, 5384], %pos: i32[T]) {
  %y = silu(%x)
  %q, %v, %r = split(%y) {axis = 1, sizes = [256, 5120, 8]}
  %q3 = reshape(%q) {shape = [T, 4, 64]}
  %v3 = reshape(%v) {shape = [T, 40, 128]}
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %qr = rope(%q3, %c, %s) {style = "half"}
  return %qr, %v3, %r
}
graph @rope_copy_odd(%x: f16[T, 451], %pos: i32[T]) {
  %y = silu(%x)
  %q, %v, %r = split(%y) {axis = 1, sizes = [256, 192, 3]}
  %q3 = reshape(%q) {shape = [T, 4, 64]}
  %v3 = reshape(%v) {shape = [T, 3, 64]}
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %qr = rope(%q3, %c, %s) {style = "half"}
  return %qr, %v3, %r
}
graph @attn_gqa4_causal(%q: bf16[T, 8, 128], %k: bf16[T, 2, 128], %v: bf16[T, 2, 128]) {
  %o, %lse = attention(%q, %k, %v) {causal = true, lse = true}
  return %o, %lse
}
graph @attn_mqa_d64_f16(%q: f16[T, 8, 64], %k: f16[127, 1, 64], %v: f16[127, 1, 64]) {
  %o = attention(%q, %k, %v) {scale = 0.2}
  return %o
}
graph @attn_mha_views(%qkv: bf16[T, 3, 3, 64]) {
  %q, %k, %v = split(%qkv) {axis = 1, sizes = [1, 1, 1]}
  %q3 = reshape(%q) {shape = [T, 3, 64]}
  %k3 = reshape(%k) {shape = [T, 3, 64]}
  %v3 = reshape(%v) {shape = [T, 3, 64]}
  %o = attention(%q3, %k3, %v3) {causal = true}
  return %o
}
graph @attn_decode_cache(%q: bf16[T, 1, 4, 128], %kc: bf16[T, 37, 1, 128], %vc: bf16[T, 37, 1, 128], %pos: i32[T]) {
  %o, %lse = attention(%q, %kc, %vc, %pos) {causal = true, lse = true}
  return %o, %lse
}
graph @attn_decode_last(%q: f16[1, 8, 64], %k: f16[T, 2, 64], %v: f16[T, 2, 64]) {
  %o = attention(%q, %k, %v)
  return %o
}
graph @attn_paged_decode(%q: bf16[T, 1, 8, 64], %k_new: bf16[T, 2, 64], %v_new: bf16[T, 2, 64], %k_pool: bf16[400, 16, 2, 64],
                         %v_pool: bf16[400, 16, 2, 64], %pos: i32[T], %blocks: i32[T, 3]) {
  %kp = kv_cache_write(%k_pool, %k_new, %pos, %blocks)
  %vp = kv_cache_write(%v_pool, %v_new, %pos, %blocks)
  %o = attention(%q, %kp, %vp, %pos, %blocks) {causal = true}
  return %o
}
graph @mm_1x7(%x: bf16[T, 7], %w: param bf16[1, 7]) {
  %y = matmul(%x, %w)
  return %y
}
graph @mm_7x127(%x: bf16[T, 127], %w: param bf16[7, 127]) {
  %y = matmul(%x, %w)
  return %y
}
graph @mm_127x129_f32(%x: f32[T, 129], %w: param f32[127, 129]) {
  %y = matmul(%x, %w)
  return %y
}
graph @mm_1000_out_f32(%x: bf16[T, 1000], %w: param bf16[1000, 1000]) {
  %y = matmul(%x, %w) {out_dtype = f32}
  return %y
}
graph @mm_129x4095_f16(%x: f16[T, 4095], %w: param f16[129, 4095]) {
  %y = matmul(%x, %w)
  return %y
}
graph @mm_split_view(%xx: bf16[T, 1128], %w: param bf16[127, 1000], %w3: param bf16[7, 3]) {
  %a, %b, %c, %d = split(%xx) {axis = 1, sizes = [120, 1000, 5, 3]}
  %y = matmul(%b, %w)
  %z = matmul(%d, %w3)
  return %y, %z
}
graph @mm_rank3(%x: bf16[T, 3, 64], %w: param bf16[129, 64]) {
  %y = matmul(%x, %w)
  return %y
}
graph @embed_odd(%ids: i32[T], %table: param bf16[301, 72], %ids2: i32[T, 2], %t3: param f32[7, 3]) {
  %x = embedding(%table, %ids)
  %y = embedding(%t3, %ids2)
  return %x, %y
}
graph @head_odd(%x: bf16[T, 72], %w: param bf16[301, 72], %wide: f32[T, 128256], %h: bf16[T, 7]) {
  %l = matmul(%x, %w) {out_dtype = f32}
  %n = argmax(%l)
  %m = argmax(%wide)
  %k = argmax(%h)
  return %l, %n, %m, %k
}
graph @dequant_u4_zero(%x: bf16[T, 256], %w: param u4[96, 256], %s: param f16[96, 2], %z: param u4[96, 2]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @dequant_i4_rows(%x: f16[T, 96], %w: param i4[7, 96], %s: param bf16[7, 3], %w1: param u4[5, 34], %s1: param f32[5, 1],
                       %z1: param i8[5, 1]) {
  %d = dequantize(%w, %s) {dtype = f16, group = 32}
  %y = matmul(%x, %d)
  %e = dequantize(%w1, %s1, %z1) {dtype = f32, group = 34}
  return %y, %e
}
graph @dotted.names(%x.in: f32[T.len, 37], %b.ias: f32[37]) {
  %y.out = add(%x.in, %b.ias)
  %z = silu(%y.out)
  return %z
}
graph @dequant_i8_groups(%q: i8[T, 64], %s: f32[T, 2]) {
  %d = dequantize(%q, %s) {dtype = bf16, group = 32}
  return %d
}
)";

// Matmuls whose W is a group-wise dequantize of 4-bit params: at decode sizes (plans made for at most
// 16 rows) the dequantize is the matmul's weight prologue and the tensor-core GEMV reads the codes
// (templates/layerjit/gemv_q4.cuh). Odd N, K multiples of 32 but not of 128; u4 codes with i8 zero
// points in an odd number of groups and bf16 scales (the packed 16-bit path), f16 throughout with
// u4 zeros, i4 codes with f32 scales (the f32 path), one scale per row with SwiGLU and a residual,
// and a QKV projection with RoPE and cache writes in the epilogue. Groups of 128 or more take the
// scaled path (each k step's sums scaled in f32); K = 1024 and 2048 give every warp whole batches of
// steps at the default config (EVEN: loads without predicates), with u4 zeros and bf16 scales, and
// with i4 codes and one f16 scale per row on bf16 x; K = 4096 (Llama's) is long enough for u=4.
// The staged GEMV (codes through a cp.async ring) runs on those and on K = 1312 (11 k steps, the
// last one partly past K; groups of 32), whose shares are 3 steps at 4 warps. At one row with norm
// prologues (FusionOptions::norm_prologues) the rms_norm before q4_norm's matmul joins its GEMV (x
// times the norm's weight on load; K = 1344, 11 steps, the last one partly past K).
inline const char* kWeightPrologueGraphs = R"(
graph @q4_packed(%x: bf16[T, 416], %w: param u4[37, 416], %s: param bf16[37, 13], %z: param i8[37, 13]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 32}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_f16(%x: f16[T, 256], %w: param u4[50, 256], %s: param f16[50, 2], %z: param u4[50, 2]) {
  %d = dequantize(%w, %s, %z) {dtype = f16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_signed(%x: bf16[T, 192], %w: param i4[21, 192], %s: param f32[21, 3]) {
  %d = dequantize(%w, %s) {dtype = bf16, group = 64}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_even(%x: bf16[T, 1024], %w: param u4[45, 1024], %s: param bf16[45, 8], %z: param u4[45, 8]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_even_i4(%x: bf16[T, 2048], %w: param i4[19, 2048], %s: param f16[19, 1]) {
  %d = dequantize(%w, %s) {dtype = bf16, group = 2048}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_k4096(%x: bf16[T, 4096], %w: param u4[21, 4096], %s: param bf16[21, 32], %z: param u4[21, 32]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_run_i8(%x: bf16[T, 4096], %w: param u4[27, 4096], %s: param f16[27, 32], %z: param i8[27, 32]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_run_f32(%x: bf16[T, 4096], %w: param i4[23, 4096], %s: param f32[23, 32]) {
  %d = dequantize(%w, %s) {dtype = bf16, group = 128}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_staged_odd(%x: bf16[T, 1312], %w: param u4[29, 1312], %s: param bf16[29, 41], %z: param i8[29, 41]) {
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 32}
  %y = matmul(%x, %d)
  return %y
}
graph @q4_norm(%x: bf16[T, 1344], %g: param bf16[1344], %w: param u4[29, 1344], %s: param bf16[29, 42], %z: param u4[29, 42]) {
  %h = rms_norm(%x, %g) {eps = 1e-05}
  %d = dequantize(%w, %s, %z) {dtype = bf16, group = 32}
  %y = matmul(%h, %d)
  return %y
}
graph @q4_swiglu(%x: bf16[T, 160], %w: param u4[62, 160], %s: param bf16[62, 1], %r: bf16[T, 31]) {
  %d = dequantize(%w, %s) {dtype = bf16, group = 160}
  %gu = matmul(%x, %d)
  %g, %u = split(%gu) {axis = 1, sizes = [31, 31]}
  %a = silu(%g)
  %m = mul(%a, %u)
  %o = add(%m, %r)
  return %o
}
)";

// The model families' layer options on small odd layers (hidden 72, 6 query / 2 KV heads of 16):
// Llama-3.1 RoPE, Mistral's sliding window, Qwen2's QKV bias, Qwen3's q/k norm.
inline std::vector<lj::LlamaConfig> family_configs() {
  lj::LlamaConfig base{"fam", 72, 6, 2, 16, 100, 1e-5, 10000.0, lj::DType::BF16};
  lj::LlamaConfig llama31 = base, mistral = base, qwen2 = base, qwen3 = base;
  llama31.name = "fam_llama31";
  llama31.rope_scaling = {lj::attr::RopeScaling::Kind::Llama3, 8.0, 1.0, 4.0, 32};
  mistral.name = "fam_mistral";
  mistral.sliding_window = 5;
  qwen2.name = "fam_qwen2";
  qwen2.qkv_bias = true;
  qwen3.name = "fam_qwen3";
  qwen3.qk_norm = true;
  return {llama31, mistral, qwen2, qwen3};
}

/// The weight-prologue graphs (kWeightPrologueGraphs) and small quantized Llama decode layers (hidden
/// 128, FFN 160: u4 codes with zero points and f16 scales in groups of 32; i4 codes with bf16
/// scales, one per row): their QKV projections carry RoPE and cache writes in the epilogue, gate/up
/// SwiGLU, o and down the residuals.
inline std::vector<lj::Graph> weight_prologue_graphs() {
  std::vector<lj::Graph> out;
  for (auto& g : lj::parse_module(kWeightPrologueGraphs, "codegen_graphs.h").graphs) out.push_back(std::move(g));
  lj::LlamaConfig u4{"q4_llama_u4", 128, 4, 2, 32, 160, 1e-5, 500000.0, lj::DType::BF16};
  u4.quant = lj::LlamaConfig::WeightQuant{lj::DType::U4, 32, lj::DType::F16, true};
  lj::LlamaConfig i4 = u4;
  i4.name = "q4_llama_i4";
  i4.quant = lj::LlamaConfig::WeightQuant{lj::DType::I4, 0, lj::DType::BF16, false};
  out.push_back(lj::llama_decode(u4));
  out.push_back(lj::llama_decode(i4));
  return out;
}

/// Every graph the codegen tests cover.
inline std::vector<lj::Graph> codegen_graphs() {
  std::vector<lj::Graph> out;
  for (const auto& c : {lj::LlamaConfig::llama3_8b(), lj::LlamaConfig::small()}) {
    out.push_back(lj::llama_prefill(c));
    out.push_back(lj::llama_decode(c));
  }
  for (auto& g : lj::parse_module(kOddGraphs, "codegen_graphs.h").graphs) out.push_back(std::move(g));
  for (const lj::LlamaConfig& c : family_configs()) {
    out.push_back(lj::llama_prefill(c));
    out.push_back(lj::llama_decode(c));
  }
  return out;
}

}  // namespace lj_test
