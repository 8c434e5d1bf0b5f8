// A Llama-3 decoder layer built with the C++ builder API: the graph behind the CLI's built-in layer
// and the same two graphs as examples/llama3_8b_decoder.lj (a test checks they print identically).
//
//   h    = x + o_proj(attention(rope(q), rope(k), v))        q, k, v = split(qkv_proj(rms_norm(x)))
//   out  = h + down_proj(silu(gate) * up)                    gate, up = split(gate_up_proj(rms_norm(h)))
//
// The model families' options (LlamaConfig) add to it: a bias on the QKV projection (Qwen2), an
// RMSNorm of each q and k head before RoPE (Qwen3), a sliding attention window (Mistral) and scaled
// RoPE frequencies (Llama-3.1). Left at their defaults they add nothing, and the graphs are those of
// examples/llama3_8b_decoder.lj.
#include "layerjit/builder.h"
#include "layerjit/llama.h"

#include <string>

namespace lj {

namespace {

struct Weights {
  Value attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down;
  std::optional<Value> b_qkv, q_norm, k_norm;  // where the config asks for them
};

// A projection's weight [n, k]: a param, or with quantized weights the group-wise dequantize of its
// codes, scales and zero points (params %<name>_q, _s, _z), named as the param would be.
Value projection_weight(GraphBuilder& b, const LlamaConfig& c, const std::string& name, int64_t n, int64_t k) {
  if (!c.quant) return b.param(name, c.dtype, {n, k});
  const LlamaConfig::WeightQuant& q = *c.quant;
  const int64_t group = q.group ? q.group : k, groups = k / group;
  Value codes = b.param(name + "_q", q.codes, {n, k});
  Value scale = b.param(name + "_s", q.scale_dtype, {n, groups});
  std::optional<Value> zero;
  // u4 zero points pack two per byte: a row of an odd number of groups keeps them as i8.
  if (q.zero_points) zero = b.param(name + "_z", groups % 2 == 0 ? DType::U4 : DType::I8, {n, groups});
  return b.dequantize_groups(codes, scale, zero, c.dtype, group).named(name);
}

Weights declare_weights(GraphBuilder& b, const LlamaConfig& c) {
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;
  Weights w;
  w.attn_norm = b.param("attn_norm", c.dtype, {c.hidden});
  w.w_qkv = projection_weight(b, c, "w_qkv", q_width + 2 * kv_width, c.hidden);
  if (c.qkv_bias) w.b_qkv = b.param("b_qkv", c.dtype, {q_width + 2 * kv_width});
  if (c.qk_norm) {
    w.q_norm = b.param("q_norm", c.dtype, {c.head_dim});
    w.k_norm = b.param("k_norm", c.dtype, {c.head_dim});
  }
  w.w_o = projection_weight(b, c, "w_o", c.hidden, q_width);
  w.mlp_norm = b.param("mlp_norm", c.dtype, {c.hidden});
  w.w_gate_up = projection_weight(b, c, "w_gate_up", 2 * c.ffn, c.hidden);
  w.w_down = projection_weight(b, c, "w_down", c.hidden, c.ffn);
  return w;
}

struct Qkv {
  Value q, k, v;  // [N, heads, head_dim], q and k rotated
};

// rms_norm -> QKV projection -> split into heads -> RoPE on q and k. N is T (prefill) or B (decode).
Qkv attention_inputs(GraphBuilder& b, const LlamaConfig& c, const Weights& w, Value x, Value pos, const Dim& n) {
  const int64_t q_width = c.n_heads * c.head_dim;
  const int64_t kv_width = c.n_kv_heads * c.head_dim;
  Value h = b.rms_norm(x, w.attn_norm, c.eps).named("h");
  Value qkv = w.b_qkv ? b.add(b.matmul(h, w.w_qkv).named("qkv_proj"), *w.b_qkv).named("qkv") : b.matmul(h, w.w_qkv).named("qkv");
  auto parts = b.split(qkv, 1, {q_width, kv_width, kv_width});
  Value q = b.reshape(parts[0].named("q_flat"), {n, c.n_heads, c.head_dim}).named("q_heads");
  Value k = b.reshape(parts[1].named("k_flat"), {n, c.n_kv_heads, c.head_dim}).named("k_heads");
  Value v = b.reshape(parts[2].named("v_flat"), {n, c.n_kv_heads, c.head_dim}).named("v");
  if (w.q_norm) {
    q = b.rms_norm(q, *w.q_norm, c.eps).named("q_normed");
    k = b.rms_norm(k, *w.k_norm, c.eps).named("k_normed");
  }
  auto [cos, sin] = b.rope_table(pos, c.head_dim, c.rope_theta, c.rope_scaling);
  cos.named("cos");
  sin.named("sin");
  return {b.rope(q, cos, sin, "half").named("q"), b.rope(k, cos, sin, "half").named("k"), v};
}

// Output projection, residual, then the SwiGLU MLP with its own residual.
Value attention_output_and_mlp(GraphBuilder& b, const LlamaConfig& c, const Weights& w, Value x, Value attn,
                               const Dim& n) {
  Value flat = b.reshape(attn, {n, c.n_heads * c.head_dim}).named("attn_flat");
  Value h1 = b.add(x, b.matmul(flat, w.w_o).named("o")).named("h1");
  Value hn = b.rms_norm(h1, w.mlp_norm, c.eps).named("hn");
  Value gu = b.matmul(hn, w.w_gate_up).named("gate_up");
  auto gate_up = b.split(gu, 1, {c.ffn, c.ffn});
  Value act = b.mul(b.silu(gate_up[0].named("gate")).named("gate_act"), gate_up[1].named("up")).named("act");
  Value down = b.matmul(act, w.w_down).named("down");
  return b.add(h1, down).named("out");
}

}  // namespace

Graph llama_prefill(const LlamaConfig& c) {
  GraphBuilder b(c.name + "_prefill");
  const Dim T = Dim::sym("T");
  Value x = b.input("x", c.dtype, {T, c.hidden});
  Value pos = b.input("pos", DType::I32, {T});
  Weights w = declare_weights(b, c);
  Qkv qkv = attention_inputs(b, c, w, x, pos, T);
  Value attn = b.attention(qkv.q, qkv.k, qkv.v, /*causal=*/true, std::nullopt, std::nullopt, std::nullopt, c.sliding_window).named("attn");
  Value out = attention_output_and_mlp(b, c, w, x, attn, T);
  return b.finish({out, qkv.k, qkv.v});
}

Graph llama_decode(const LlamaConfig& c) {
  GraphBuilder b(c.name + "_decode");
  const Dim B = Dim::sym("B");
  const Dim C = Dim::sym("C");
  Value x = b.input("x", c.dtype, {B, c.hidden});
  Value pos = b.input("pos", DType::I32, {B});
  Value k_cache = b.input("k_cache", c.dtype, {B, C, c.n_kv_heads, c.head_dim});
  Value v_cache = b.input("v_cache", c.dtype, {B, C, c.n_kv_heads, c.head_dim});
  Weights w = declare_weights(b, c);
  Qkv qkv = attention_inputs(b, c, w, x, pos, B);
  Value k_all = b.kv_cache_write(k_cache, qkv.k, pos).named("k_cache_new");
  Value v_all = b.kv_cache_write(v_cache, qkv.v, pos).named("v_cache_new");
  Value q1 = b.reshape(qkv.q, {B, 1, c.n_heads, c.head_dim}).named("q_step");
  Value attn = b.attention(q1, k_all, v_all, /*causal=*/true, std::nullopt, pos, std::nullopt, c.sliding_window).named("attn");
  Value out = attention_output_and_mlp(b, c, w, x, attn, B);
  return b.finish({out, k_all, v_all});
}

}  // namespace lj
