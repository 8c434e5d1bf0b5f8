// Matmul groups, decode shapes with fp8 x and W on sm_89+ (i8 ones on sm_80+), or with W dequantized from 4-bit codes in
// the kernel (a weight prologue, sm_80+: templates/layerjit/gemv_q4.cuh, 128-element k steps of 16
// bytes of codes per lane): the tensor-core GEMV ("gemv mma"). The
// SIMT GEMV (emit_gemv.cpp) converts every fp8 code to float before its FMA, and on the H200 those
// conversions held it to 1.6-2.3 TB/s; here the codes go to mma.sync.m16n8k32 as loaded
// (templates/layerjit/gemv_mma.cuh: fragment layout and the k permutation that lets each lane load
// 16 contiguous bytes).
//
// One CTA owns a tile of 16 W rows and loops over x in chunks of 8 rows (the mma's 8 columns; at
// decode B = 1 one of them is real, which costs tensor-core work the GEMV has to spare, not bytes).
// Its WARPS warps take equal shares of K's 64-element steps, so a tile keeps WARPS x U x 1 KiB of W
// in flight (with "stages=S", WARPS x (S - 1) KiB staged through cp.async into each warp's ring in
// shared memory instead: codes on 4-bit W, W and x on fp8/i8, whose rings are dynamic shared memory
// and whose first S - 1 steps of a weight W go out before lj_pdl_begin, so that W streams while the
// kernel before, a row kernel at decode, finishes; with "bulk=S" on sm_90+, the CTA's 16 W rows
// through one ring of S stages of 1 KiB per row filled by bulk copies, the warps taking each stage's
// steps in turn); the fp32 partials meet in shared memory and are added in warp order (deterministic).
// With SwiGLU or RoPE the tile is 8 pairs of rows instead (gate n and up N + n, or the two columns
// of a rotation pair) in A rows g and g + 8, so one thread holds both values of each output.
// With the rms_norm before a 4-bit W folded in (one row, FusionGroup::matmul.x_norm), the warps
// also leave their sums of x's squares in shared memory beside the partials, and the thread that
// adds up an accumulator scales it by its row's factor.
#include <algorithm>
#include <optional>

#include "codegen/emit_matmul.h"
#include "layerjit/check.h"
#include "layerjit/op_attrs.h"
#include "layerjit/text.h"

