#include "codegen/matmul_config.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "compiler/fusion/fusion_group.h"

namespace lj {

std::string MatmulConfig::str() const {
  if (family == Family::Gemv && tensor_cores) {
    const std::string rows = rows_per_pass != 8 ? fmt::format(" mt={}", rows_per_pass) : "";
    if (code_stages > 0) return fmt::format("gemv mma stages={} warps={}{}", code_stages, warps, rows);
    if (bulk_stages > 0) return fmt::format("gemv mma bulk={} warps={}{}", bulk_stages, warps, rows);
    return fmt::format("gemv mma u={} warps={}{}", loads_in_flight, warps, rows);
  }
  if (family == Family::Gemv) return fmt::format("gemv mt={} u={} warps={}", rows_per_pass, loads_in_flight, warps);
  if (family == Family::Wgmma)
    return fmt::format("wgmma bm={} bn={} stages={} gm={}{}{}{}{}", bm, bn, stages, group_m, split_k > 1 ? fmt::format(" sk={}", split_k) : "",
                       pingpong ? " pingpong" : stream_k ? " streamk" : persistent ? " persistent" : "",
                       cluster > 1 ? fmt::format(" cluster={}", cluster) : "", wreg ? " wreg" : "");
  return fmt::format("mma bm={} bn={} bk={} wm={} wn={} stages={} gm={}{}", bm, bn, bk, warps_m, warps_n, stages, group_m,
                     split_k > 1 ? fmt::format(" sk={}", split_k) : "");
}

namespace {

// The wgmma kernel's dynamic shared memory with `rows` rows of its epilogue tile staged at a time.
int wgmma_shared_bytes(const MatmulConfig& c, int elem_bytes, int out_bytes, bool weight_codes, int rows) {
  // + alignment and barriers; persistent: + the epilogue tile (rows of bn + 8, as lj_gemm stages it;
  // ping-pong's two warpgroups take turns on it). Weight codes (4 bits per element of W's tile) join
  // each stage.
  const int kt = c.k_tile(elem_bytes);
  return 1024 + c.stages * (c.bm + c.bn) * kt * elem_bytes + (weight_codes ? c.stages * c.bn * kt / 2 : 0) +
         (c.persistent ? 128 + rows * (c.bn + 8) * out_bytes : (weight_codes ? 3 : 2) * c.stages * 8);
}

}  // namespace

int64_t wreg_shared_bytes(const MatmulConfig& c, int64_t constant_row_bytes) {
  // The ring (x's tile and the codes, 32 bytes a W row, per stage), 128 bytes of barriers, the
  // tile's W rows' scales and zero points.
  return 1024 + int64_t{c.stages} * (c.bm * 128 + c.bn * 32) + 128 + c.bn * constant_row_bytes;
}

int MatmulConfig::staged_rows(int elem_bytes, int out_bytes, bool weight_codes, int max_shared) const {
  if (family != Family::Wgmma || !pingpong || max_shared <= 0) return bm;
  return wgmma_shared_bytes(*this, elem_bytes, out_bytes, weight_codes, bm) > max_shared ? bm / 2 : bm;
}

int MatmulConfig::shared_bytes(int elem_bytes, int out_bytes, bool weight_codes, int max_shared) const {
  // The mma.sync GEMM keeps one dequantized W tile besides its stages with weight codes (gemm_q4.cuh).
  if (family == Family::Wgmma)
    return wgmma_shared_bytes(*this, elem_bytes, out_bytes, weight_codes, staged_rows(elem_bytes, out_bytes, weight_codes, max_shared));
  if (family != Family::Mma) return 0;
  return weight_codes ? stages * (bm * bk * elem_bytes + bn * bk / 2) + bn * bk * elem_bytes : stages * (bm + bn) * bk * elem_bytes;
}

std::optional<MatmulConfig> parse_matmul_config(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<MatmulConfig> {
    if (error) *error = fmt::format("matmul config '{}': {}", text, why);
    return std::nullopt;
  };
  MatmulConfig c;
  const size_t sp = text.find(' ');
  const std::string_view family = text.substr(0, sp);
  if (family == "gemv") {
    c.family = MatmulConfig::Family::Gemv;
  } else if (family == "wgmma") {
    c.family = MatmulConfig::Family::Wgmma;
    c.bk = 64, c.bn = 256;
  } else if (family != "mma") {
    return fail(fmt::format("unknown family '{}' (expected gemv, mma or wgmma)", family));
  }
  std::string_view rest = sp == std::string_view::npos ? std::string_view() : text.substr(sp + 1);
  bool u_given = false;
  while (!rest.empty()) {
    const size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view item = rest.substr(0, end);
    rest = end < rest.size() ? rest.substr(end + 1) : std::string_view();
    if (item == "mma" && c.family == MatmulConfig::Family::Gemv) {
      c.tensor_cores = true;
      c.rows_per_pass = 8;  // the mma's 8 columns: rows of x per pass, fixed
      continue;
    }
    if (item == "persistent" && c.family == MatmulConfig::Family::Wgmma) {
      c.persistent = true;
      continue;
    }
    if (item == "streamk" && c.family == MatmulConfig::Family::Wgmma) {
      c.persistent = c.stream_k = true;  // a persistent grid whose CTAs take equal shares of k tiles
      continue;
    }
    if (item == "wreg" && c.family == MatmulConfig::Family::Wgmma) {
      c.wreg = true;  // W dequantized into registers, the product transposed
      continue;
    }
    if (item == "pingpong" && c.family == MatmulConfig::Family::Wgmma) {
      c.persistent = c.pingpong = true;  // the consumers take turns over a persistent CTA's tiles
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("'{}' is not key=value", item));
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    int v = 0;
    auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || p != val.data() + val.size() || v <= 0)
      return fail(fmt::format("'{}' needs a positive integer, got '{}'", key, val));
    int* field = nullptr;
    if (c.family == MatmulConfig::Family::Mma) {
      if (key == "bm") field = &c.bm;
      else if (key == "bn") field = &c.bn;
      else if (key == "bk") field = &c.bk;
      else if (key == "wm") field = &c.warps_m;
      else if (key == "wn") field = &c.warps_n;
      else if (key == "stages") field = &c.stages;
      else if (key == "gm") field = &c.group_m;
      else if (key == "sk") field = &c.split_k;
    } else if (c.family == MatmulConfig::Family::Wgmma) {
      if (key == "bm") field = &c.bm;
      else if (key == "bn") field = &c.bn;
      else if (key == "stages") field = &c.stages;
      else if (key == "gm") field = &c.group_m;
      else if (key == "sk") field = &c.split_k;
      else if (key == "cluster") field = &c.cluster;
    } else {
      if (key == "mt") field = &c.rows_per_pass;
      else if (key == "u") field = &c.loads_in_flight, u_given = true;
      else if (key == "warps") field = &c.warps;
      else if (key == "stages" && c.tensor_cores) field = &c.code_stages;
      else if (key == "bulk" && c.tensor_cores) field = &c.bulk_stages;
    }
    if (!field) return fail(fmt::format("unknown key '{}' for the {} family", key, family));
    *field = v;
  }
  if (u_given && c.code_stages > 0)
    return fail("u (k steps loaded into registers) and stages (k steps staged in shared memory) are alternatives: give one");
  if (c.bulk_stages > 0 && (u_given || c.code_stages > 0))
    return fail(fmt::format("bulk (W fed by bulk copies) replaces {}: give one", u_given ? "u (k steps loaded into registers)" : "stages (cp.async rings)"));
  return c;
}

