// Attention groups: one flash-attention kernel per group (templates/layerjit/attention.cuh). The
// plan (attention_plan.cpp) decides the kernel and its tiles; the emitter writes what the template
// cannot know: where each row of q, k, v and the output lives (views, strides, the batch and cache
// layout), the positions of the queries, the scale, and the grid decomposition.
#include "codegen/attention_plan.h"
#include "codegen/emit_common.h"
#include "codegen/emitters.h"
#include "layerjit/text.h"

namespace lj {

namespace {

GeneratedKernel emit_attention(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  const AttentionPlan p = plan_attention(g, grp, opts);
  if (!p.reject.empty()) throw UserError(p.reject);
  KernelContext ctx(g, grp);
  const std::string name = ctx.kernel_name();
  const ValueId q = p.q, k = p.k, v = p.v, out = p.out, lse = p.lse, cache_pos = p.cache_pos, block_table = p.block_table;
  const TensorType& qt = g.value(q).type;
  const TensorType& kt = g.value(k).type;
  const bool batched = p.batched, decode = p.decode, hopper = p.hopper;
  const Dim& tok = p.tokens;
  const DimProduct& keys = p.keys;
  const int64_t hkv = p.hkv, group = p.group, rows = p.rows, per_block = p.per_block;
  const double scale = p.scale;
  const char* ty = c_type(qt.dtype);
  const int threads = p.threads, smem = p.smem;
  const std::string& flash = p.flash;
  std::optional<TensorMapSpec> tq = p.tq, tk = p.tk, tv = p.tv;
  const AttentionConfig& pc = p.config;
  // The cache's rows before the new tokens, and the positions, are read before the wait on the kernel
  // before (FusionGroup::cache_before_wait): the planner found no kernel of the graph writes them.
  const bool prefetch = decode && grp.cache_before_wait && block_table < 0;

  if (cache_pos >= 0) ctx.buffer_param(cache_pos, false);  // read first: the positions decide what else is read
  ctx.add_group_params();
  const int64_t part_floats = rows * (p.dp + 2);  // a decode chunk's partial (lj_flash_decode::PART)
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
    if (prefetch)
      w.comment("The cache's rows before the new tokens and the positions (no kernel of the graph writes them) are read before "
                "Flash::run's lj_pdl_begin.");
    else
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
      w.line("Flash::{}({}, {}, {}, {}, q_at, k_at, v_at, o_at, lse, first_pos, n_valid, kvh, chunk, {}, part, counter, lj_smem);",
             prefetch ? "template run<true>" : "run", qp, kp, vp, op, scale_log2);
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

  GeneratedKernel kern = ctx.kernel(w);
  if (batched) kern.launch.outer = dim_as_product(qt.shape[0]);
  kern.launch.work = decode ? keys : dim_as_product(tok);
  kern.launch.per_block = per_block;
  kern.launch.tiles_per_unit = hkv;
  kern.launch.threads = threads;
  kern.launch.shared_bytes = smem;
  kern.config = p.config.str();
  kern.arch_specific = hopper;
  kern.launch.early = prefetch;  // launched as the kernel before lets it, to stream the cache meanwhile
  return kern;
}

// Prefill (mma.sync or wgmma) or split-KV decode, as the plan decides (attention_plan.cpp: the
// tiles, their rules and the candidate lists).
class AttentionFamily final : public KernelFamily {
 public:
  GroupKind kind() const override { return GroupKind::Attention; }
  bool tunable() const override { return true; }
  std::optional<KernelConfig> parse_config(std::string_view text, std::string* error) const override {
    std::optional<AttentionConfig> c = parse_attention_config(text, error);
    if (!c) return std::nullopt;
    return KernelConfig(*c);
  }
  std::string reject_reason(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const override {
    return plan_attention(g, grp, opts).reject;
  }
  std::vector<KernelConfig> candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& opts,
                                       std::vector<std::string>* pruned) const override {
    std::vector<KernelConfig> out;
    for (const AttentionConfig& c : attention_candidates(g, grp, opts, pruned)) out.emplace_back(c);
    return out;
  }
  GeneratedKernel emit(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const override {
    return emit_attention(g, grp, opts);
  }
};

}  // namespace

const KernelFamily& attention_family() {
  static const AttentionFamily family;
  return family;
}

}  // namespace lj