namespace lj {

GeneratedKernel emit_gemv_mma(KernelContext& ctx, const MatmulOperands& op, const MatmulConfig& cfg) {
  const Graph& g = ctx.graph();
  const ValueId x = op.x, wt = op.w;
  const int64_t N = op.n_out, K = op.k;
  const bool rope = !op.segments.empty();
  const bool two_rows = op.glu || rope;
  // Tiles: 16 output columns, or 8 pairs of rows.
  const int64_t units = rope ? N / 2 : N;
  const int64_t per_tile = two_rows ? 8 : 16;
  const int64_t tiles = (units + per_tile - 1) / per_tile;
  const int unroll = cfg.loads_in_flight;
  const int warps = cfg.warps;
  const int threads = 32 * warps;
  const bool q4 = op.dequant >= 0;  // W from 4-bit codes: 16 bytes of codes per lane per k step
  const int stages = cfg.code_stages;  // k steps (of codes) per warp staged in shared memory (0: registers)
  const int bulk = cfg.bulk_stages;    // stages of the CTA's W rows fed by bulk copies (0: none)
  LJ_ASSERT(bulk == 0 || (!q4 && stages == 0), "{}: bulk copies feed the fp8/i8 GEMV's W, not codes or a cp.async ring", ctx.kernel_name());
  const int nb = q4 && cfg.rows_per_pass == 16 ? 2 : 1;  // chunks of 8 x rows per pass over the codes ("mt=16": 2)
  const bool xq = op.x_quantize >= 0;  // x's codes made per row by the CTA (an activation-quantize prologue)
  const bool norm = op.x_norm >= 0 && !xq;  // x = rms_norm(x_src, x_gamma) folded in (4-bit W, one chunk per pass)
  LJ_ASSERT(!(stages > 0 && !q4 && xq), "{}: the staged fp8/i8 GEMV copies x from global memory, not from a quantize prologue", ctx.kernel_name());
  // fp8/i8 W that is a weight: its first steps (U batches in registers, or S - 1 steps into the ring)
  // are loaded before the wait on the kernel before (programmatic dependent launch), so W streams
  // while that kernel, a row kernel at decode, finishes, or, with a quantize prologue, while each
  // CTA quantizes the row (docs/gemm.md).
  const bool prime = !q4 && g.value(wt).is_param && g.value(wt).producer < 0;
  LJ_ASSERT(!norm || (q4 && nb == 1), "{}: the folded rms_norm takes the 4-bit GEMV with 8 rows per pass", ctx.kernel_name());
  // Their zero points' element type in the kernel: u4 read by byte (two per byte), i8, or none.
  const char* tz = !q4 || op.wz < 0 ? "void" : is_packed(g.value(op.wz).type.dtype) ? "unsigned char" : "signed char";
  const char* ts = q4 ? c_type(g.value(op.ws).type.dtype) : nullptr;  // their scales
  const int64_t step_k = q4 ? 128 : 64;
  const int64_t steps = (K + step_k - 1) / step_k;

  ctx.add_group_params();
  const std::string tail_scratch = row_tail_scratch(ctx, op);
  const ValueId xread = norm ? op.x_src : x;  // the rows the kernel reads
  const std::string px = xq ? "" : ctx.buffer_param(xread, false), pw = q4 ? ctx.buffer_param(op.wq, false) : ctx.buffer_param(wt, false),
                    po = rope ? "" : ctx.buffer_param(op.out, true);
  const char* tx = c_type(op.xt);
  const char* tw = c_type(op.wt);
  const std::string xn = g.value(x).name, wn = g.value(wt).name;

  SourceWriter w;
  ctx.header_comment(w);
  w.put(q4 ? "#include \"layerjit/gemv_q4.cuh\"" : "#include \"layerjit/gemv_mma.cuh\"");
  if (!op.epilogue.empty()) w.line("#include \"layerjit/math.cuh\"");
  if (xq || op.tail_quantize >= 0) {
    w.line("#include \"layerjit/quant.cuh\"");
    w.line("#include \"layerjit/reduce.cuh\"");
    w.line("#include \"layerjit/vec.cuh\"");
  }
  if (op.epilogue.empty() && op.tail_quantize >= 0) w.line("#include \"layerjit/math.cuh\"");
  w.blank();
  if (op.table >= 0) emit_inv_freq_table(w, g, op.table);
  if (op.glu) {
    w.line("constexpr lj_i64 N = {};  // output columns: silu(gate) * up, gate rows [0, N) and up rows [N, 2N) of %{}", N, wn);
  } else if (rope) {
    w.line("constexpr lj_i64 N = {};  // columns of %{}: rows of %{}, taken in rotation pairs", N, g.value(op.y).name, wn);
    w.line("constexpr lj_i64 D = {}, HALF = {};  // RoPE: heads of D columns, {}", op.rope_dim, op.rope_dim / 2,
           op.rope_interleaved ? "pairs (2i, 2i + 1)" : "pairs (i, i + HALF)");
  } else {
    w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", N, wn);
  }
  w.line("constexpr lj_i64 K = {};  // reduction length", K);
  if (q4) {
    const Node& d = g.node(op.dequant);
    w.comment(print_node(g, op.dequant) + ": W's weight prologue, in registers");
    w.line("constexpr lj_i64 G = {}, GROUPS = {};  // elements per scale; scales per row of %{}", op.group, K / op.group,
           g.value(d.results[0]).name);
  }
  if (norm) {
    w.comment(print_node(g, op.x_norm) + ": folded in; the B operand is %" + g.value(op.x_src).name + " * %" +
              g.value(op.x_gamma).name + ", the sums times the row's factor");
    w.line("constexpr float EPS = {}f;", attr::eps(g.node(op.x_norm).attrs));
  }
  w.line("constexpr lj_i64 UNITS = {};  // {}: {} per CTA", units, two_rows ? "pairs of W rows" : "W rows", per_tile);
  w.line("constexpr lj_i64 STEPS = {};  // {}-element k steps of a row: 4 lanes x 16 bytes{}", steps, step_k, q4 ? " of codes" : "");
  w.line("constexpr int WARPS = {};  // warps per CTA, each a share of the k steps", warps);
  if (stages > 0 && q4) {
    w.line("constexpr int S = {};  // k steps of codes per warp in its ring in shared memory (cp.async)", stages);
    w.line("constexpr bool EVEN = {};  // K a multiple of 128: no chunk past K", K % step_k == 0 ? "true" : "false");
  } else if (stages > 0) {
    w.line("constexpr int S = {};  // k steps of W and x per warp in its ring in shared memory (cp.async)", stages);
  } else if (bulk > 0) {
    w.line("constexpr int S = {}, KB = {};  // stages of the CTA's 16 W rows x KB bytes in its ring (bulk copies)", bulk, kGemvBulkStageBytes);
    w.line("constexpr lj_i64 NST = (K + KB - 1) / KB;  // stages per pass over W");
  } else {
    w.line("constexpr int U = {};  // k steps in flight per lane", unroll);
  }
  if (q4 && stages == 0) {
    // Every warp's share whole batches of U steps inside K: loads without predicates.
    const bool even = K % step_k == 0 && steps % warps == 0 && steps / warps % unroll == 0;
    w.line("constexpr bool EVEN = {};  // K a multiple of 128, each warp's share a multiple of U steps", even ? "true" : "false");
  }
  w.blank();
  {
    // At least 512 threads per SM (<= 128 registers): two 8-warp CTAs, so the 256 tiles of o and
    // down at N = 4096 fit the H200's 132 SMs in one wave.
    auto fn = w.scope(ctx.signature(threads, std::max(1, 512 / threads)));
    if (!prime) {
      w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
      emit_trigger_dependents(w, ctx.group());
    }
    w.comment(print_node(g, op.node));
    if (nb == 1)
      w.line("__shared__ float partial[WARPS][32][4];  // each warp's 16 x 8 accumulator tile, in mma fragment order");
    else
      w.line("__shared__ float partial[WARPS][{}][32][4];  // each warp's 16 x 8 accumulator tiles, in mma fragment order", nb);
    if (stages > 0 && q4) w.line("__shared__ lj_q4_ring<S> ring[WARPS];  // each warp's next S k steps of codes");
    if (bulk > 0) {
      w.line("extern __shared__ __align__(128) unsigned char lj_smem[];");
      w.line("static_assert(sizeof(lj_gemv_bulk_ring<S, KB>) == {}, \"the launch's dynamic shared memory\");", gemv_bulk_ring_bytes(bulk));
      w.line("lj_gemv_bulk_ring<S, KB>& ring = *reinterpret_cast<lj_gemv_bulk_ring<S, KB>*>(lj_smem);  // the next S stages of W");
      w.line("__shared__ const unsigned char* wrow[16];  // the ring's 16 W rows (A rows), null past the last");
    }
    if (stages > 0 && !q4) {
      w.line("extern __shared__ __align__(16) unsigned char lj_smem[];");
      w.line("lj_mma_ring<S>* const ring = reinterpret_cast<lj_mma_ring<S>*>(lj_smem);  // each warp's next S k steps of W and x");
    }
    if (norm) w.line("__shared__ float ss_part[WARPS][8];  // each warp's sums of squares of the chunk's x rows over its k steps");
    w.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    w.line("const int gr = lane >> 2, t = lane & 3;  // the lane's A rows {{gr, gr + 8}}, x row (B column) gr, k chunk t");
    // The two W rows of A rows gr and gr + 8.
    if (op.glu) {
      w.line("const lj_i64 ua = (lj_i64)blockIdx.x * 8 + gr;  // gate row ua, up row N + ua");
      w.line("const bool a_in = ua < UNITS, b_in = a_in;");
      w.line("const lj_i64 ra = ua, rb = N + ua;");
    } else if (rope) {
      w.line("const lj_i64 pa = (lj_i64)blockIdx.x * 8 + gr;  // the rotation pair of A rows gr and gr + 8");
      w.line("const bool a_in = pa < UNITS, b_in = a_in;");
      if (op.rope_interleaved)
        w.line("const lj_i64 ra = 2 * pa, rb = ra + 1;");
      else
        w.line("const lj_i64 ra = pa / HALF * D + pa % HALF, rb = ra + HALF;");
    } else {
      w.line("const lj_i64 ra = (lj_i64)blockIdx.x * 16 + gr, rb = ra + 8;");
      w.line("const bool a_in = ra < UNITS, b_in = rb < UNITS;");
    }
    if (q4) {  // rows of codes, scales and zero points: dense params (the planner's rule)
      const std::string ps = ctx.buffer_param(op.ws, false);
      w.line("const lj_i64 qra = a_in ? ra : 0, qrb = b_in ? rb : 0;");
      w.line("const unsigned char* __restrict__ wa = {} + qra * (K / 2);  // %{}", pw, g.value(op.wq).name);
      w.line("const unsigned char* __restrict__ wb = {} + qrb * (K / 2);", pw);
      w.line("const {}* __restrict__ sa = {} + qra * GROUPS;  // %{}", ts, ps, g.value(op.ws).name);
      w.line("const {}* __restrict__ sb = {} + qrb * GROUPS;", ts, ps);
      if (op.wz >= 0) {
        const bool packed = is_packed(g.value(op.wz).type.dtype);
        const std::string pz = ctx.buffer_param(op.wz, false);
        w.line("const {}* za = (const {}*){} + qra * GROUPS{};  // %{}", tz, tz, pz, packed ? " / 2" : "", g.value(op.wz).name);
        w.line("const {}* zb = (const {}*){} + qrb * GROUPS{};", tz, tz, pz, packed ? " / 2" : "");
      } else {
        w.line("const void* za = nullptr;  // no zero points");
        w.line("const void* zb = nullptr;");
      }
    } else {
      w.line("const {}* __restrict__ wa = {} + {};", tw, pw, row_address(w, ctx, wt, "(a_in ? ra : 0)", "0", "wa"));
      w.line("const {}* __restrict__ wb = {} + {};", tw, pw, row_address(w, ctx, wt, "(b_in ? rb : 0)", "0", "wb"));
    }
    w.line("const lj_i64 M = {};  // rows of %{}", product_expr(op.rows), xn);
    if (bulk == 0) w.line("const lj_i64 s0 = warp * STEPS / WARPS, s1 = (warp + 1) * STEPS / WARPS;  // this warp's k steps");
    if (bulk > 0) {
      w.line("const lj_i64 total = {} * NST;  // stages of the whole kernel: a pass over W per {}", xq ? "M" : "((M + 7) / 8)",
             xq ? "row of x" : "chunk of 8 x rows");
      w.line("if (warp == 0 && t == 0) {{");
      w.line("  wrow[gr] = a_in ? reinterpret_cast<const unsigned char*>(wa) : nullptr;");
      w.line("  wrow[gr + 8] = b_in ? reinterpret_cast<const unsigned char*>(wb) : nullptr;");
      w.line("}}");
      w.line("if (threadIdx.x == 0) {{");
      w.line("  for (int s = 0; s < S; ++s) lj_mbar_init(&ring.full[s], 1);  // the issuing thread's arrive.expect_tx (plus the bytes)");
      w.line("  lj_mbar_init_fence();");
      w.line("}}");
      w.line("__syncthreads();");
      w.line("if (threadIdx.x == 0)  // the first S stages{}", prime ? fmt::format(" (%{} is a weight: before the wait)", wn) : "");
      w.line("  for (lj_i64 q = 0; q < S && q < total; ++q) lj_gemv_bulk_issue<S, KB, K>(wrow, q, ring);");
    } else if (prime && stages > 0) {
      w.line("lj_gemv_mma_prime<S, K>(wa, wb, a_in, b_in, (int)s0, (int)s1, t, lane, ring[warp]);  // %{}, a weight: before the wait", wn);
    } else if (prime) {
      w.line("uint4 w0a[U], w0b[U];  // the first U steps of W rows a and b");
      w.line("lj_gemv_mma_load_w<U, K>(wa, wb, a_in, b_in, s0, s1, t, w0a, w0b);  // %{}, a weight: before the wait", wn);
    }
    if (prime) {  // the wait after a weight's first loads (else it opened the kernel)
      w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
      emit_trigger_dependents(w, ctx.group());
    }
    if (xq) {
      w.comment("Rows of %" + xn + " one at a time (each quantized into shared memory first; the plan is made for one),");
      w.comment("in mma column 0; %" + wn + " is streamed once per row.");
    } else if (nb == 2) {
      w.comment("Rows of %" + xn + " 16 at a time, two chunks of 8 (the mma's columns) against each dequantized A fragment;");
      w.comment("%" + wn + " is streamed once per 16 rows.");
    } else {
      w.comment("Rows of %" + xn + " in chunks of 8 (the mma's columns); %" + wn + " is streamed once per chunk.");
    }
    std::optional<SourceWriter::Scope> chunk;
    chunk.emplace(w.scope(fmt::format("for (lj_i64 m0 = 0; m0 < M; m0 += {})", xq ? 1 : 8 * nb)));
    if (xq) {
      emit_x_quantize_prologue(w, ctx, op, threads, "m0");
      w.line("const bool x_in = gr == 0;");
      w.line("const {}* __restrict__ xr = xq_s;", tx);
    } else {
      w.line("const bool x_in = m0 + gr < M;");
      w.line("const {}* __restrict__ xr = {} + {};{}", tx, px, row_address(w, ctx, xread, "(x_in ? m0 + gr : 0)", "0", "xc"),
             norm ? "  // %" + g.value(xread).name : "");
    }
    if (nb == 2) {
      w.line("const bool x_in2 = m0 + 8 + gr < M;  // the second chunk's row");
      w.line("const {}* __restrict__ xr2 = {} + {};", tx, px, row_address(w, ctx, x, "(x_in2 ? m0 + 8 + gr : 0)", "0", "xd"));
      w.line("float c[2][4] = {{}};");
    } else {
      w.line("float c[4] = {{0.f, 0.f, 0.f, 0.f}};");
    }
    const char* i4 = q4 && g.value(op.wq).type.dtype == DType::I4 ? "true" : "false";
    if (norm) {
      w.line("const lj_q4_xs<{}, 1, true> xs{{{{xr}}, {}, {{}}}};  // %{}", tx, ctx.buffer_param(op.x_gamma, false), g.value(op.x_gamma).name);
    }
    const std::string xs = norm ? "xs" : nb == 2 ? fmt::format("lj_q4_xs<{}, 2>{{{{xr, xr2}}}}", tx) : fmt::format("lj_q4_xs<{}, 1>{{{{xr}}}}", tx);
    const char* cs = nb == 2 ? "c" : "&c";
    if (q4 && stages > 0) {
      w.line("lj_gemv_q4_share_staged<{}, {}, {}, {}, S, K, G, EVEN, {}>(wa, wb, sa, sb, za, zb, {}, s0, s1, t, lane, ring[warp], {});", tx, ts, tz,
             i4, nb, xs, cs);
    } else if (q4 && nb == 2) {
      w.line("lj_gemv_q4_share_rows<{}, {}, {}, {}, U, K, G, EVEN, 2>(wa, wb, sa, sb, za, zb, {}, s0, s1, t, c);", tx, ts, tz, i4, xs);
    } else if (q4 && norm) {
      w.line("lj_gemv_q4_share_rows<{}, {}, {}, {}, U, K, G, EVEN, 1>(wa, wb, sa, sb, za, zb, xs, s0, s1, t, &c);", tx, ts, tz, i4);
    } else if (q4) {
      w.line("lj_gemv_q4_share<{}, {}, {}, {}, U, K, G, EVEN>(wa, wb, sa, sb, za, zb, xr, s0, s1, t, c);", tx, ts, tz, i4);
    } else if (bulk > 0) {
      const std::string q0 = xq ? "m0 * NST" : "m0 / 8 * NST";
      if (op.xt == DType::I8)
        w.line("lj_gemv_mma_share_s8_bulk<S, KB, WARPS, K>(xr, x_in, {}, total, wrow, warp, lane, ring, c);", q0);
      else
        w.line("lj_gemv_mma_share_bulk<{}, {}, S, KB, WARPS, K>(xr, x_in, {}, total, wrow, warp, lane, ring, c);", tw, tx, q0);
    } else if (stages > 0) {
      const std::string primed = prime ? "m0 == 0" : "false";
      if (op.xt == DType::I8)
        w.line("lj_gemv_mma_share_s8_staged<S, K>(wa, wb, xr, a_in, b_in, x_in, (int)s0, (int)s1, t, lane, ring[warp], {}, c);", primed);
      else
        w.line("lj_gemv_mma_share_staged<{}, {}, S, K>(wa, wb, xr, a_in, b_in, x_in, (int)s0, (int)s1, t, lane, ring[warp], {}, c);", tw, tx, primed);
    } else {
      if (op.xt == DType::I8 && prime)
        w.line("lj_gemv_mma_share_s8_pre<U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, w0a, w0b, m0 == 0, c);");
      else if (op.xt == DType::I8)
        w.line("lj_gemv_mma_share_s8<U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, c);");
      else if (prime)
        w.line("lj_gemv_mma_share_pre<{}, {}, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, w0a, w0b, m0 == 0, c);", tw, tx);
      else
        w.line("lj_gemv_mma_share<{}, {}, U, K>(wa, wb, xr, a_in, b_in, x_in, s0, s1, t, c);", tw, tx);
    }
    w.line("if (m0 > 0) __syncthreads();  // the previous chunk's partials are read");
    w.line("#pragma unroll");
    if (nb == 2) {
      w.line("for (int h = 0; h < 2; ++h)");
      w.line("  for (int r = 0; r < 4; ++r) partial[warp][h][lane][r] = c[h][r];");
    } else {
      w.line("for (int r = 0; r < 4; ++r) partial[warp][lane][r] = c[r];");
    }
    if (norm) w.line("if (gr >> 1 == t) ss_part[warp][gr] = gr & 1 ? xs.ss[1] : xs.ss[0];  // D[gr][gr]: x row m0 + gr's squares");
    w.line("__syncthreads();");
    // Thread e < 16 x 8 (or 8 x 8 pairs) sums one accumulator over the warps: fragment lane fl, register
    // fr; C row fl / 4 + 8 * (fr / 2), column 2 * (fl % 4) + fr % 2. With two chunks, e's chunk h
    // first, the threads looping over the 256 (128) accumulators.
    const int per_chunk = two_rows ? 64 : 128;
    std::optional<SourceWriter::Scope> each;
    if (nb == 2) {
      each.emplace(w.scope(fmt::format("for (int e = threadIdx.x; e < {}; e += {})", 2 * per_chunk, threads)));
      w.line("const int h = e / {}, f = e % {};  // chunk h of x rows, accumulator f of its tile", per_chunk, per_chunk);
    }
    const std::string e = nb == 2 ? "f" : "e";
    const std::string pv = nb == 2 ? "partial[v][h]" : "partial[v]";
    if (two_rows) {
      w.comment(fmt::format("{} < 64: A rows gr' and gr' + 8 (a pair) at x row m0 + {}column, registers fr and fr + 2.",
                            nb == 2 ? "Accumulator f" : "Thread e", nb == 2 ? "8h + " : ""));
      if (nb == 1) {
        w.line("const int e = threadIdx.x;");
        w.line("if (e >= 64) continue;");
      }
      w.line("const int fl = {0} >> 1, fr = {0} & 1;", e);
      w.line("float sum = 0.f, sum_up = 0.f;");
      w.line("#pragma unroll");
      w.line("for (int v = 0; v < WARPS; ++v) sum += {0}[fl][fr], sum_up += {0}[fl][fr + 2];", pv);
      w.line("const lj_i64 u = (lj_i64)blockIdx.x * 8 + (fl >> 2);");
    } else {
      w.comment(nb == 2 ? "Accumulator f < 128 of chunk h (fragment lane fl, register fr), added over the warps."
                        : "Thread e < 128: one accumulator (fragment lane fl, register fr), added over the warps.");
      if (nb == 1) {
        w.line("const int e = threadIdx.x;");
        w.line("if (e >= 128) continue;");
      }
      w.line("const int fl = {0} >> 2, fr = {0} & 3;", e);
      w.line("float sum = 0.f;");
      w.line("#pragma unroll");
      w.line("for (int v = 0; v < WARPS; ++v) sum += {}[fl][fr];", pv);
      w.line("const lj_i64 u = (lj_i64)blockIdx.x * 16 + (fl >> 2) + 8 * (fr >> 1);");
    }
    if (nb == 2) w.line("const lj_i64 m = m0 + 8 * h + 2 * (fl & 3) + (fr & 1);");
    if (nb == 1) w.line("const lj_i64 m = m0 + 2 * (fl & 3) + (fr & 1);");
    w.put(xq ? "if (u >= UNITS || m != m0) continue;  // one row per pass" : "if (u >= UNITS || m >= M) continue;");
    if (norm) {
      w.line("float ss = 0.f;");
      w.line("#pragma unroll");
      w.line("for (int v = 0; v < WARPS; ++v) ss += ss_part[v][m - m0];");
      // (Times 1/K, not a division: ptxas calls a subroutine for an IEEE division, with a stack frame.)
      w.line("const float rn = rsqrtf(ss * (1.f / (float)K) + EPS);  // %{}'s factor for row m", g.value(x).name);
      w.line("sum *= rn;");
      if (two_rows) w.line("sum_up *= rn;");
    }
    std::string rs = row_scale_expr(w, ctx, op, "m", "sc");
    if (!rs.empty()) {
      w.line("const float rs = {};  // %{}", rs, g.value(op.row_scale).name);
      w.line("sum *= rs;");
      if (two_rows) w.line("sum_up *= rs;");
    }
    if (rope && op.rope_interleaved)
      w.line("const lj_i64 n = 2 * u, n2 = n + 1;");
    else if (rope)
      w.line("const lj_i64 n = u / HALF * D + u % HALF, n2 = n + HALF;");
    else
      w.line("const lj_i64 n = u;");
    emit_gemv_output(w, ctx, op, po);
    each.reset();
    chunk.reset();
    emit_row_tail(w, ctx, op, threads, tail_scratch);
  }

  GeneratedKernel k = ctx.kernel(w);
  k.launch.work.constant = tiles;
  k.launch.per_block = 1;
  k.launch.threads = threads;
  if (stages > 0 && !q4) k.launch.shared_bytes = warps * stages * 3 * 32 * 16;  // the rings: sizeof(lj_mma_ring<S>) per warp
  if (bulk > 0) k.launch.shared_bytes = static_cast<int>(gemv_bulk_ring_bytes(bulk));
  k.config = cfg.str();
  k.launch.early = true;  // many small CTAs: where they land does not matter
  return k;
}

}  // namespace lj