namespace {

// The 16-bit dtypes (the tensor-core GEMV's x for 4-bit codes, the tuned GEMV defaults); mma.sync
// here multiplies those (m16n8k16) and i8 (m16n8k32, exact s32 sums: W8A8); wgmma also fp8 (e4m3 or
// e5m2, k32 steps).
bool tensor_core_dtype(DType t) { return t == DType::BF16 || t == DType::F16; }
bool mma_dtype(DType t) { return tensor_core_dtype(t) || t == DType::I8; }
bool wgmma_dtype(DType t) { return mma_dtype(t) || t == DType::F8E4M3 || t == DType::F8E5M2; }

// An i8 mma.sync tile holds the bytes of the 16-bit tile with the same bk: twice the elements along
// K. The defaults and candidates below name bk in 16-bit elements and go through this. Not where the
// rows take element loads (not 16-byte aligned): each 16-byte chunk is 16 loads there, and the
// doubled tile spilled (128 x 128 at K = 1001 on sm_80: 144 bytes; bk unchanged: none).
int bk_scale(const MatmulProblem& p) { return p.dtype == DType::I8 && p.aligned ? 2 : 1; }
MatmulConfig in_elements(MatmulConfig c, const MatmulProblem& p) {
  if (c.family == MatmulConfig::Family::Mma) c.bk *= bk_scale(p);
  return c;
}

// The fewest warps whose threads hold a row tail's row in registers, at most 64 floats each (the
// row body's CHUNKS x V, whatever its access width V, since V divides 64): more spill beside the
// GEMV's state. 0 without a tail.
int row_tail_min_warps(const MatmulProblem& p) { return static_cast<int>((p.tail_row + 32 * 64 - 1) / (32 * 64)); }

MatmulConfig gemv_default(const MatmulProblem& p) {
  MatmulConfig c;
  c.family = MatmulConfig::Family::Gemv;
  c.rows_per_pass = p.m > 0 ? static_cast<int>(std::clamp<int64_t>(p.m, 1, 4)) : 4;
  // 16-byte loads: 4 in flight (64 bytes per lane); narrower loads need more to keep the bytes.
  c.loads_in_flight = p.aligned ? 4 : 8;
  c.warps = static_cast<int>(std::clamp<int64_t>(p.n, 1, 8));
  // One row of 16-bit operands over rows of W of at most 4096 elements (H200, sixteenth session):
  // with SwiGLU (each warp streams its gate row, then its up row) 2 loads in flight and 4 warps
  // (`layerjit tune` of the bf16 decode layer at B = 1, every candidate checked: gate/up + SwiGLU
  // 0.0651 -> 0.0588 ms); a plain GEMV over at most 4096 columns 2 loads (o + residual 0.0132 ->
  // 0.0123 in the tuner; `bench_gemm --m 1`, same call: o 0.0137-0.0140 -> 0.0131-0.0133). Measured
  // in the same bench_gemm call and kept at 4 loads: qkv 6144 x 4096 (0.0170 against 0.0176 for
  // u=2), gate_up without SwiGLU (0.0606 against 0.0616-0.0624), down, K = 14336 (0.0337 against
  // 0.0363); QKV + RoPE in the tuner 0.0176 against 0.0175 for u=8.
  if (p.m == 1 && p.aligned && dtype_bytes(p.dtype) == 2 && p.k <= 4096 && !p.rope) {
    if (p.glu) {
      c.loads_in_flight = 2, c.warps = 4;
    } else if (p.n <= 4096) {
      c.loads_in_flight = 2;
    }
  }
  return c;
}

MatmulConfig gemv_mma(int u, int warps) {
  MatmulConfig c;
  c.family = MatmulConfig::Family::Gemv;
  c.tensor_cores = true;
  c.rows_per_pass = 8, c.loads_in_flight = u, c.warps = warps;
  return c;
}

// The fp8/i8 tensor-core GEMV fed by bulk copies through a ring of `stages` stages (sm_90+).
MatmulConfig gemv_mma_bulk(int stages, int warps) {
  MatmulConfig c = gemv_mma(MatmulConfig{}.loads_in_flight, warps);
  c.bulk_stages = stages;
  return c;
}

// The tensor-core GEMV on 4-bit codes with `stages` k steps per warp staged through cp.async
// (loads_in_flight keeps the parser's default: the text has no u).
MatmulConfig gemv_mma_staged(int stages, int warps) {
  MatmulConfig c = gemv_mma(MatmulConfig{}.loads_in_flight, warps);
  c.code_stages = stages;
  return c;
}

MatmulConfig mma(int bm, int bn, int bk, int wm, int wn, int stages) {
  MatmulConfig c;
  c.family = MatmulConfig::Family::Mma;
  c.bm = bm, c.bn = bn, c.bk = bk, c.warps_m = wm, c.warps_n = wn, c.stages = stages, c.group_m = 8;
  return c;
}

MatmulConfig wgmma(int bn, int stages) {
  MatmulConfig c;
  c.family = MatmulConfig::Family::Wgmma;
  c.bm = 128, c.bn = bn, c.bk = 64, c.stages = stages, c.group_m = 8;
  return c;
}

bool wgmma_available(const MatmulProblem& p) { return p.sm == 90 && p.arch_specific && p.tma && wgmma_dtype(p.dtype); }

MatmulConfig wgmma_large(const MatmulProblem& p) {
  // 128 x 256 tiles where they nearly fill the SMs; else narrower tiles, split along K into the
  // largest power of two of CTAs per tile that still fits one wave (docs/perf.md).
  const int64_t row_tiles = p.m > 0 ? (p.m + 127) / 128 : 32;  // unknown M: prefill-sized
  // i8 over many columns: ping-pong 128 x 128, one warpgroup's epilogue under the other's MMAs. The
  // s8 MMAs run twice as fast as bf16 ones, so the epilogue weighs twice as much. H100, thirty-second
  // session (bench_int8 --sweep, `layerjit tune` on the W8A8 layer at T = 4096): gate_up (N = 28672)
  // 0.7783 -> 0.7371 ms bare, 0.8288 -> 0.7114 with the SwiGLU epilogue; at N = 4096-6144 (qkv with
  // RoPE, o with the residual) and for down the 128 x 256 tiles stayed ahead in the layer.
  if (p.dtype == DType::I8 && p.n >= 16384 && row_tiles * ((p.n + 127) / 128) >= 4 * p.sm_count) {
    MatmulConfig c = wgmma(128, 4);
    c.persistent = c.pingpong = true;
    return c;
  }
  // W from 4-bit codes: 256 x 128 tiles where they fill the SMs. With W dequantized into registers
  // (wreg) where the pruner takes it (H100, forty-sixth session, `layerjit tune
  // bench/quant/int4_projections.lj --packed-weights` at M = 4096, wreg 4 stages against the 256 x 128
  // tile below: qkv 0.4256 -> 0.3019 ms, o 0.2848 -> 0.2033, gate_up 1.9777 -> 1.3945, down 0.9209 ->
  // 0.6702; the INT4 layer's four projections 1.36-1.45x). Else the dequantizing warps fill one W tile
  // per k tile for twice the rows of x (forty-fourth session, against the 128 x 256 default: qkv
  // 0.6395 -> 0.4307 ms, o 0.4356 -> 0.2917, gate_up 3.0016 -> 1.9523 with 4 stages, down (K = 14336)
  // 2.0781 -> 0.9544 with 3 stages, 4 at K = 4096).
  if (p.weight_codes && (row_tiles + 1) / 2 * ((p.n + 127) / 128) >= p.sm_count) {  // 256-row tiles
    MatmulConfig c = wgmma(128, 4);
    c.bm = 256, c.wreg = true;
    if (reject_reason(c, p).empty()) return c;
    c.wreg = false, c.stages = p.k > 8192 ? 3 : 4;
    return c;
  }
  if (row_tiles * ((p.n + 255) / 256) * 4 >= p.sm_count * 3) return wgmma(256, 4);
  const bool fp8 = dtype_bytes(p.dtype) == 1;
  // Where 128 x 64 tiles fit one wave: those, 8 stages deep, split only while the grid stays within
  // one wave. Splitting 128 x 128 tiles instead costs the last CTA of each tile the read-back of the
  // other splits' partials (M = 128 on the H200, ninth session: qkv 0.0252 -> 0.0209 ms unsplit, o
  // 0.0202 -> 0.0174 and down 0.0422 -> 0.0402 split 2 ways against 4; fp8: qkv 0.0159 -> 0.0134,
  // o 0.0158 -> 0.0130, down 0.0274 -> 0.0238).
  const int64_t narrow_tiles = row_tiles * ((p.n + 63) / 64);
  MatmulConfig c = wgmma(narrow_tiles <= p.sm_count ? 64 : 128, 4);
  if (c.bn == 64) c.stages = 8;
  const int kt = c.k_tile(dtype_bytes(p.dtype));
  const int64_t tiles = row_tiles * ((p.n + c.bn - 1) / c.bn), k_tiles = (p.k + kt - 1) / kt;
  // fp8 tiles move half the bytes per k: a split CTA needs many more k tiles to pay for its partial
  // sums. At M = 128 on the H200 (bench_fp8 --sweep, eighth session) splits of 16 k tiles lost to
  // one unsplit CTA per tile with 6 stages (qkv 0.0180 -> 0.0162 ms, o 0.0167 -> 0.0158), splits
  // of 28 won (down, sk=4: 0.0276 against 0.0388).
  const int64_t min_k_tiles = fp8 ? 24 : 4;
  while (c.split_k < 8 && tiles * c.split_k * 2 <= p.sm_count && c.split_k * 2 * min_k_tiles <= k_tiles) c.split_k *= 2;
  if (fp8 && c.split_k == 1 && c.bn == 128) c.stages = 6;
  // Unsplit 128 x 64 tiles (too many to split within one wave): 64 x 128 tiles where they make at
  // least as many CTAs (M > 64), one consumer warpgroup each. qkv at M = 128 on the H200 (tenth
  // session): 0.0209 -> 0.0201 ms, 0.91 -> 0.95x cuBLAS, same 96 CTAs; 128 columns also hold whole
  // RoPE heads. fp8 moves half the bytes per tile, so 64 x 64 tiles where they fit one wave (o at
  // M = 128, eleventh session: 0.0128 -> 0.0114 ms, 0.85 -> 0.96x cuBLASLt fp8; 64 x 128: 0.0121),
  // else 64 x 128 (qkv: 0.0133 -> 0.0130; 64 x 64 in 192 CTAs: 0.0185).
  // Narrower W than one 128-column tile keeps its 128 x 64 tiles (unmeasured otherwise).
  const int64_t rows64 = (p.m + 63) / 64;
  if (c.bn == 64 && c.split_k == 1 && p.n >= 128 && rows64 * ((p.n + 127) / 128) >= tiles) {
    c.bm = 64;
    if (!fp8 || rows64 * ((p.n + 63) / 64) > p.sm_count) c.bn = 128;
  }
  return c;
}

}  // namespace

