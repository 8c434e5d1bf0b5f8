// The tensor-core GEMM's parts common to its two families (emit_gemm.h): the operands' facts and
// parameters, the head of the source, the kernel's opening, a CTA's tile and split-K's reduction,
// and the launch description.
#include <algorithm>

#include "codegen/emit_gemm.h"
#include "layerjit/text.h"
#include "layerjit/check.h"

namespace lj {

GemmKernel::GemmKernel(KernelContext& c, const MatmulOperands& o, const MatmulConfig& cf, const EmitOptions& eo)
    : ctx(c), op(o), cfg(cf), opts(eo) {
  const Graph& g = ctx.graph();
  rope = !op.segments.empty();
  stored = rope ? op.y : op.out;
  hopper = cfg.family == MatmulConfig::Family::Wgmma;
  const bool sixteen = op.xt == DType::BF16 || op.xt == DType::F16;
  LJ_CHECK(op.xt == op.wt && (sixteen || op.xt == DType::I8 || (hopper && is_fp8(op.xt))), g.node(op.node).loc,
           "{}: the tensor-core GEMM multiplies bf16, f16 or i8 operands of one dtype (the Hopper GEMM also f8e4m3 or f8e5m2), got %{}: {} "
           "and %{}: {}",
           ctx.kernel_name(), g.value(op.x).name, dtype_name(op.xt), g.value(op.w).name, dtype_name(op.wt));
  kt = cfg.k_tile(dtype_bytes(op.xt));
  pairs = rope && !op.rope_interleaved && cfg.bn % op.rope_dim != 0;
  q4 = op.dequant >= 0;
  const int chunk = 16 / dtype_bytes(op.xt);  // elements per 16-byte cp.async
  // (Codes are dense params with K a multiple of 32: their rows start 16-byte aligned.)
  async = ctx.vector_width(q4 ? std::vector<ValueId>{op.x} : std::vector<ValueId>{op.x, op.w}, g.value(op.x).type.shape, chunk) == chunk;
  split = cfg.split_k > 1;
  virtual_n = op.glu ? (op.n_out + 7) / 8 * 16 : op.n;

  ctx.add_group_params();
  px = ctx.buffer_param(op.x, false), pw = ctx.buffer_param(q4 ? op.wq : op.w, false), po = rope ? "" : ctx.buffer_param(op.out, true);
  if (q4) {
    // The weight prologue's parameters: codes (above), scales, zero points (u4 read by byte, i8, or
    // none), and the lj_q4 over them.
    const char* tz = op.wz < 0 ? "void" : is_packed(g.value(op.wz).type.dtype) ? "unsigned char" : "signed char";
    const std::string ps = ctx.buffer_param(op.ws, false), pz = op.wz < 0 ? "nullptr" : ctx.buffer_param(op.wz, false);
    q4_type = fmt::format("lj_q4<{}, {}, {}, {}, /*NW*/ {}, K, /*G*/ {}", c_type(op.xt), c_type(g.value(op.ws).type.dtype), tz,
                          g.value(op.wq).type.dtype == DType::I4 ? "true" : "false", op.n, op.group);
    q4_init = fmt::format("{}, {}, {}", pw, ps, op.wz < 0 ? "nullptr" : fmt::format("(const {}*){}", tz, pz));
  }
  if (hopper) {
    std::optional<TensorMapSpec> sx = tma_rows(ctx, op.x), sw = q4 ? std::optional<TensorMapSpec>(TensorMapSpec{}) : tma_rows(ctx, op.w);
    LJ_CHECK(sx && sw, g.node(op.node).loc, "{}: config '{}' loads x and W with TMA, which needs rows one 16-byte aligned stride apart",
             ctx.kernel_name(), cfg.str());
    sx->box_rows = cfg.bm, sx->box_cols = kt;
    if (q4) {  // the codes' bytes, dense rows of K / 2, 32 of each row per k tile
      sw->rows = DimProduct{op.n, {}};
      sw->cols = sw->row_stride = op.k / 2;
      sw->box_cols = 32;
      // Not swizzled. wreg's reads (8 bytes of 8 rows 32 bytes apart) put rows r and r + 4 on the
      // same banks; the 32-byte swizzle took 12 % of the shared wavefronts away but added the
      // swizzled address to every k step of the consumers' serial chain: 5-7 % slower on an H100
      // (docs/perf.md, forty-seventh session).
      sw->swizzle_bytes = 0;
    } else {
      sw->box_cols = kt;
    }
    sw->box_rows = cfg.bn / 2;  // two boxes per tile: gate and up rows with SwiGLU
    tx = ctx.tensor_map_param(op.x, *sx);
    tw = ctx.tensor_map_param(q4 ? op.wq : op.w, *sw);
  }
  // Split-K: each CTA's fp32 partial (bm x bn) plus room for a completion counter per tile.
  // Stream-K: two fp32 partials per CTA (the first and the last tile its share touches) and a counter.
  scratch = split ? ctx.scratch_param(int64_t{cfg.bm} * cfg.bn * 4 + 4)
            : cfg.stream_k ? ctx.scratch_param(2 * int64_t{cfg.bm} * cfg.bn * 4 + 4) : "";
  staged_rows = cfg.staged_rows(dtype_bytes(op.xt), dtype_bytes(op.yt), q4, eo.max_shared_bytes);
  pipeline_smem = std::max(cfg.shared_bytes(dtype_bytes(op.xt), dtype_bytes(op.yt), q4, eo.max_shared_bytes),
                           staged_rows * (cfg.bn + 8) * dtype_bytes(op.yt));
  if (q4) {
    // The Hopper GEMM, one tile per CTA: the tile's scales and zero points for all of K copied into
    // shared memory once (gemm_q4.cuh, STAGED), where they fit beside the ring; read from L2 a k tile
    // ahead otherwise.
    // (The ring, then 128 bytes of barriers, then the constants: runs of bn / 2 rows, whole 16-byte
    // chunks where bn is a multiple of 64. W in registers: no W tile in the ring, and the constants
    // always staged, the pruner having checked that they fit.)
    const int64_t consts = q4_constant_bytes(g, op, cfg.bn);
    const int64_t with = cfg.wreg ? wreg_shared_bytes(cfg, 0) + consts
                                  : int64_t{cfg.shared_bytes(dtype_bytes(op.xt), dtype_bytes(op.yt), true)} - 3 * cfg.stages * 8 + 128 + consts;
    const bool staged = cfg.wreg || (hopper && !cfg.persistent && cfg.bn % 64 == 0 && with <= eo.max_shared_bytes);
    q4_type += staged ? fmt::format(", /*STAGED*/ {}>", cfg.bn) : ">";
    if (cfg.wreg)  // (the SS ring pipeline_smem holds above has a W tile this ring has not)
      pipeline_smem = std::max(static_cast<int>(with), staged_rows * (cfg.bn + 8) * dtype_bytes(op.yt));
    else if (staged)
      pipeline_smem = std::max(pipeline_smem, static_cast<int>(with));
  }
}

void emit_gemm_head(GemmKernel& k, const char* main_header, const std::string& extra_include) {
  SourceWriter& w = k.w;
  const MatmulOperands& op = k.op;
  const std::string wn = k.ctx.graph().value(op.w).name;
  k.ctx.header_comment(w);
  w.line("#include \"layerjit/{}\"", main_header);
  if (k.q4) w.line("#include \"layerjit/gemm_q4.cuh\"");
  if (!op.epilogue.empty()) w.line("#include \"layerjit/math.cuh\"");
  if (!extra_include.empty()) w.put(extra_include);
  w.blank();
  if (op.glu) {
    w.line("constexpr lj_i64 N_OUT = {};  // output columns: silu(gate) * up", op.n_out);
    w.line("constexpr lj_i64 N = {};  // tile columns: 8 gate, 8 up rows of %{} per 16", k.virtual_n, wn);
  } else {
    w.line("constexpr lj_i64 N = {};  // output columns: rows of %{}", op.n, wn);
    w.line("constexpr lj_i64 N_OUT = N;");
  }
  w.line("constexpr lj_i64 K = {};  // reduction length", op.k);
  if (k.q4) {
    w.comment(print_node(k.ctx.graph(), op.dequant) +
              (k.cfg.wreg ? ": W's weight prologue, dequantized into registers (wgmma's A operand)"
                          : ": W's weight prologue, dequantized into shared memory"));
    w.line("typedef {} Q;", k.q4_type);
  }
  if (k.rope) {
    w.line("constexpr lj_i64 D = {}, HALF = {};  // RoPE: heads of D columns, {}", op.rope_dim, op.rope_dim / 2,
           op.rope_interleaved ? "pairs (2i, 2i + 1)" : "pairs (i, i + HALF)");
    if (k.pairs) w.line("constexpr lj_i64 BN = {};  // a tile: BN / 2 pairs, their first columns, then their second", k.cfg.bn);
  }
}

void begin_gemm_body(GemmKernel& k, int min_blocks, int smem_align) {
  SourceWriter& w = k.w;
  k.body.emplace(w.scope(k.ctx.signature(k.cfg.threads(), min_blocks, k.cfg.cluster)));
  w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
  emit_trigger_dependents(w, k.ctx.group());
  w.line("extern __shared__ __align__({}) unsigned char lj_smem[];", smem_align);
  w.line("const lj_i64 M = {};  // rows of %{}", product_expr(k.op.rows), k.ctx.graph().value(k.op.x).name);
}

void emit_q4_weights(GemmKernel& k) {
  if (k.q4) k.w.line("const Q wq{{{}}};  // codes, scales, zero points", k.q4_init);
}

void emit_cta_tile(GemmKernel& k) {
  SourceWriter& w = k.w;
  if (k.split) {
    w.line("const int split = blockIdx.x % Gemm::SPLIT;  // split-K: this CTA's share of the tile's k tiles");
    w.line("lj_i64 m0, n0;");
    w.line("Gemm::tile_at(blockIdx.x / Gemm::SPLIT, M, m0, n0);");
  } else {
    w.line("lj_i64 m0, n0;");
    w.line("Gemm::tile(M, m0, n0);");
  }
}

void emit_split_reduce(GemmKernel& k) {
  if (!k.split) return;
  SourceWriter& w = k.w;
  w.comment("Split-K: the tile's partials in scratch (SPLIT per tile), then one completion counter per tile.");
  w.line("float* part = reinterpret_cast<float*>({}) + (lj_i64)(blockIdx.x / Gemm::SPLIT) * Gemm::SPLIT * Gemm::PART_FLOATS;", k.scratch);
  w.line("unsigned* counter = reinterpret_cast<unsigned*>(reinterpret_cast<float*>({}) + (lj_i64)gridDim.x * Gemm::PART_FLOATS) +",
         k.scratch);
  w.line("                    blockIdx.x / Gemm::SPLIT;");
  w.line("if (!Gemm::split_reduce(acc, part, counter, split)) return;  // another CTA of the tile finishes it");
}

GeneratedKernel finish_gemm(GemmKernel& k) {
  k.tile_loop.reset();
  k.body.reset();
  const MatmulConfig& cfg = k.cfg;
  GeneratedKernel out;
  out.group = k.ctx.group().id;
  out.name = k.ctx.kernel_name();
  out.source = k.w.str();
  out.params = k.ctx.params();
  out.launch.work = k.op.rows;
  out.launch.per_block = int64_t{cfg.bm} * cfg.cluster;  // a cluster's CTAs take consecutive row tiles of one column tile
  // Stream-K: a CTA per k tile at most (grid <= total, see share_begin), one per SM (max_blocks below).
  out.launch.tiles_per_unit =
      (k.virtual_n + cfg.bn - 1) / cfg.bn * (k.split ? cfg.split_k : cfg.stream_k ? (k.op.k + k.kt - 1) / k.kt : cfg.cluster);
  out.launch.threads = cfg.threads();
  out.arch_specific = k.hopper;
  out.config = cfg.str();
  out.launch.shared_bytes = k.pipeline_smem;  // a persistent kernel launches one CTA per SM (below)
  if (k.table_smem) out.launch.shared_bytes = std::max(out.launch.shared_bytes, static_cast<int>(k.table_end));
  // (Whole clusters: the grid a multiple of their size.)
  if (cfg.persistent) out.launch.max_blocks = k.opts.sm_count / cfg.cluster * cfg.cluster;
  return out;
}

}  // namespace lj
