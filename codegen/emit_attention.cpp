// Attention groups: one flash-attention kernel per group (templates/layerjit/attention.cuh). The
// emitter decides the family and tiles, and writes what the template cannot know: where each row of q,
// k, v and the output lives (views, strides, the batch and cache layout), the positions of the
// queries, the scale, and the grid decomposition.
//
// Family: when the query rows of one KV head (tokens x G query heads per KV head) fit one 16-row tile
// — decode, one token per sequence — the split-KV kernel: the keys are split across CTAs (enough CTAs
// to fill the GPU even for one sequence) and merged by the last CTA of each (sequence, KV head)
// through a scratch buffer. Otherwise the prefill kernel: BM-row query tiles, heaviest (causal) tiles
// first; on sm_90a, where q, k and v can be read by TMA, the warp-specialised wgmma kernel
// (attention_wgmma.cuh) by default, else the mma.sync one.
#include <algorithm>
#include <cmath>

#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "layerjit/text.h"

namespace lj {

namespace {

int64_t hinted(const Dim& d, const Bindings& hint, int64_t fallback) {
  if (d.is_const()) return d.value();
  const std::optional<int64_t> v = hint.get(d.symbol());
  return v ? *v : fallback;
}

// A TMA view of the rows of an attention operand [.., S, H, D]: one row per (sequence, position), the
// H x D elements of a row contiguous, rows one constant 16-byte-aligned stride apart, sequences
// back to back (row b * S + j). nullopt with `why` set otherwise.
std::optional<TensorMapSpec> tma_token_rows(const KernelContext& ctx, ValueId v, std::string& why) {
  const Graph& g = ctx.graph();
  const Shape& s = g.value(v).type.shape;
  const TensorLayout& l = ctx.layout(v);
  const size_t r = s.size();
  const int64_t eb = dtype_bytes(g.value(v).type.dtype);
  const std::string name = "%" + g.value(v).name;
  if (!s[r - 1].is_const() || !s[r - 2].is_const() || l.strides[r - 1] != DimProduct{} ||
      l.strides[r - 2] != DimProduct{s[r - 1].value(), {}, false}) {
    why = name + "'s heads are not contiguous rows of head_dim elements";
    return std::nullopt;
  }
  const DimProduct& row_stride = l.strides[r - 3];
  if (!row_stride.symbols.empty() || !l.offset.symbols.empty()) {
    why = name + "'s row stride or offset depends on a symbol";
    return std::nullopt;
  }
  if (r == 4 && !(s[0].is_const() && s[0].value() == 1) && l.strides[0] != multiply(row_stride, dim_as_product(s[1]))) {
    why = name + "'s sequences are not back to back";
    return std::nullopt;
  }
  if (row_stride.constant * eb % 16 != 0 || l.offset.constant * eb % 16 != 0) {
    why = name + "'s rows are not 16-byte aligned";
    return std::nullopt;
  }
  TensorMapSpec t;
  t.rows = dim_product(Shape(s.begin(), s.end() - 2));
  t.cols = s[r - 2].value() * s[r - 1].value();
  t.row_stride = row_stride.constant;
  t.offset = l.offset.constant;
  return t;
}

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

GeneratedKernel emit_attention(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const std::string name = ctx.kernel_name();
  LJ_CHECK(grp.nodes.size() == 1 && g.node(grp.nodes[0]).kind == OpKind::Attention, SourceLoc{},
           "{}: an attention kernel implements exactly one attention node", name);
  const Node& n = g.node(grp.nodes[0]);
  const ValueId q = n.operands[0], k = n.operands[1], v = n.operands[2], out = n.results[0];
  // The log-sum-exp result, where the graph asks for it and something reads it.
  const ValueId lse = n.results.size() > 1 && std::find(grp.outputs.begin(), grp.outputs.end(), n.results[1]) != grp.outputs.end()
                          ? n.results[1]
                          : -1;
  const ValueId cache_pos = n.operands.size() > 3 ? n.operands[3] : -1;
  const ValueId block_table = n.operands.size() > 4 ? n.operands[4] : -1;  // paged: k, v are page pools
  const TensorType& qt = g.value(q).type;
  const TensorType& kt = g.value(k).type;
  const bool batched = qt.rank() == 4;
  const Dim& tok = qt.shape[static_cast<size_t>(qt.rank() - 3)];
  // Keys per sequence: S, or pages x page of a paged cache.
  const DimProduct keys = block_table >= 0 ? multiply(dim_as_product(g.value(block_table).type.shape[1]), dim_as_product(kt.shape[1]))
                                           : dim_as_product(kt.shape[static_cast<size_t>(kt.rank() - 3)]);
  const int64_t hq = qt.shape[static_cast<size_t>(qt.rank() - 2)].value();
  const int64_t hkv = kt.shape[static_cast<size_t>(kt.rank() - 2)].value();
  const int64_t d = qt.shape.back().value();
  const int64_t group = hq / hkv;
  const bool causal = n.attrs.get_bool("causal");
  const double scale = n.attrs.has("scale") ? n.attrs.get_float("scale") : 1.0 / std::sqrt(static_cast<double>(d));

  auto unsupported = [&](const std::string& why) {
    return UserError(fmt::format("{}: the attention kernels cannot implement {}: {}", name, print_node(g, grp.nodes[0]), why));
  };
  if (qt.dtype != DType::BF16 && qt.dtype != DType::F16)
    throw unsupported(fmt::format("they run on tensor cores with bf16 or f16 operands; q is {}", dtype_name(qt.dtype)));
  if (g.value(out).type.dtype != qt.dtype) throw unsupported("the output dtype must be q's");
  if (d != 16 && d != 32 && d != 64 && d != 128) throw unsupported(fmt::format("head_dim must be 16, 32, 64 or 128, got {}", d));
  for (ValueId x : {q, k, v, out}) {
    if (ctx.vector_width({x}, g.value(x).type.shape, 8) == 8) continue;
    const TensorLayout& l = ctx.layout(x);
    std::string strides;
    for (const DimProduct& st : l.strides) strides += (strides.empty() ? "" : ", ") + st.str();
    throw unsupported(fmt::format("%{} must have contiguous, 16-byte aligned head_dim rows (it is a view at offset {} with strides [{}])",
                                  g.value(x).name, l.offset.str(), strides));
  }

  // Decode when one 16-row tile holds every query row of a KV head.
  const bool decode = tok.is_const() && tok.value() * group <= 16;
  const int64_t rows = decode ? tok.value() * group : 0;
  const char* ty = c_type(qt.dtype);
  // Decode (by default): three stages, so a CTA of a long-context, small-batch launch (two stages per
  // chunk) has its whole chunk in flight at once. Prefill: two m-tiles per warp (each K/V fragment
  // read from shared memory feeds two products), a double buffer.
  if (opts.attention && opts.attention->decode != decode)
    throw unsupported(fmt::format("attention config '{}' is for {} kernels, this group is {}", opts.attention->str(),
                                  opts.attention->decode ? "decode" : "prefill", decode ? "decode (one query token per sequence)" : "prefill"));
  // The hinted batch and cache length size the decode kernel's key split (4096 keys when unknown).
  const int64_t b_hint = batched ? hinted(qt.shape[0], opts.hint, 1) : 1;
  int64_t c_hint = keys.constant;
  for (const std::string& sym : keys.symbols) c_hint = opts.hint.get(sym) ? c_hint * *opts.hint.get(sym) : 0;
  if (c_hint <= 0) c_hint = 4096;
  const int64_t pairs = b_hint * hkv;  // (sequence, KV head) pairs
  // Few pairs (B <= 2 at 8 KV heads): 8 warps per CTA and about 128 CTAs, else 4 warps and one wave of
  // two CTAs per SM (measured on the H200 at C = 4096: B = 1 1101 GB/s with 8 warps x 16 chunks of 256
  // keys against 925 with 8 chunks of 512 and 773 with 32 of 128: fewer CTAs leave SMs idle, more
  // make the merge longer; B = 32 3633 GB/s unsplit against 3467 with 2 chunks).
  AttentionConfig dc = AttentionConfig::decode_default();
  if (pairs <= 16) dc.warps = 8;
  // (Where three stages of 8 warps' keys do not fit, e.g. sm_80's 163 KiB, two: 893 GB/s at B = 1.)
  if (pairs <= 16 && (16 + 2 * dc.stages * dc.warps * dc.bn) * d * 2 > opts.max_shared_bytes) dc.stages = 2;
  if (decode && opts.attention) dc = *opts.attention;
  const int kDecodeWarps = dc.warps, kDecodeBn = dc.bn, kDecodeStages = dc.stages;
  if (decode && (kDecodeBn % 16 != 0 || kDecodeWarps < 1 || kDecodeWarps > 16 || kDecodeStages < 2 ||
                 (dc.chunk > 0 && dc.chunk % (kDecodeWarps * kDecodeBn) != 0)))
    throw unsupported(fmt::format("decode config '{}': bn a multiple of 16, 1-16 warps, two stages or more, a chunk of whole stages "
                                  "(warps x bn keys)", dc.str()));
  // The Hopper kernel: sm_90a, head_dim 64 or 128, G dividing 128 rows into whole 8-row groups of
  // tokens, a contiguous cache (no pages), and q, k, v, each readable by TMA.
  std::string no_wgmma;
  std::optional<TensorMapSpec> tq, tk, tv;
  if (decode) {
    no_wgmma = "one query token per sequence takes the split-KV decode kernel";
  } else if (!(opts.arch_specific && opts.sm == 90)) {
    no_wgmma = fmt::format("the target is sm_{}{}, the kernel needs sm_90a", opts.sm, opts.arch_specific ? "a" : "");
  } else if (d != 64 && d != 128) {
    no_wgmma = fmt::format("head_dim is {}, the kernel takes 64 or 128", d);
  } else if (128 % group != 0 || 128 / group % 8 != 0) {
    no_wgmma = fmt::format("{} query heads per KV head do not split 128 rows into whole 8-token groups", group);
  } else if (block_table >= 0) {
    no_wgmma = "the cache is paged";
  } else if (!(scale > 0)) {
    no_wgmma = fmt::format("the scale is {}; the kernel folds a positive scale into its exponent", scale);
  } else {
    tq = tma_token_rows(ctx, q, no_wgmma);
    if (tq) tk = tma_token_rows(ctx, k, no_wgmma);
    if (tk) tv = tma_token_rows(ctx, v, no_wgmma);
  }
  const bool wgmma_ok = tq && tk && tv;
  const AttentionConfig pc = !decode && opts.attention ? *opts.attention : wgmma_ok ? AttentionConfig::hopper() : AttentionConfig{};
  if (!decode && pc.wgmma && !wgmma_ok)
    throw unsupported(fmt::format("prefill config '{}' cannot run here: {}", pc.str(), no_wgmma));
  const bool hopper = !decode && pc.wgmma;
  int threads = 0, smem = 0;
  int64_t per_block = 0;  // tokens per CTA (prefill) or keys per CTA (decode)
  std::string flash;
  if (decode) {
    // Chunks per pair: about 128 CTAs of 8 warps for few pairs, else at most one wave of two CTAs per
    // SM of a 132-SM GPU; at least one stage (WARPS x BN keys) per CTA.
    const int64_t want = pairs <= 16 ? std::max<int64_t>(1, 128 / pairs) : std::max<int64_t>(1, 264 / pairs);
    const int64_t stage_keys = kDecodeWarps * kDecodeBn;
    per_block = dc.chunk;
    if (per_block <= 0) {  // whole stages
      per_block = std::clamp<int64_t>(next_pow2((c_hint + want - 1) / want), stage_keys, 4096);
      per_block = (per_block + stage_keys - 1) / stage_keys * stage_keys;
    }
    flash = fmt::format("lj_flash_decode<{}, {}, {}, {}, {}, {}, {}, {}, {}{}>", ty, d, rows, group, kDecodeBn, kDecodeWarps, kDecodeStages,
                        per_block, causal ? "true" : "false", block_table >= 0 ? ", true" : "");
    threads = kDecodeWarps * 32;
    const int pipe = static_cast<int>((16 + 2 * kDecodeStages * stage_keys) * d * 2);
    const int merge = static_cast<int>(kDecodeWarps * (rows * (d + 8) + 32) * 4);  // lj_flash_decode::MERGE_BYTES
    smem = std::max(pipe, merge);
    if (smem > opts.max_shared_bytes)
      throw unsupported(fmt::format("decode config '{}' needs {} bytes of shared memory, more than the {} the target allows", dc.str(), smem,
                                    opts.max_shared_bytes));
  } else if (hopper) {
    if ((pc.bn != 64 && pc.bn != 128) || pc.stages < 2)
      throw unsupported(fmt::format("prefill config '{}': BN must be 64 or 128, two stages or more", pc.str()));
    per_block = 128 / group;
    flash = fmt::format("lj_flash_prefill_wgmma<{}, {}, {}, {}, {}, {}>", ty, d, pc.bn, pc.stages, group, causal ? "true" : "false");
    threads = 384;
    smem = static_cast<int>(1024 + 128 * d * 2 + pc.stages * 2 * pc.bn * d * 2 + (1 + 4 * pc.stages) * 8);
    if (smem > opts.max_shared_bytes)
      throw unsupported(fmt::format("prefill config '{}' needs {} bytes of shared memory, more than the {} the target allows",
                                    pc.str(), smem, opts.max_shared_bytes));
  } else {
    if (pc.bm % (16 * pc.mt) != 0 || pc.bn % 16 != 0 || pc.stages < 2)
      throw unsupported(fmt::format("prefill config {}: BM must be whole warps of MT x 16 rows, BN a multiple of 16, two stages "
                                    "or more", pc.str()));
    if (pc.bm % group != 0)
      throw unsupported(fmt::format("{} query heads per KV head do not divide the {}-row tile", group, pc.bm));
    per_block = pc.bm / group;
    flash = fmt::format("lj_flash_prefill<{}, {}, {}, {}, {}, {}, {}, {}>", ty, d, pc.bm, pc.mt, pc.bn, pc.stages, group,
                        causal ? "true" : "false");
    threads = pc.bm / (16 * pc.mt) * 32;
    smem = static_cast<int>((pc.bm + 2 * pc.stages * pc.bn) * d * 2);
    if (smem > opts.max_shared_bytes)
      throw unsupported(fmt::format("prefill config {} needs {} bytes of shared memory, more than the {} the target allows",
                                    pc.str(), smem, opts.max_shared_bytes));
  }

  if (cache_pos >= 0) ctx.buffer_param(cache_pos, false);  // read first: the positions decide what else is read
  ctx.add_group_params();
  const int64_t part_floats = rows * (d + 2);  // a decode chunk's partial: O [rows][d], max and sum per row
  const std::string scratch = decode ? ctx.scratch_param(part_floats * 4 + 4) : "";
  std::string mq, mk, mv;  // Hopper: tensor maps of q's, k's and v's rows
  if (hopper) {
    tq->box_rows = static_cast<int>(per_block), tq->box_cols = 64;  // one head's tokens, 64 of its columns
    tk->box_rows = tv->box_rows = pc.bn, tk->box_cols = tv->box_cols = 64;
    mq = ctx.tensor_map_param(q, *tq);
    mk = ctx.tensor_map_param(k, *tk);
    mv = ctx.tensor_map_param(v, *tv);
  }

  SourceWriter w;
  ctx.header_comment(w);
  w.line("#include \"layerjit/{}\"", hopper ? "attention_wgmma.cuh" : "attention.cuh");
  w.blank();
  {
    // setmaxnreg needs a register cap at entry: __launch_bounds__(threads, 1).
    auto fn = w.scope(ctx.signature(threads, hopper ? 1 : 0));
    w.line("lj_pdl_begin();  // the previous kernel's writes visible (programmatic dependent launch)");
    w.line("extern __shared__ __align__({}) unsigned char lj_smem[];", hopper ? 1024 : 128);
    w.line("using Flash = {};", flash);
    w.line("static_assert(Flash::SMEM_BYTES <= {}, \"the launch's dynamic shared memory holds the kernel's\");", smem);
    w.line("constexpr int HKV = {};  // KV heads ({} query heads each)", hkv, group);
    w.line("const lj_i64 n_tok = {};   // query tokens per sequence", product_expr(dim_as_product(tok)));
    w.line("const lj_i64 n_keys = {};  // keys per sequence (cache capacity)", product_expr(keys));
    const std::string n_seq = batched ? product_expr(dim_as_product(qt.shape[0])) : "1";
    w.line("const lj_i64 bid = blockIdx.x;");
    if (decode) {
      w.line("const lj_i64 chunks = (n_keys + {} - 1) / {};  // CTAs per (sequence, KV head)", per_block, per_block);
      w.line("const lj_i64 chunk = bid % chunks, pair = bid / chunks;");
      w.line("const int kvh = (int)(pair % HKV);");
      w.line("const lj_i64 b = pair / HKV;");
    } else {
      w.line("const lj_i64 n_seq = {};", n_seq);
      w.line("const lj_i64 q_tiles = (n_tok + Flash::TOKENS - 1) / Flash::TOKENS;");
      w.line("const int kvh = (int)(bid % HKV);");
      w.line("const lj_i64 b = bid / HKV % n_seq;");
      w.line("const lj_i64 q_tile = q_tiles - 1 - bid / HKV / n_seq;  // the longest causal rows first");
    }
    if (cache_pos >= 0) {
      w.line("const lj_i64 first_pos = {}[{}];  // %{}: position of query token 0", ctx.buffer_param(cache_pos, false),
             ctx.address(cache_pos, g.value(cache_pos).type.shape, {batched ? "b" : "0"}), g.value(cache_pos).name);
      w.line("if (first_pos < 0 || first_pos + n_tok > n_keys) __trap();  // the new tokens must fit the cache");
      w.line("const lj_i64 n_valid = first_pos + n_tok;  // keys past the new tokens are stale");
    } else {
      w.line("const lj_i64 first_pos = n_keys - n_tok, n_valid = n_keys;  // the queries are the last n_tok keys");
    }
    // The element offset of a row start; "+ 0" of the head_dim coordinate left out.
    auto row_at = [&](ValueId x, std::vector<std::string> c) {
      if (batched) c.insert(c.begin(), "b");
      c.push_back("0");
      std::string a = ctx.address(x, g.value(x).type.shape, c);
      if (a.size() > 4 && a.compare(a.size() - 4, 4, " + 0") == 0) a.resize(a.size() - 4);
      return a;
    };
    if (hopper) {
      // q, k and v are read by TMA (the tensor maps above); only the output is addressed here.
    } else if (block_table >= 0) {
      // Key j of sequence b: row j % page of pool page block_table[b, j / page] (a page outside the
      // pool traps rather than reading another allocation).
      const Shape& bts = g.value(block_table).type.shape;
      const std::string page = product_expr(dim_as_product(kt.shape[1]));
      w.line("auto q_at = [&](lj_i64 t, int h) -> lj_i64 {{ return {}; }};  // %{}", row_at(q, {"t", "h"}),
             g.value(q).name);
      w.line("auto page_of = [&](lj_i64 j) -> lj_i64 {{");
      w.line("  const lj_i64 pg = {}[{}];  // %{}", ctx.buffer_param(block_table, false),
             ctx.address(block_table, bts, {"b", fmt::format("(j / {})", page)}), g.value(block_table).name);
      w.line("  if (pg < 0 || pg >= {}) __trap();", product_expr(dim_as_product(kt.shape[0])));
      w.line("  return pg;");
      w.line("}};");
      for (ValueId x : {k, v}) {
        std::string a = ctx.address(x, kt.shape, {"page_of(j)", fmt::format("(j % {})", page), "kvh", "0"});
        if (a.size() > 4 && a.compare(a.size() - 4, 4, " + 0") == 0) a.resize(a.size() - 4);
        w.line("auto {}_at = [&](lj_i64 j) -> lj_i64 {{ return {}; }};  // %{} (paged)", x == k ? "k" : "v", a, g.value(x).name);
      }
    } else {
      w.line("auto q_at = [&](lj_i64 t, int h) -> lj_i64 {{ return {}; }};  // %{}", row_at(q, {"t", "h"}),
             g.value(q).name);
      w.line("auto k_at = [&](lj_i64 j) -> lj_i64 {{ return {}; }};  // %{}", row_at(k, {"j", "kvh"}), g.value(k).name);
      w.line("auto v_at = [&](lj_i64 j) -> lj_i64 {{ return {}; }};  // %{}", row_at(v, {"j", "kvh"}), g.value(v).name);
    }
    w.line("auto o_at = [&](lj_i64 t, int h) -> lj_i64 {{ return {}; }};  // %{}",
           row_at(out, {"t", "h"}), g.value(out).name);
    if (lse >= 0) {
      std::vector<std::string> c = {"t", "h"};
      if (batched) c.insert(c.begin(), "b");
      w.line("auto lse = [&](lj_i64 t, int h, float x) {{ {}[{}] = x; }};  // %{}: each row's log-sum-exp", ctx.buffer_param(lse, true),
             ctx.address(lse, g.value(lse).type.shape, c), g.value(lse).name);
    } else {
      w.line("const lj_no_lse lse;");
    }
    const std::string qp = ctx.buffer_param(q, false), kp = ctx.buffer_param(k, false), vp = ctx.buffer_param(v, false);
    const std::string op = ctx.buffer_param(out, true);
    const std::string scale_log2 = fmt::format("{:.9g}f", scale * 1.4426950408889634);
    w.comment(fmt::format("{}: scale {:.9g}, in the log2 domain", print_node(g, grp.nodes[0]), scale));
    if (decode) {
      w.line("float* part = reinterpret_cast<float*>({}) + pair * chunks * Flash::PART;", scratch);
      w.line("unsigned* counter = reinterpret_cast<unsigned*>(reinterpret_cast<float*>({}) + (lj_i64)gridDim.x * Flash::PART) + pair;",
             scratch);
      w.line("Flash::run({}, {}, {}, {}, q_at, k_at, v_at, o_at, lse, first_pos, n_valid, kvh, chunk, {}, part, counter, lj_smem);", qp,
             kp, vp, op, scale_log2);
    } else if (hopper) {
      w.comment("Rows of sequence b start at row b * n_tok of q's tensor map and b * n_keys of k's and v's.");
      w.line("Flash::run(&{}, &{}, &{}, {}, o_at, lse, n_tok, q_tile * Flash::TOKENS, b * n_tok, b * n_keys, first_pos, n_valid, n_keys,",
             mq, mk, mv, op);
      w.line("           kvh, {}, lj_smem);", scale_log2);
    } else {
      w.line("Flash::run({}, {}, {}, {}, q_at, k_at, v_at, o_at, lse, n_tok, q_tile * Flash::TOKENS, first_pos, n_valid, kvh, {},", qp,
             kp, vp, op, scale_log2);
      w.line("           reinterpret_cast<{}*>(lj_smem));", ty);
    }
  }

  GeneratedKernel kern;
  kern.group = grp.id;
  kern.name = name;
  kern.source = w.str();
  kern.params = ctx.params();
  if (batched) kern.launch.outer = dim_as_product(qt.shape[0]);
  kern.launch.work = decode ? keys : dim_as_product(tok);
  kern.launch.per_block = per_block;
  kern.launch.tiles_per_unit = hkv;
  kern.launch.threads = threads;
  kern.launch.shared_bytes = smem;
  kern.config = decode ? [&] {
    AttentionConfig chosen = dc;
    chosen.chunk = static_cast<int>(per_block);  // the keys per CTA it got (an explicit config: the same)
    return chosen.str();
  }()
                       : pc.str();
  kern.arch_specific = hopper;
  return kern;
}

}  // namespace lj