namespace {

MatmulConfig default_for(const MatmulProblem& p) {
  // One row: the GEMV streams W at copy speed. 2-16 rows: a 16-row tensor-core tile with a deep
  // pipeline reads W once for all rows (measured on an H200 at M = 16: 2.7-4.7x faster than the GEMV
  // re-reading W per 4 rows; docs/perf.md). Unknown M (0): the GEMM serves any M.
  // fp8 at one row on sm_89+: the tensor-core GEMV, which feeds the codes to mma.sync as loaded
  // (H200, thirteenth session, `layerjit tune` of the FP8 layer's groups at B = 1: QKV + RoPE 0.0112
  // ms with 4 warps against the 64-row Hopper tiles' 0.0155, o 0.0089 against the GEMV's 0.0121,
  // gate/up 0.0334 against 0.0397, down 0.0198 against 0.0324; 8 warps everywhere but QKV).
  // i8 (sm_80+) takes it too, the same loads and fragments on m16n8k32 s8 (not measured yet: the fp8
  // figures' reason, a conversion per code in the SIMT GEMV, holds for i8 codes as well).
  if (p.m == 1 && ((is_fp8(p.dtype) && p.sm >= 89) || (p.dtype == DType::I8 && p.sm >= 80))) {
    const MatmulConfig tc = gemv_mma(4, p.rope_pair_dim > 0 ? 4 : 8);
    if (reject_reason(tc, p).empty()) return tc;
  }
  // 4-bit codes at 1-16 rows: the tensor-core GEMV, as `layerjit tune` ranked it on Llama-3-8B's
  // four projections (docs/perf.md, thirtieth session, H100; the twenty-ninth's H200 agreed at M = 1):
  // one row, K >= 8192 (down): one k step in flight with 16 warps, 1.26-1.28x the u=2 4-warp batches
  // (more warps hide the latency a long row leaves); else four steps in flight with 4 warps,
  // 1.02-1.07x. 9-16 rows: two x chunks against each dequantized fragment (mt=16), 1.19-1.31x on all
  // four. More rows (or rows unknown): the GEMMs below, W's tiles dequantized into shared memory
  // (gemm_q4.cuh). With the rms_norm folded in, two steps in flight at one row where four would be:
  // four steps' codes beside the norm's weight and x's squares spill on sm_90 under the 128-register
  // cap (gate/up, K = 4096).
  // (A folded norm's group was planned for one row: the GEMV also where the rows are not given.)
  if (p.weight_codes && ((p.m > 0 && p.m <= 16) || p.norm_in_kernel)) {
    MatmulConfig c = p.m > 1 ? gemv_mma(2, 4) : p.k >= 8192 ? gemv_mma(1, 16) : gemv_mma(p.norm_in_kernel ? 2 : 4, 4);
    if (p.m > 8 && !p.norm_in_kernel) c.rows_per_pass = 16;
    if (reject_reason(c, p).empty()) return c;
    return gemv_mma(2, 4);
  }
  // Where it cannot run (K not a multiple of 16, unaligned rows), fp8 at one row with many W rows:
  // 64 x 128 Hopper tiles, rows past the first masked, beat the GEMV, whose codes each cost a
  // conversion (H200, twelfth session, `layerjit tune` at B = 1: QKV 0.0151 against 0.0169 ms with 6
  // stages, gate/up 0.0391 against 0.0523 with 8); at N = 4096 (o, down) the GEMV stayed ahead.
  if (p.m == 1 && is_fp8(p.dtype) && wgmma_available(p) && p.n >= 6144 && !p.rms_in_kernel && !p.angles_in_kernel && !p.quantize_in_kernel &&
      p.tail_row == 0) {
    MatmulConfig c = wgmma(128, p.n >= 16384 ? 8 : 6);
    c.bm = 64;
    return c;
  }
  // One-row prologues: the GEMV computes them (reject_reason refuses the tiles).
  if (p.m == 1 || p.sm < 80 || p.rms_in_kernel || p.angles_in_kernel || p.quantize_in_kernel || p.tail_row > 0) return gemv_default(p);
  // mma.sync here is 16-bit or i8: fp8 has only the Hopper GEMM (its 128-row tiles serve any M > 1, W
  // read once per column tile where the GEMV reads it once per 4 rows); anything else takes the GEMV.
  // i8 takes the 16-bit tiles below, bk doubled (in_elements): the same bytes per stage.
  if (!mma_dtype(p.dtype)) return wgmma_available(p) ? wgmma_large(p) : gemv_default(p);
  const int64_t k_tiles64 = (p.k + 64 * bk_scale(p) - 1) / (64 * bk_scale(p));  // k tiles of 128 bytes
  // 2-16 rows: one 16-row tile reads W once for all of them, split along K so that enough CTAs
  // stream it (H200, ninth session, bench_gemm --m 16 against the unsplit 6-stage tile: o 0.0201 ->
  // 0.0150 ms, down 0.0571 -> 0.0347, gate_up 0.0720 -> 0.0665 with 4 ways; qkv, where K < N and
  // the column tiles alone are 96, 0.0211 -> 0.0185 with 2 ways, 0.0193 with 4).
  if (p.m > 0 && p.m <= 16) {
    MatmulConfig c = mma(16, 64, 64, 1, 2, 6);
    c.split_k = p.k < p.n && (p.n + 63) / 64 < 3 * p.sm_count ? 2 : 4;
    while (c.split_k > 1 && c.split_k * 4 > k_tiles64) c.split_k /= 2;  // a split CTA keeps 4 k tiles
    return c;
  }
  // 17-32 rows (decode at B = 32; `layerjit tune` and `layerjit bench` on the H200, sixth session,
  // docs/perf.md): with many column tiles, one 64-row tile over all rows reads W once per CTA
  // (gate_up: 1.24x the 16-row tiles); where K is at least N, 16-row tiles split 4 ways along K keep
  // enough CTAs streaming W (o 1.29x, down 1.61x). Where K < N (QKV) the 16-row tiles split ran
  // slower (27.3 against 23.2 us) but one 32-row tile split 4 ways won (20.2 us, seventh session):
  // W is read once and the grid still has 4 CTAs per column tile.
  if (p.m > 0 && p.m <= 32) {
    if ((p.n + 63) / 64 >= 3 * p.sm_count) return mma(64, 64, 64, 2, 2, 3);
    if (k_tiles64 < 4 * 4) return mma(16, 64, 64, 1, 2, 6);  // split CTAs need 4 k tiles each
    MatmulConfig c = p.k < p.n ? mma(32, 64, 64, 2, 2, 4) : mma(16, 64, 64, 1, 2, 4);
    c.split_k = 4;
    return c;
  }
  // Up to 128 rows, 64x64 tiles give the grid enough CTAs to fill the SMs (measured on an H200 at
  // M = 128: 1.5-2.6x faster than 128x128 on the Llama-3-8B shapes; docs/perf.md). With the Hopper
  // GEMM, only up to 64 rows (it has 128-row tiles).
  if (p.m > 0 && p.m <= (wgmma_available(p) ? 64 : 128)) return mma(64, 64, 64, 2, 2, 4);
  if (!wgmma_available(p)) return mma(128, 128, 32, 2, 2, 4);
  return wgmma_large(p);
}

bool holds_rope_pairs(const MatmulConfig& c, int64_t d) { return d <= 0 || c.bn % d == 0 || d % c.bn == 0; }

}  // namespace

