// The attention family's plan: which kernel, which tiles, and why not (see attention_plan.h). The
// emitter (emit_attention.cpp) writes the source of the plan it is given.
//
// Family: when the query rows of one KV head (tokens x G query heads per KV head) fit one 16-row tile
// — decode, one token per sequence — the split-KV kernel: the keys are split across CTAs (enough CTAs
// to fill the GPU even for one sequence) and merged by the last CTA of each (sequence, KV head)
// through a scratch buffer. Otherwise the prefill kernel: BM-row query tiles, heaviest (causal) tiles
// first; on sm_90a, where q, k and v can be read by TMA, the warp-specialised wgmma kernel
// (attention_wgmma.cuh) by default, else the mma.sync one.
#include "codegen/attention_plan.h"

#include <algorithm>
#include <cmath>

#include "codegen/emit_common.h"
#include "compiler/fusion/legality.h"
#include "layerjit/text.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"

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

AttentionPlan plan_attention(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  KernelContext ctx(g, grp);
  const std::string name = ctx.kernel_name();
  LJ_CHECK(grp.nodes.size() == 1 && g.node(grp.nodes[0]).kind == OpKind::Attention, SourceLoc{},
           "{}: an attention kernel implements exactly one attention node", name);
  AttentionPlan p;
  const Node& n = g.node(grp.nodes[0]);
  p.q = n.operands[0], p.k = n.operands[1], p.v = n.operands[2], p.out = n.results[0];
  p.lse = n.results.size() > 1 && std::find(grp.outputs.begin(), grp.outputs.end(), n.results[1]) != grp.outputs.end() ? n.results[1] : -1;
  p.cache_pos = n.operands.size() > 3 ? n.operands[3] : -1;
  p.block_table = n.operands.size() > 4 ? n.operands[4] : -1;
  const TensorType& qt = g.value(p.q).type;
  const TensorType& kt = g.value(p.k).type;
  p.batched = qt.rank() == 4;
  p.tokens = qt.shape[static_cast<size_t>(qt.rank() - 3)];
  p.keys = p.block_table >= 0 ? multiply(dim_as_product(g.value(p.block_table).type.shape[1]), dim_as_product(kt.shape[1]))
                              : dim_as_product(kt.shape[static_cast<size_t>(kt.rank() - 3)]);
  const Dim& tok = p.tokens;
  const DimProduct& keys = p.keys;
  p.hq = qt.shape[static_cast<size_t>(qt.rank() - 2)].value();
  p.hkv = kt.shape[static_cast<size_t>(kt.rank() - 2)].value();
  p.d = qt.shape.back().value();
  p.group = p.hq / p.hkv;
  p.causal = attr::causal(n.attrs);
  p.scale = attr::scale(n.attrs).value_or(1.0 / std::sqrt(static_cast<double>(p.d)));
  const int64_t d = p.d, group = p.group;

  auto reject = [&](const std::string& why) {
    p.reject = fmt::format("{}: the attention kernels cannot implement {}: {}", name, print_node(g, grp.nodes[0]), why);
    return p;
  };
  if (qt.dtype != DType::BF16 && qt.dtype != DType::F16)
    return reject(fmt::format("they run on tensor cores with bf16 or f16 operands; q is {}", dtype_name(qt.dtype)));
  if (g.value(p.out).type.dtype != qt.dtype) return reject("the output dtype must be q's");
  p.window = attr::window(n.attrs).value_or(0);
  // The tile's head_dim: the operands' rounded up to 16, 32, 64 or 128 (the padding is zeros in shared
  // memory, never read or written in global memory).
  if (d > 128 || d % 2 != 0) return reject(fmt::format("head_dim must be even and at most 128, got {}", d));
  p.dp = d <= 16 ? 16 : d <= 32 ? 32 : d <= 64 ? 64 : 128;
  const int64_t dp = p.dp;
  // Rows are copied in granules of 8, 4 or 2 elements (lj_attn_warp::LG), which must be aligned.
  const int granule = d % 8 == 0 ? 8 : d % 4 == 0 ? 4 : 2;
  for (ValueId x : {p.q, p.k, p.v, p.out}) {
    if (ctx.vector_width({x}, g.value(x).type.shape, granule) == granule) continue;
    const TensorLayout& l = ctx.layout(x);
    std::string strides;
    for (const DimProduct& st : l.strides) strides += (strides.empty() ? "" : ", ") + st.str();
    return reject(fmt::format("%{} must have contiguous head_dim rows aligned to {} bytes (it is a view at offset {} with strides [{}])",
                              g.value(x).name, granule * 2, l.offset.str(), strides));
  }
  // The template arguments that name the operands' head_dim where it is not the tile's.
  const std::string dv_arg = d == dp ? "" : fmt::format(", {}", d);

  // Decode when one 16-row tile holds every query row of a KV head.
  p.decode = is_decode_attention(g, n);
  const bool decode = p.decode;
  p.rows = decode ? tok.value() * group : 0;
  const char* ty = c_type(qt.dtype);
  // Decode (by default): three stages, so a CTA of a long-context, small-batch launch (two stages per
  // chunk) has its whole chunk in flight at once. Prefill: two m-tiles per warp (each K/V fragment
  // read from shared memory feeds two products), a double buffer.
  if (opts.attention && opts.attention->decode != decode)
    return reject(fmt::format("attention config '{}' is for {} kernels, this group is {}", opts.attention->str(),
                              opts.attention->decode ? "decode" : "prefill", decode ? "decode (one query token per sequence)" : "prefill"));
  // The hinted batch and cache length size the decode kernel's key split (4096 keys when unknown).
  const int64_t b_hint = p.batched ? hinted(qt.shape[0], opts.hint, 1) : 1;
  int64_t c_hint = keys.constant;
  for (const std::string& sym : keys.symbols) c_hint = opts.hint.get(sym) ? c_hint * *opts.hint.get(sym) : 0;
  if (c_hint <= 0) c_hint = 4096;
  const int64_t pairs = b_hint * p.hkv;  // (sequence, KV head) pairs
  // Few pairs (B <= 2 at 8 KV heads): 8 warps per CTA and about 128 CTAs, else 4 warps and one wave of
  // two CTAs per SM (measured on the H200 at C = 4096: B = 1 1101 GB/s with 8 warps x 16 chunks of 256
  // keys against 925 with 8 chunks of 512 and 773 with 32 of 128: fewer CTAs leave SMs idle, more
  // make the merge longer; B = 32 3633 GB/s unsplit against 3467 with 2 chunks).
  AttentionConfig dc = AttentionConfig::decode_default();
  if (pairs <= 16) dc.warps = 8;
  // (Where three stages of 8 warps' keys do not fit, e.g. sm_80's 163 KiB, two: 893 GB/s at B = 1.)
  if (pairs <= 16 && (16 + 2 * dc.stages * dc.warps * dc.bn) * dp * 2 > opts.max_shared_bytes) dc.stages = 2;
  if (decode && opts.attention) dc = *opts.attention;
  const int kDecodeWarps = dc.warps, kDecodeBn = dc.bn, kDecodeStages = dc.stages;
  if (decode && (kDecodeBn % 16 != 0 || kDecodeWarps < 1 || kDecodeWarps > 16 || kDecodeStages < 2 ||
                 (dc.chunk > 0 && dc.chunk % (kDecodeWarps * kDecodeBn) != 0)))
    return reject(fmt::format("decode config '{}': bn a multiple of 16, 1-16 warps, two stages or more, a chunk of whole stages "
                              "(warps x bn keys)", dc.str()));
  // The Hopper kernel: sm_90a, head_dim 64 or 128, G dividing 128 rows into whole 8-row groups of
  // tokens, a contiguous cache (no pages), and q, k, v, each readable by TMA.
  std::string& no_wgmma = p.no_wgmma;
  if (decode) {
    no_wgmma = "one query token per sequence takes the split-KV decode kernel";
  } else if (!(opts.arch_specific && opts.sm == 90)) {
    no_wgmma = fmt::format("the target is sm_{}{}, the kernel needs sm_90a", opts.sm, opts.arch_specific ? "a" : "");
  } else if (d != 64 && d != 128) {
    no_wgmma = fmt::format("head_dim is {}, the kernel takes 64 or 128", d);
  } else if (128 % group != 0 || 128 / group % 8 != 0) {
    no_wgmma = fmt::format("{} query heads per KV head do not split 128 rows into whole 8-token groups", group);
  } else if (p.block_table >= 0) {
    no_wgmma = "the cache is paged";
  } else if (p.window > 0) {
    no_wgmma = fmt::format("the attention has a sliding window ({} keys); the mma.sync kernel masks it", p.window);
  } else if (!(p.scale > 0)) {
    no_wgmma = fmt::format("the scale is {}; the kernel folds a positive scale into its exponent", p.scale);
  } else {
    p.tq = tma_token_rows(ctx, p.q, no_wgmma);
    if (p.tq) p.tk = tma_token_rows(ctx, p.k, no_wgmma);
    if (p.tk) p.tv = tma_token_rows(ctx, p.v, no_wgmma);
  }
  const bool wgmma_ok = p.tq && p.tk && p.tv;
  AttentionConfig pc = !decode && opts.attention ? *opts.attention : wgmma_ok ? AttentionConfig::hopper() : AttentionConfig{};
  if (!decode && !opts.attention && !pc.wgmma && pc.bm % group != 0) {
    // The default tile holds whole tokens: the largest BM <= 128 of whole warps that G divides
    // (G = 3, as 6 query heads over 2 KV heads: 96 rows).
    for (int bm = pc.bm; bm >= 16 * pc.mt; bm -= 16 * pc.mt)
      if (bm % group == 0) {
        pc.bm = bm;
        break;
      }
  }
  if (!decode && pc.wgmma && !wgmma_ok) return reject(fmt::format("prefill config '{}' cannot run here: {}", pc.str(), no_wgmma));
  p.hopper = !decode && pc.wgmma;
  if (decode) {
    // Chunks per pair: about 128 CTAs of 8 warps for few pairs, else at most one wave of two CTAs per
    // SM of a 132-SM GPU; at least one stage (WARPS x BN keys) per CTA.
    const int64_t want = pairs <= 16 ? std::max<int64_t>(1, 128 / pairs) : std::max<int64_t>(1, 264 / pairs);
    const int64_t stage_keys = kDecodeWarps * kDecodeBn;
    p.per_block = dc.chunk;
    if (p.per_block <= 0) {  // whole stages
      p.per_block = std::clamp<int64_t>(next_pow2((c_hint + want - 1) / want), stage_keys, 4096);
      p.per_block = (p.per_block + stage_keys - 1) / stage_keys * stage_keys;
    }
    const std::string paged = p.block_table >= 0 ? "true" : "false";
    p.flash = fmt::format("lj_flash_decode<{}, {}, {}, {}, {}, {}, {}, {}, {}{}>", ty, dp, p.rows, group, kDecodeBn, kDecodeWarps, kDecodeStages,
                          p.per_block, p.causal ? "true" : "false",
                          !dv_arg.empty()  ? fmt::format(", {}, {}{}", paged, p.window, dv_arg)
                          : p.window > 0   ? fmt::format(", {}, {}", paged, p.window)
                          : p.block_table >= 0 ? ", true" : "");
    p.threads = kDecodeWarps * 32;
    if (p.threads % (dp / granule) != 0)
      return reject(fmt::format("decode config '{}': {} threads do not copy whole rows of {} granules", dc.str(), p.threads, dp / granule));
    const int pipe = static_cast<int>((16 + 2 * kDecodeStages * stage_keys) * dp * 2);
    const int merge = static_cast<int>(kDecodeWarps * (p.rows * (dp + 8) + 32) * 4);  // lj_flash_decode::MERGE_BYTES
    p.smem = std::max(pipe, merge);
    if (p.smem > opts.max_shared_bytes)
      return reject(fmt::format("decode config '{}' needs {} bytes of shared memory, more than the {} the target allows", dc.str(), p.smem,
                                opts.max_shared_bytes));
    p.config = dc;
    p.config.chunk = static_cast<int>(p.per_block);  // the keys per CTA it got (an explicit config: the same)
  } else if (p.hopper) {
    if ((pc.bn != 64 && pc.bn != 128) || pc.stages < 2)
      return reject(fmt::format("prefill config '{}': BN must be 64 or 128, two stages or more", pc.str()));
    p.per_block = 128 / group;
    p.flash = fmt::format("lj_flash_prefill_wgmma<{}, {}, {}, {}, {}, {}>", ty, d, pc.bn, pc.stages, group, p.causal ? "true" : "false");
    p.threads = 384;
    p.smem = static_cast<int>(1024 + 128 * d * 2 + pc.stages * 2 * pc.bn * d * 2 + (1 + 4 * pc.stages) * 8);
    if (p.smem > opts.max_shared_bytes)
      return reject(fmt::format("prefill config '{}' needs {} bytes of shared memory, more than the {} the target allows", pc.str(), p.smem,
                                opts.max_shared_bytes));
    p.config = pc;
  } else {
    if (pc.bm % (16 * pc.mt) != 0 || pc.bn % 16 != 0 || pc.stages < 2)
      return reject(fmt::format("prefill config {}: BM must be whole warps of MT x 16 rows, BN a multiple of 16, two stages "
                                "or more", pc.str()));
    if (pc.bm % group != 0) return reject(fmt::format("{} query heads per KV head do not divide the {}-row tile", group, pc.bm));
    p.per_block = pc.bm / group;
    p.flash = fmt::format("lj_flash_prefill<{}, {}, {}, {}, {}, {}, {}, {}{}>", ty, dp, pc.bm, pc.mt, pc.bn, pc.stages, group,
                          p.causal ? "true" : "false",
                          !dv_arg.empty() ? fmt::format(", {}{}", p.window, dv_arg) : p.window > 0 ? fmt::format(", {}", p.window) : "");
    p.threads = pc.bm / (16 * pc.mt) * 32;
    p.smem = static_cast<int>((pc.bm + 2 * pc.stages * pc.bn) * dp * 2);
    if (p.smem > opts.max_shared_bytes)
      return reject(fmt::format("prefill config {} needs {} bytes of shared memory, more than the {} the target allows", pc.str(), p.smem,
                                opts.max_shared_bytes));
    p.config = pc;
  }
  return p;
}

