// W8A8 projections with per-channel weight scales before a split (SwiGLU halves, RoPE heads): the
// column-scale epilogue (MatmulEpilogue::col_scale). Odd shapes: K = 1008 (aligned, not a multiple of
// 128), 208, 144 and 127 (rows not 16-byte aligned: element loads, no TMA); 129-column halves; head
// dims 64 and 128, half and interleaved pairs, cache writes. Read by the CPU codegen test and the
// GPU test (tests/gpu/test_gpu_w8a8.cpp); the rows are `M` (and `C` the cache capacity).
#pragma once

namespace lj_test {

inline constexpr const char* kW8a8EpilogueGraphs = R"(
graph @w8_swiglu(%x: i8[M, 1008], %w: param i8[258, 1008], %rs: f32[M], %cs: param f32[258]) {
  %acc = matmul(%x, %w, %rs) {out_dtype = f32}
  %sc = mul(%acc, %cs)
  %gu = cast(%sc) {dtype = bf16}
  %g, %u = split(%gu) {axis = 1, sizes = [129, 129]}
  %s = silu(%g)
  %a = mul(%s, %u)
  return %a
}
graph @w8_rope(%x: i8[M, 208], %pos: i32[M], %w: param i8[384, 208], %rs: f32[M], %cs: param f32[384]) {
  %acc = matmul(%x, %w, %rs) {out_dtype = f32}
  %sc = mul(%cs, %acc)
  %qkv = cast(%sc) {dtype = bf16}
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 64, 64]}
  %qh = reshape(%qf) {shape = [M, 4, 64]}
  %kh = reshape(%kf) {shape = [M, 1, 64]}
  %v = reshape(%vf) {shape = [M, 1, 64]}
  %c, %s = rope_table(%pos) {dim = 64, theta = 10000.0}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  return %q, %k, %v
}
graph @w8_rope_cache(%x: i8[M, 144], %pos: i32[M], %kc: bf16[M, C, 1, 128], %vc: bf16[M, C, 1, 128], %w: param i8[512, 144],
                     %rs: f32[M], %cs: param f32[512]) {
  %acc = matmul(%x, %w, %rs) {out_dtype = f32}
  %sc = mul(%acc, %cs)
  %qkv = cast(%sc) {dtype = bf16}
  %qf, %kf, %vf = split(%qkv) {axis = 1, sizes = [256, 128, 128]}
  %qh = reshape(%qf) {shape = [M, 2, 128]}
  %kh = reshape(%kf) {shape = [M, 1, 128]}
  %vh = reshape(%vf) {shape = [M, 1, 128]}
  %c, %s = rope_table(%pos) {dim = 128, theta = 500000.0}
  %q = rope(%qh, %c, %s) {style = "half"}
  %k = rope(%kh, %c, %s) {style = "half"}
  %kc2 = kv_cache_write(%kc, %k, %pos)
  %vc2 = kv_cache_write(%vc, %vh, %pos)
  return %q, %kc2, %vc2
}
graph @w8_rope_gptj(%x: i8[M, 127], %pos: i32[M], %w: param i8[192, 127], %rs: f32[M], %cs: param f32[192]) {
  %acc = matmul(%x, %w, %rs) {out_dtype = f32}
  %sc = mul(%acc, %cs)
  %qk = cast(%sc) {dtype = bf16}
  %qf, %kf = split(%qk) {axis = 1, sizes = [128, 64]}
  %qh = reshape(%qf) {shape = [M, 2, 64]}
  %kh = reshape(%kf) {shape = [M, 1, 64]}
  %c, %s = rope_table(%pos) {dim = 64}
  %q = rope(%qh, %c, %s) {style = "interleaved"}
  %k = rope(%kh, %c, %s) {style = "interleaved"}
  return %q, %k
}
)";

}  // namespace lj_test