MatmulConfig default_matmul_config(const MatmulProblem& p) {
  MatmulConfig c = in_elements(default_for(p), p);
  // A row tail's row in registers: more warps where the default's would hold over 64 floats each.
  while (c.family == MatmulConfig::Family::Gemv && c.warps < row_tail_min_warps(p) && c.warps < (c.tensor_cores ? 16 : 32)) c.warps *= 2;
  // The Hopper GEMM on 4-bit codes has a third barrier per stage: at most 5 stages.
  if (p.weight_codes && c.family == MatmulConfig::Family::Wgmma) c.stages = std::min(c.stages, 5);
  const int64_t d = p.rope_pair_dim;
  if (c.family == MatmulConfig::Family::Gemv || holds_rope_pairs(c, d)) return c;
  // Half-style RoPE in the epilogue needs column tiles of whole heads or of a divisor of one: every
  // tile holds heads of 64 or 128, not always of 80 or 96. Then the nearest tile that does: a wgmma
  // tile of another width, else mma.sync tiles narrowed (bn and the warps across it halved) until
  // they divide the head (16 columns for 80), else the GEMV, which pairs any columns.
  if (c.family == MatmulConfig::Family::Wgmma)
    for (int bn : {128, 96, 256, 64}) {
      MatmulConfig w = c;
      w.bn = bn;
      if (w.pingpong && bn != 128) w.pingpong = w.persistent = w.stream_k = false;
      if (holds_rope_pairs(w, d) && reject_reason(w, p).empty()) return w;
    }
  MatmulConfig m = c.family == MatmulConfig::Family::Mma ? c : in_elements(mma(128, 128, 32, 2, 2, 4), p);
  while (m.bn > 16 && !holds_rope_pairs(m, d)) {
    m.bn /= 2;
    if (m.bn % (16 * m.warps_n) != 0) m.warps_n = std::max(1, m.warps_n / 2);
  }
  if (holds_rope_pairs(m, d) && reject_reason(m, p).empty()) return m;
  return gemv_default(p);
}