std::vector<AttentionConfig> decode_attention_candidates() {
  std::vector<AttentionConfig> out{AttentionConfig::decode_default()};
  for (int bn : {16, 32})
    for (int warps : {4, 8})
      for (int stages : {2, 3, 4})
        for (int chunk : {0, 128, 256, 512, 1024, 4096}) {
          AttentionConfig c = AttentionConfig::decode_default();
          c.bn = bn, c.warps = warps, c.stages = stages, c.chunk = chunk;
          if (chunk > 0 && chunk % (bn * warps) != 0) continue;
          if (c.str() != out[0].str()) out.push_back(c);
        }
  return out;
}

std::vector<AttentionConfig> attention_candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& opts,
                                                  std::vector<std::string>* pruned) {
  EmitOptions eo = opts;
  eo.attention.reset();
  const AttentionPlan def = plan_attention(g, grp, eo);
  LJ_CHECK(def.reject.empty(), SourceLoc{}, "{}", def.reject);
  std::vector<AttentionConfig> out{def.config};
  std::vector<AttentionConfig> others = {AttentionConfig{}, AttentionConfig{128, 2, 32, 2}, AttentionConfig{128, 1, 64, 2},
                                         AttentionConfig{64, 1, 64, 2}, AttentionConfig{128, 2, 32, 3}};
  if (def.decode) others = decode_attention_candidates();
  if (!def.decode && opts.arch_specific && opts.sm == 90)
    for (AttentionConfig c : {AttentionConfig::hopper(), AttentionConfig{128, 1, 128, 3, true}, AttentionConfig{128, 1, 64, 2, true},
                              AttentionConfig{128, 1, 64, 4, true}})
      others.push_back(c);
  for (const AttentionConfig& c : others) {
    if (c.str() == def.config.str()) continue;
    eo.attention = c;
    const AttentionPlan p = plan_attention(g, grp, eo);
    if (!p.reject.empty()) {
      if (pruned) pruned->push_back(fmt::format("{}: {}", c.str(), p.reject));
      continue;
    }
    // Decode candidates are named by the chunk each resolves to (what the DB stores), each once.
    if (std::none_of(out.begin(), out.end(), [&](const AttentionConfig& k) { return k.str() == p.config.str(); })) out.push_back(p.config);
  }
  return out;
}

}  // namespace lj