std::string reject_reason(const MatmulConfig& c, const MatmulProblem& p) {
  if ((c.persistent || c.pingpong) && c.family != MatmulConfig::Family::Wgmma)
    return fmt::format("{} is an option of the wgmma family", c.pingpong ? "pingpong" : "persistent");
  if (c.pingpong && !c.persistent) return "pingpong needs a persistent grid";
  if (c.cluster != 1 && c.family != MatmulConfig::Family::Wgmma) return "cluster is an option of the wgmma family";
  if (c.stream_k && (c.family != MatmulConfig::Family::Wgmma || !c.persistent)) return "streamk is an option of the persistent wgmma kernel";
  if (c.stream_k && c.pingpong) return "streamk with pingpong: a warpgroup's turn would hold a share of a tile, not a tile";
  if (p.rms_in_kernel && (c.family != MatmulConfig::Family::Gemv || c.tensor_cores))
    return "the group computes its rows' RMS factor (a one-row prologue), which only the SIMT GEMV does: its warps read whole rows of x";
  if (p.norm_in_kernel && (c.family != MatmulConfig::Family::Gemv || !c.tensor_cores || c.rows_per_pass != 8))
    return "the group normalises x (its rms_norm, a one-row prologue) as it loads it, which only the tensor-core GEMV on 4-bit codes does, "
           "8 rows of x per pass (mt=8)";
  if (p.quantize_in_kernel && c.family != MatmulConfig::Family::Gemv)
    return "the group quantizes its row of x in the kernel (a one-row prologue), which only the GEMVs do";
  if (p.tail_row > 0 && c.family != MatmulConfig::Family::Gemv)
    return "the group quantizes the row it stores in its last CTA (a row tail), which only the GEMVs do";
  if (c.warps < row_tail_min_warps(p))
    return fmt::format("the row tail holds a row of {} in registers, at most 64 floats per thread: {} warps are too few", p.tail_row, c.warps);
  if (p.angles_in_kernel && c.family != MatmulConfig::Family::Gemv)
    return "the group computes its RoPE angles at the row's position (a one-row prologue), which only the GEMV epilogues do";
  if (c.split_k > 1 && c.family == MatmulConfig::Family::Gemv) return "split-K (sk) is an option of the tensor-core families";
  if (c.split_k > 16) return fmt::format("sk={} (at most 16 CTAs per output tile)", c.split_k);
  const int kt = c.k_tile(dtype_bytes(p.dtype));
  if (c.split_k > 1 && p.k > 0 && c.split_k > (p.k + kt - 1) / kt)
    return fmt::format("sk={} for {} k tiles of {} (a CTA without k tiles)", c.split_k, (p.k + kt - 1) / kt, kt);
  if (p.weight_codes && c.family == MatmulConfig::Family::Gemv && !c.tensor_cores)
    return "W is dequantized from 4-bit codes in the kernel (a weight prologue), which the tensor-core GEMV (gemv mma) and the GEMMs do, not the SIMT GEMV";
  if (p.weight_codes && c.family != MatmulConfig::Family::Gemv) {
    if (!tensor_core_dtype(p.dtype)) return fmt::format("W from 4-bit codes is dequantized to bf16 or f16 (x's dtype), not {}", dtype_name(p.dtype));
    if (p.k % 32 != 0) return fmt::format("the GEMMs dequantize 4-bit codes in units of 32 elements: K (= {}) must be a multiple of 32", p.k);
    if (c.family == MatmulConfig::Family::Mma && c.bk != 32 && c.bk != 64)
      return fmt::format("bk={} with 4-bit codes (32 or 64: whole 32-element units of codes per row)", c.bk);
  }
  if (p.weight_codes && c.family == MatmulConfig::Family::Gemv) {
    if (p.sm < 80) return fmt::format("gemv mma on 4-bit codes (bf16/f16 mma.sync m16n8k16) needs sm_80 or newer, target is sm_{}", p.sm);
    if (!tensor_core_dtype(p.dtype)) return fmt::format("gemv mma on 4-bit codes multiplies bf16 or f16 x and W of one dtype, not {}", dtype_name(p.dtype));
    if (!p.aligned || p.k % 32 != 0)
      return fmt::format("gemv mma on 4-bit codes loads 16 bytes of codes and 64 of x per lane: rows of x must start 16-byte aligned and K (= {}) be a multiple of 32", p.k);
    if (c.rows_per_pass != 8 && c.rows_per_pass != 16)
      return fmt::format("mt={} (8 or 16 rows of x per pass: one or two mma chunks against each dequantized fragment)", c.rows_per_pass);
    if (c.code_stages > 0) {
      // The ring is static shared memory (48 KB at most): warps x stages KiB of codes beside the
      // partial sums' warps x 512 bytes.
      if (c.code_stages < 2 || c.code_stages > 16) return fmt::format("stages={} (2 to 16 k steps of codes per warp)", c.code_stages);
      if (c.warps * c.code_stages > 32)
        return fmt::format("stages={} with {} warps: {} KiB of staged codes per CTA (at most 32)", c.code_stages, c.warps, c.warps * c.code_stages);
      if (c.warps > 16) return "more than 16 warps per CTA";
      // A ring deeper than the warp's share holds nothing more in flight than a shallower one.
      const int64_t share = p.k > 0 ? ((p.k + 127) / 128 + c.warps - 1) / c.warps : 0;
      if (p.k > 0 && c.code_stages - 1 > share)
        return fmt::format("stages={} with {} warps: more steps in flight than a warp's share of {} (K = {})", c.code_stages, c.warps, share, p.k);
      return "";
    }
    if (c.loads_in_flight > 4) return "more than 4 k steps of codes in flight per lane";
    // One batch per warp: no loop, ptxas hoists all of it, and at u=4 the 128 registers spill (CUDA
    // 13.0: K = 2048 with 4 warps, tests/codegen/test_weight_prologue.cpp); the batches that overlap
    // need two or more per warp.
    if (c.loads_in_flight == 4 && p.k > 0 && (p.k + 127) / 128 < 2 * 4 * c.warps)
      return fmt::format("u=4 with {} warps: fewer than two batches of 4 k steps per warp (K = {})", c.warps, p.k);
    if (c.warps > 16) return "more than 16 warps per CTA";
    return "";
  }
  if (c.family == MatmulConfig::Family::Gemv && c.tensor_cores) {
    if (c.rows_per_pass != 8) return fmt::format("mt={}: the fp8 and i8 tensor-core GEMVs take 8 rows of x per pass (mt=16 is the 4-bit GEMV's)", c.rows_per_pass);
    if (p.dtype == DType::I8 && p.sm < 80) return fmt::format("gemv mma (s8 mma.sync m16n8k32) needs sm_80 or newer, target is sm_{}", p.sm);
    if (p.dtype != DType::I8 && p.sm < 89) return fmt::format("gemv mma (fp8 mma.sync m16n8k32) needs sm_89 or newer, target is sm_{}", p.sm);
    if (!is_fp8(p.dtype) && p.dtype != DType::I8)
      return fmt::format("gemv mma multiplies fp8 x and W of one format, or i8 ones, not {}", dtype_name(p.dtype));
    if (!p.aligned || p.k % 16 != 0) return fmt::format("gemv mma loads 16-byte chunks: rows of x and W must start 16-byte aligned and K (= {}) be a multiple of 16", p.k);
    if (c.warps > 16) return "more than 16 warps per CTA";
    if (c.bulk_stages > 0) {
      // The ring is dynamic shared memory: 16 rows of 1 KiB (+ 16 bytes of pad) per stage, beside the
      // partial sums and an activation-quantize prologue's static shared memory.
      if (p.sm < 90) return fmt::format("bulk={} (bulk copies, cp.async.bulk with mbarriers) needs sm_90 or newer, target is sm_{}", c.bulk_stages, p.sm);
      if (c.bulk_stages < 2 || c.bulk_stages > 8) return fmt::format("bulk={} (2 to 8 stages)", c.bulk_stages);
      if (16 % c.warps != 0) return fmt::format("bulk with {} warps: a stage's 16 k steps are shared equally (1, 2, 4, 8 or 16 warps)", c.warps);
      const int64_t ring = gemv_bulk_ring_bytes(c.bulk_stages);
      const int64_t fixed = 512LL * c.warps + (p.quantize_in_kernel ? kQuantizePrologueSharedBytes : 0) + 1024;
      if (ring + fixed > p.max_shared_bytes)
        return fmt::format("bulk={} with {} warps: {} KiB of ring per CTA (at most {} KiB beside the static shared memory)", c.bulk_stages,
                           c.warps, ring / 1024, (p.max_shared_bytes - fixed) / 1024);
      const int64_t stages_per_pass = (p.k + kGemvBulkStageBytes - 1) / kGemvBulkStageBytes;
      if (p.k > 0 && c.bulk_stages > std::max<int64_t>(2, stages_per_pass))
        return fmt::format("bulk={}: more stages than the {} of a pass over K = {}", c.bulk_stages, stages_per_pass, p.k);
      return "";
    }
    if (c.code_stages > 0) {
      // The ring is dynamic shared memory: 1.5 KiB per k step and warp (16 bytes of W rows a and b
      // and of x per lane), beside the partial sums' and a row tail's static shared memory.
      if (p.quantize_in_kernel) return "stages with a quantize prologue (cp.async copies x from global memory, the prologue leaves it in shared memory)";
      if (c.code_stages < 2 || c.code_stages > 16) return fmt::format("stages={} (2 to 16 k steps per warp)", c.code_stages);
      const int64_t ring = 1536LL * c.warps * c.code_stages;
      if (ring + 16 * 1024 > p.max_shared_bytes)
        return fmt::format("stages={} with {} warps: {} KiB of rings per CTA (at most {} KiB beside the static shared memory)", c.code_stages,
                           c.warps, ring / 1024, p.max_shared_bytes / 1024 - 16);
      const int64_t share = p.k > 0 ? ((p.k + 63) / 64 + c.warps - 1) / c.warps : 0;
      if (p.k > 0 && c.code_stages - 1 > share)
        return fmt::format("stages={} with {} warps: more steps in flight than a warp's share of {} (K = {})", c.code_stages, c.warps, share, p.k);
      return "";
    }
    if (c.loads_in_flight > 4) return "more than 4 k steps in flight per lane (3 16-byte loads each: 8 spill under 128 registers)";
    return "";
  }
  if (c.family == MatmulConfig::Family::Gemv) {
    if (c.rows_per_pass > 16) return "more than 16 rows per pass (fp32 accumulators per lane)";
    if (c.loads_in_flight > 16) return "more than 16 loads in flight per lane";
    if (c.warps > 32) return "more than 32 warps per CTA";
    return "";
  }
  if (p.glu && c.bn / c.warps_n % 16 != 0)
    return fmt::format("SwiGLU pairs gate and up tiles of 8 columns: bn={} over wn={} warps gives each {} columns, not whole 16s", c.bn,
                       c.warps_n, c.bn / c.warps_n);
  if (const int64_t d = p.rope_pair_dim; d > 0 && c.bn % d != 0 && d % c.bn != 0)
    return fmt::format("bn={} neither holds whole heads of {} nor divides one: a tile would miss half of some RoPE pairs", c.bn, d);
  if (c.family == MatmulConfig::Family::Wgmma) {
    if (p.sm != 90 || !p.arch_specific)
      return fmt::format("wgmma needs the sm_90a target, target is sm_{}{}", p.sm, p.arch_specific ? "a" : "");
    if (!wgmma_dtype(p.dtype)) return fmt::format("wgmma takes bf16, f16, f8e4m3, f8e5m2 or i8 operands of one dtype, not {}", dtype_name(p.dtype));
    if (!p.tma) return "x or W rows are not a 2-D tensor with a 16-byte aligned start and row stride (TMA)";
    if (c.bm != 128 && c.bm != 64 && c.bm != 256)
      return fmt::format("bm={} (128: two consumer warpgroups of 64 rows; 64: one; 256: two of 128)", c.bm);
    if (c.bm == 256 && (c.persistent || c.split_k > 1 || c.bn > 128))
      return c.bn > 128 ? fmt::format("bm=256 with bn={}: a warpgroup's 128 x bn accumulators fit its registers up to bn=128", c.bn)
                        : "bm=256 runs one whole tile per CTA: not persistent, ping-pong, stream-K or split-K";
    if (c.bm == 64 && (c.persistent || c.pingpong || c.stream_k))
      return "bm=64 runs one tile per CTA: not persistent, ping-pong or stream-K";
    if (c.bm == 64 && c.bn > 128) return fmt::format("bm=64 with bn={}: 64-row tiles are for few rows, where bn <= 128 keeps the CTAs many", c.bn);
    if (c.bn != 64 && c.bn != 96 && c.bn != 128 && c.bn != 256) return fmt::format("bn={} (64, 96, 128 or 256)", c.bn);
    if (c.bk != 64) return fmt::format("bk={} (fixed: the k tile is one 128-byte swizzle row)", c.bk);
    if (c.stages < 2 || c.stages > 8) return fmt::format("stages={} (2..8)", c.stages);
    if (c.split_k > 1 && c.persistent)
      return fmt::format("split-K (sk) runs one tile per CTA, not a persistent grid{}", c.stream_k ? " (streamk splits k itself)" : "");
    if (c.pingpong && c.bn != 128)
      return fmt::format("pingpong with bn={}: a warpgroup holds the whole 128-row tile, 2 x bn / 2 accumulators per thread (bn=128)", c.bn);
    if (c.cluster != 1 && c.cluster != 2) return fmt::format("cluster={} (1, or 2: a pair of CTAs sharing the W tile)", c.cluster);
    if (c.cluster > 1 && (c.split_k > 1 || c.stream_k || c.bm != 128))
      return fmt::format("cluster={}: clusters take whole 128-row tiles ({} instead)", c.cluster,
                         c.stream_k ? "stream-K" : c.bm != 128 ? fmt::format("bm={}", c.bm) : "split-K");
    if (c.cluster > 1 && p.weight_codes) return "cluster=2 with 4-bit codes: the W tile is dequantized by each CTA, not loaded by TMA";
    if (c.cluster > 1 && p.sm_count < 2) return fmt::format("cluster=2 on {} SM: a cluster needs two", p.sm_count);
    if (p.weight_codes && c.stages > 5) return fmt::format("stages={} with 4-bit codes (at most 5: three barriers per stage)", c.stages);
    if (c.wreg) {
      if (!p.weight_codes) return "wreg dequantizes W from 4-bit codes into registers: this W is not made from codes";
      if (c.bm != 256 || c.bn != 128) return fmt::format("wreg with bm={} bn={}: 256 x 128 tiles (each consumer warpgroup 64 W rows by 256 x rows)", c.bm, c.bn);
      if (p.dtype != DType::BF16 && p.dtype != DType::F16) return fmt::format("wreg multiplies bf16 or f16, not {}", dtype_name(p.dtype));
      if (p.row_scaled) return "wreg: per-row scales of x run along the transposed product's columns (not supported)";
      const int64_t smem = wreg_shared_bytes(c, p.code_constant_row_bytes);
      if (smem > p.max_shared_bytes)
        return fmt::format("wreg: {} KiB of shared memory with the tile's scales and zero points, the device allows {}", smem / 1024,
                           p.max_shared_bytes / 1024);
      return "";
    }
    const int smem = c.shared_bytes(dtype_bytes(p.dtype), p.out_bytes, p.weight_codes, p.max_shared_bytes);
    if (smem > p.max_shared_bytes)
      return fmt::format("{} KiB of shared memory{}, the device allows {}", smem / 1024,
                         !c.persistent ? ""
                         : c.staged_rows(dtype_bytes(p.dtype), p.out_bytes, p.weight_codes, p.max_shared_bytes) < c.bm
                             ? " with half the epilogue tile"
                             : " with the epilogue tile",
                         p.max_shared_bytes / 1024);
    return "";
  }
  if (p.sm < 80) return fmt::format("mma.sync m16n8k16 needs sm_80 or newer, target is sm_{}", p.sm);
  if (!mma_dtype(p.dtype)) return fmt::format("mma.sync takes bf16/f16/i8 operands, not {}", dtype_name(p.dtype));
  const int row_bytes = c.bk * dtype_bytes(p.dtype);  // of a tile row per k tile
  if (row_bytes != 32 && row_bytes != 64 && row_bytes != 128)
    return p.dtype == DType::I8 ? fmt::format("bk={} (32, 64 or 128 for i8)", c.bk) : fmt::format("bk={} (16, 32 or 64)", c.bk);
  const int threads = c.threads();
  if (threads > 1024) return fmt::format("{} threads per CTA", threads);
  if (c.bm % (16 * c.warps_m) != 0 || c.bn % (16 * c.warps_n) != 0)
    return "warp tile is not whole 16x16 blocks";
  const int chunks = row_bytes / 16;
  if (c.bm * chunks % threads != 0 || c.bn * chunks % threads != 0)
    return "tile rows x 16-byte chunks do not divide among the threads";
  // fp32 accumulators plus one k step of A and B fragments, with ~40 registers of addressing: the
  // 255-register limit is the wall (a spill to local memory costs more than any tile gains).
  const int mi = c.bm / c.warps_m / 16, ni = c.bn / c.warps_n / 8;
  const int regs = mi * ni * 4 + mi * 4 + ni * 2 + 40;
  if (regs > 255) return fmt::format("~{} registers per thread (warp tile {}x{})", regs, c.bm / c.warps_m, c.bn / c.warps_n);
  if (c.stages < 2 || c.stages > 8) return fmt::format("stages={} (2..8)", c.stages);
  const int smem = c.shared_bytes(dtype_bytes(p.dtype), 2, p.weight_codes);
  if (smem > p.max_shared_bytes) return fmt::format("{} KiB of shared memory, the device allows {}", smem / 1024, p.max_shared_bytes / 1024);
  return "";
}

namespace {

// Configs that run but cannot win: tiles far larger than the problem only add masked work, and a
// GEMV pass over more rows than exist re-reads nothing it saves.
std::string wasteful(const MatmulConfig& c, const MatmulProblem& p) {
  if (c.family == MatmulConfig::Family::Gemv) {
    // The tensor-core GEMV's passes are chunks of 8 rows (the mma's width): a second chunk with no
    // row in it is the waste.
    const bool waste = c.tensor_cores ? c.rows_per_pass > 8 && p.m <= c.rows_per_pass - 8 : c.rows_per_pass > 1 && c.rows_per_pass > p.m;
    return p.m > 0 && waste ? fmt::format("{} rows per pass for M = {}", c.rows_per_pass, p.m) : "";
  }
  if (c.bn > 2 * std::max<int64_t>(p.n, 64)) return fmt::format("bn={} for N = {}", c.bn, p.n);
  if (p.m > 0 && c.bm > 2 * std::max<int64_t>(p.m, 64)) return fmt::format("bm={} for M = {}", c.bm, p.m);
  return "";
}

// `all` without repeats and without the configs the pruner rejects or finds wasteful (each, with
// why, into `rejected`); the first, the default, always stays unless it cannot run.
std::vector<MatmulConfig> pruned(const std::vector<MatmulConfig>& all, const MatmulProblem& p, std::vector<std::string>* rejected) {
  std::vector<MatmulConfig> out;
  for (const MatmulConfig& c : all) {
    if (std::find(out.begin(), out.end(), c) != out.end()) continue;
    std::string why = reject_reason(c, p);
    if (why.empty() && !out.empty()) why = wasteful(c, p);  // the default always stays
    if (!why.empty()) {
      if (rejected) rejected->push_back(c.str() + ": " + why);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<MatmulConfig> matmul_candidates(const MatmulProblem& p, std::vector<std::string>* rejected) {
  std::vector<MatmulConfig> all{default_matmul_config(p)};
  const bool small_m = p.m > 0 && p.m <= 16;
  if (p.weight_codes) {  // 4-bit codes: the tensor-core GEMV for few rows, the GEMMs' common tiles
    if (small_m || p.m == 0) {
      for (int u : {1, 2, 4})
        for (int warps : {4, 8, 16}) all.push_back(gemv_mma(u, warps));
      // Codes staged through shared memory: 3-7 KiB in flight per warp without registers.
      for (auto [stages, warps] : {std::pair{4, 4}, {8, 4}, {4, 8}}) all.push_back(gemv_mma_staged(stages, warps));
      // 9-16 rows: both chunks of 8 against each dequantized fragment, the codes read once.
      if (p.m == 0 || p.m > 8)
        for (MatmulConfig c : {gemv_mma(1, 4), gemv_mma(2, 4), gemv_mma_staged(4, 4)}) {
          c.rows_per_pass = 16;
          all.push_back(c);
        }
    }
    if (p.m == 0 || p.m > 1) {
      struct Tile { int bm, bn, wm, wn; };
      for (Tile t : {Tile{16, 64, 1, 2}, Tile{32, 64, 2, 2}, Tile{64, 64, 2, 2}, Tile{128, 128, 2, 2}, Tile{128, 256, 2, 4}})
        for (int bk : {32, 64}) all.push_back(mma(t.bm, t.bn, bk, t.wm, t.wn, t.bm <= 32 ? 6 : 4));
    }
    if (wgmma_available(p) && (p.m == 0 || p.m > 16)) {
      for (int bn : {128, 256})
        for (int stages : {3, 4}) all.push_back(wgmma(bn, stages));
      // Ping-pong: one consumer warpgroup's epilogue under the other's MMAs (it spilled while
      // setmaxnreg was ignored; with the 120 / 192 split it compiles clean).
      MatmulConfig pp = wgmma(128, 4);
      pp.persistent = pp.pingpong = true;
      all.push_back(pp);
      // 256 x 128: the MMAs of a 128 x 256 tile for half its W tile, so half the dequantization per
      // MAC (gemm_wgmma.cuh, BM_ = 256).
      for (int stages : {3, 4}) {
        MatmulConfig c = wgmma(128, stages);
        c.bm = 256;
        all.push_back(c);
      }
      // ... and with W in registers (no W tile: more stages fit).
      for (int stages : {4, 5}) {
        MatmulConfig c = wgmma(128, stages);
        c.bm = 256, c.wreg = true;
        all.push_back(c);
      }
    }
    return pruned(all, p, rejected);
  }
  if (small_m || !mma_dtype(p.dtype) || p.sm < 80) {
    for (int mt : {1, 2, 4, 8, 16})
      for (int u : {2, 4, 8})
        for (int warps : {4, 8}) {
          MatmulConfig c = gemv_default(p);
          c.rows_per_pass = mt, c.loads_in_flight = u, c.warps = warps;
          all.push_back(c);
        }
  }
  // fp8 on sm_89+, i8 on sm_80+: the tensor-core GEMV (few rows; it re-reads W per 8 rows of x).
  if ((small_m || p.m == 0) && ((is_fp8(p.dtype) && p.sm >= 89) || (p.dtype == DType::I8 && p.sm >= 80)))
    for (int u : {2, 4})
      for (int warps : {4, 8, 16}) {
        all.push_back(gemv_mma(u, warps));
        // Staged through shared memory: 3-7 steps (3-7 KiB of W) in flight per warp without registers.
        all.push_back(gemv_mma_staged(u == 2 ? 4 : 8, warps));
      }
  // ... and on sm_90+, fed by bulk copies: 2-6 stages of 16 KiB per CTA in flight.
  if ((small_m || p.m == 0) && p.sm >= 90 && (is_fp8(p.dtype) || p.dtype == DType::I8))
    for (int stages : {2, 4, 6})
      for (int warps : {4, 8}) all.push_back(gemv_mma_bulk(stages, warps));
  if (mma_dtype(p.dtype) && p.sm >= 80) {
    struct Tile { int bm, bn, wm, wn; };
    for (Tile t : {Tile{64, 64, 2, 2}, Tile{64, 128, 2, 2}, Tile{128, 64, 2, 2}, Tile{128, 128, 2, 2},
                   Tile{128, 128, 2, 4}, Tile{128, 256, 2, 4}, Tile{256, 128, 4, 2}})
      for (int bk : {32, 64})
        for (int stages : {3, 4}) all.push_back(mma(t.bm, t.bn, bk, t.wm, t.wn, stages));
    // Few output tiles: split-K for the mma.sync tiles too (sm_80 has no wgmma).
    if (p.m > 0 && p.m <= 512) {
      for (int sk : {2, 4}) {
        MatmulConfig c = mma(64, 64, 64, 2, 2, 4);
        c.split_k = sk;
        all.push_back(c);
      }
      for (int sk : {2, 4, 8}) {
        MatmulConfig c = mma(128, 128, 32, 2, 2, 4);
        c.split_k = sk;
        all.push_back(c);
      }
    }
    // Few rows: thin tiles give the grid enough CTAs and deep pipelines keep W streaming.
    // (A 16 x 32 tile of one warp doubles the CTA count for N = 4096; one warp copying a 16 x 64 tile
    // needs more registers than it has: ptxas spills it.)
    if (p.m > 0 && p.m <= 32)
      for (Tile t : {Tile{16, 32, 1, 1}, Tile{16, 64, 1, 2}, Tile{16, 128, 1, 4}, Tile{32, 64, 2, 2},
                     Tile{32, 128, 2, 2}})
        for (int bk : {32, 64})
          for (int stages : {4, 6, 8}) all.push_back(mma(t.bm, t.bn, bk, t.wm, t.wn, stages));
    // ... and split along K, so that all the rows share one read of W per CTA while enough CTAs
    // stream it (decode B = 32: the o and down projections have 64 column tiles of 64).
    if (p.m > 0 && p.m <= 32)
      for (Tile t : {Tile{16, 64, 1, 2}, Tile{32, 64, 2, 2}, Tile{32, 128, 2, 2}})
        for (int sk : {2, 4, 8}) {
          MatmulConfig c = mma(t.bm, t.bn, 64, t.wm, t.wn, 4);
          c.split_k = sk;
          all.push_back(c);
        }
  }
  for (size_t i = 1; i < all.size(); ++i) all[i] = in_elements(all[i], p);  // (the default is already)
  if (wgmma_available(p)) {
    for (int bn : {128, 256})
      for (int stages : {3, 4, 5, 6}) all.push_back(wgmma(bn, stages));
    // Ping-pong hides the epilogue behind the other warpgroup's MMAs (on the H200 0.91-0.92x of the
    // 128 x 256 default on a plain GEMM, 1.03x on the MLP with its SwiGLU epilogue: docs/perf.md).
    // 6 stages (5 for i8) take the ring past the whole epilogue tile: staged a half at a time.
    for (int stages : {4, 5, 6}) {
      MatmulConfig c = wgmma(128, stages);
      c.persistent = c.pingpong = true;
      all.push_back(c);
    }
    // A persistent grid of 128 x 256 tiles: the next tile's loads run under the epilogue. No faster on
    // the plain GEMMs (H200, November), while ptxas still ignored setmaxnreg; a candidate since the
    // register split takes effect, for the epilogues the layers fuse (SwiGLU, RoPE, a residual).
    {
      MatmulConfig c = wgmma(256, 3);
      c.persistent = true;
      all.push_back(c);
    }
    // (Clusters of two sharing each W tile by multicast, `cluster=2`, are no candidates: on the H100
    // they measured within -7 % .. +2 % of the same config on one CTA for bf16, fp8 and i8 at
    // M = 4096, never a win worth a tuning slot: docs/perf.md "Clusters of two measured".)
    // Split-K where the output tiles alone leave SMs idle (M = 128: 16-112 tiles of 128 x 256).
    if (p.m > 0 && p.m <= 512) {
      for (int bn : {128, 256})
        for (int sk : {2, 3, 4, 6, 8}) {
          MatmulConfig c = wgmma(bn, 4);
          c.split_k = sk;
          all.push_back(c);
        }
      // ... or narrow tiles: more column tiles, so fewer (or no) splits whose partials the last CTA
      // of a tile must read back; their small stages make a deep ring.
      for (int bn : {64, 96})
        for (int stages : {6, 8})
          for (int sk : {1, 2}) {
            MatmulConfig c = wgmma(bn, stages);
            c.split_k = sk;
            all.push_back(c);
          }
      // ... or 64-row tiles (one consumer warpgroup, two CTAs per SM where the ring allows): twice
      // the row tiles at M = 128, as cuBLAS's 64 x 64 and 64 x 96 tiles there.
      for (int bn : {64, 96, 128})
        for (int stages : {4, 6, 8}) {
          MatmulConfig c = wgmma(bn, stages);
          c.bm = 64;
          all.push_back(c);
        }
    }
  }
  return pruned(all, p, rejected);
}

}  // namespace lj
