// The imported model against independent formulations: each family's layer graphs (fused weights)
// against the same layer written here the way Hugging Face's modeling files compute it (separate
// q/k/v and gate/up projections on the checkpoint's own tensors), and incremental decoding against
// a prefill of the whole sequence.
#include <catch2/catch.hpp>

#include "layerjit/builder.h"
#include "layerjit/reference.h"
#include "models/generate.h"
#include "models/model.h"
#include "tests/models/hf_model_writer.h"
#include "tests/models/model_test_util.h"

using namespace lj;
using namespace lj::models;

namespace {

// One decoder layer as transformers' Llama/Mistral/Qwen2/Qwen3 modeling code writes it, over
// params named after the checkpoint's tensors (without the "model.layers.N." prefix, dots as '_').
// decode: one token per sequence over a cache, as the imported decode graph takes it.
Graph hf_layer(const ModelConfig& mc, bool decode) {
  const LlamaConfig& c = mc.layer;
  GraphBuilder b("hf_layer");
  const Dim n = decode ? Dim::sym("B") : Dim::sym("T");
  const DType dt = c.dtype;
  const int64_t q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  Value x = b.input("x", dt, {n, c.hidden});
  Value pos = b.input("pos", DType::I32, {n});
  std::optional<Value> kc, vc;
  if (decode) {
    kc = b.input("k_cache", dt, {n, Dim::sym("C"), c.n_kv_heads, c.head_dim});
    vc = b.input("v_cache", dt, {n, Dim::sym("C"), c.n_kv_heads, c.head_dim});
  }
  auto w = [&](const std::string& name, Shape s) { return b.param(name, dt, std::move(s)); };
  Value in_norm = w("input_layernorm_weight", {c.hidden});
  Value wq = w("self_attn_q_proj_weight", {q, c.hidden});
  Value wk = w("self_attn_k_proj_weight", {kv, c.hidden});
  Value wv = w("self_attn_v_proj_weight", {kv, c.hidden});
  Value wo = w("self_attn_o_proj_weight", {c.hidden, q});
  Value post_norm = w("post_attention_layernorm_weight", {c.hidden});
  Value wg = w("mlp_gate_proj_weight", {c.ffn, c.hidden});
  Value wu = w("mlp_up_proj_weight", {c.ffn, c.hidden});
  Value wd = w("mlp_down_proj_weight", {c.hidden, c.ffn});

  Value h = b.rms_norm(x, in_norm, c.eps);
  Value qs = b.matmul(h, wq), ks = b.matmul(h, wk), vs = b.matmul(h, wv);
  if (c.qkv_bias) {
    qs = b.add(qs, w("self_attn_q_proj_bias", {q}));
    ks = b.add(ks, w("self_attn_k_proj_bias", {kv}));
    vs = b.add(vs, w("self_attn_v_proj_bias", {kv}));
  }
  Value qh = b.reshape(qs, {n, c.n_heads, c.head_dim});
  Value kh = b.reshape(ks, {n, c.n_kv_heads, c.head_dim});
  Value vh = b.reshape(vs, {n, c.n_kv_heads, c.head_dim});
  if (c.qk_norm) {
    qh = b.rms_norm(qh, w("self_attn_q_norm_weight", {c.head_dim}), c.eps);
    kh = b.rms_norm(kh, w("self_attn_k_norm_weight", {c.head_dim}), c.eps);
  }
  auto [cos, sin] = b.rope_table(pos, c.head_dim, c.rope_theta, c.rope_scaling);
  qh = b.rope(qh, cos, sin, "half");
  kh = b.rope(kh, cos, sin, "half");
  Value attn;
  std::vector<Value> extra;
  if (decode) {
    Value k_all = b.kv_cache_write(*kc, kh, pos), v_all = b.kv_cache_write(*vc, vh, pos);
    attn = b.attention(b.reshape(qh, {n, 1, c.n_heads, c.head_dim}), k_all, v_all, true, std::nullopt, pos, std::nullopt, c.sliding_window);
    extra = {k_all, v_all};
  } else {
    attn = b.attention(qh, kh, vh, true, std::nullopt, std::nullopt, std::nullopt, c.sliding_window);
    extra = {kh, vh};
  }
  Value h1 = b.add(x, b.matmul(b.reshape(attn, {n, q}), wo));
  Value hn = b.rms_norm(h1, post_norm, c.eps);
  Value mlp = b.matmul(b.mul(b.silu(b.matmul(hn, wg)), b.matmul(hn, wu)), wd);
  return b.finish({b.add(h1, mlp), extra[0], extra[1]});
}

// The checkpoint's tensors of layer `l` under hf_layer's param names.
std::map<std::string, HostTensor> hf_params(const Model& m, const Graph& g, int64_t l) {
  std::map<std::string, HostTensor> in;
  const std::string prefix = fmt::format("model.layers.{}.", l);
  for (ValueId v : g.inputs()) {
    if (!g.value(v).is_param) continue;
    std::string name = g.value(v).name;
    // input_layernorm_weight -> input_layernorm.weight, self_attn_q_proj_weight -> self_attn.q_proj.weight
    std::string hf = name;
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"self_attn_", "self_attn."}, {"mlp_", "mlp."}, {"_weight", ".weight"}, {"_bias", ".bias"}}) {
      const size_t at = hf.find(from);
      if (at != std::string::npos) hf.replace(at, from.size(), to);
    }
    const CheckpointTensor t = m.checkpoint().find(prefix + hf);
    REQUIRE(t.tensor != nullptr);
    in[name] = t.file->read(*t.tensor);
  }
  return in;
}

std::map<std::string, HostTensor> imported_params(const Model& m, int64_t l) {
  std::map<std::string, HostTensor> in;
  for (const ParamBytes& p : m.layer_params(l)) in[p.name] = to_host(p);
  return in;
}

void check_family(Architecture a) {
  testing::TempModelDir dir(std::string(architecture_name(a)));
  testing::write_hf_model(dir.str(), testing::tiny_spec(a));
  const Model m = Model::open(dir.str());
  const ModelConfig& c = m.config();
  const int64_t t_len = 9, cap = 13;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    INFO("layer " << l);
    // Prefill of 9 tokens (past Mistral's window of 5).
    HostTensor x(c.layer.dtype, {t_len, c.layer.hidden});
    fill_uniform(x, 100 + static_cast<uint64_t>(l));
    HostTensor pos(DType::I32, {t_len});
    for (int64_t t = 0; t < t_len; ++t) pos.data[static_cast<size_t>(t)] = static_cast<double>(t);
    Bindings pb;
    pb.set("T", t_len);
    const Graph hf = hf_layer(c, false);
    auto in_hf = hf_params(m, hf, l);
    auto in_lj = imported_params(m, l);
    in_hf["x"] = in_lj["x"] = x;
    in_hf["pos"] = in_lj["pos"] = pos;
    const std::vector<HostTensor> want = run_reference(hf, in_hf, pb);
    const std::vector<HostTensor> got = run_reference(m.graphs().prefill, in_lj, pb);
    for (size_t i = 0; i < 3; ++i) CHECK(got[i].data == want[i].data);

    // Decode: two sequences over a cache of 13 at positions 11 and 6.
    const Graph hfd = hf_layer(c, true);
    auto d_hf = hf_params(m, hfd, l);
    auto d_lj = imported_params(m, l);
    HostTensor xd(c.layer.dtype, {2, c.layer.hidden}), kc(c.layer.dtype, {2, cap, c.layer.n_kv_heads, c.layer.head_dim});
    fill_uniform(xd, 7);
    fill_uniform(kc, 8);
    HostTensor vc = kc;
    fill_uniform(vc, 9);
    HostTensor dpos(DType::I32, {2});
    dpos.data = {11, 6};
    for (auto* in : {&d_hf, &d_lj}) {
      (*in)["x"] = xd;
      (*in)["pos"] = dpos;
      (*in)["k_cache"] = kc;
      (*in)["v_cache"] = vc;
    }
    Bindings db;
    db.set("B", 2);
    db.set("C", cap);
    const std::vector<HostTensor> dwant = run_reference(hfd, d_hf, db);
    const std::vector<HostTensor> dgot = run_reference(m.graphs().decode, d_lj, db);
    for (size_t i = 0; i < 3; ++i) CHECK(dgot[i].data == dwant[i].data);
  }
}

}  // namespace

/// Each family: the imported layer graphs, on weights fused at bind time, equal the unfused
/// Hugging Face formulation exactly (every output element is the same sum rounded once).
TEST_CASE("imported Llama layers equal the Hugging Face formulation", "[models]") { check_family(Architecture::Llama); }
TEST_CASE("imported Mistral layers equal the Hugging Face formulation", "[models]") { check_family(Architecture::Mistral); }
TEST_CASE("imported Qwen2 layers equal the Hugging Face formulation", "[models]") { check_family(Architecture::Qwen2); }
TEST_CASE("imported Qwen3 layers equal the Hugging Face formulation", "[models]") { check_family(Architecture::Qwen3); }

/// Generation: the logits of decode step s equal those of a prefill over the prompt and the s
/// tokens generated before it, so the KV caches hold what a full recomputation would.
TEST_CASE("decode steps over the KV caches equal a prefill of the whole sequence", "[models]") {
  for (Architecture a : {Architecture::Llama, Architecture::Mistral, Architecture::Qwen2, Architecture::Qwen3}) {
    INFO(architecture_name(a));
    testing::TempModelDir dir(std::string(architecture_name(a)));
    testing::write_hf_model(dir.str(), testing::tiny_spec(a));
    const Model m = Model::open(dir.str());
    const std::vector<int32_t> prompt = {5, 17, 250, 3, 99, 42, 7};
    GenerateOptions o;
    o.new_tokens = 4;
    o.keep_logits = true;
    const GenerateResult r = generate_reference(m, prompt, o);
    REQUIRE(r.tokens.size() == 4);
    REQUIRE(r.logits.shape == std::vector<int64_t>{4, 301});
    REQUIRE(r.step_ms.size() == 4);
    for (int32_t t : r.tokens) CHECK((t >= 0 && t < 301));
    // The token chosen is the argmax of its logits row.
    for (size_t s = 0; s < 4; ++s) {
      const double* row = r.logits.data.data() + s * 301;
      CHECK(std::max_element(row, row + 301) - row == r.tokens[s]);
    }
    std::vector<int32_t> longer = prompt;
    longer.insert(longer.end(), r.tokens.begin(), r.tokens.begin() + 3);
    GenerateOptions one;
    one.keep_logits = true;
    const GenerateResult full = generate_reference(m, longer, one);
    CHECK(full.tokens[0] == r.tokens[3]);
    CHECK(std::equal(full.logits.data.begin(), full.logits.data.end(), r.logits.data.begin() + 3 * 301));
  }
}

/// Tensor parallelism over a whole model: every layer sharded over 2 ranks (the all-reduces on the
/// host), fed the tokens the unsharded run chose, gives each step's logits within bf16 rounding of
/// the unsharded ones, for every family (Qwen2's q/k/v biases and Qwen3's q/k norms are cut with
/// their heads).
TEST_CASE("a model sharded over 2 ranks computes the logits of the unsharded model", "[models][shard]") {
  for (Architecture a : {Architecture::Llama, Architecture::Mistral, Architecture::Qwen2, Architecture::Qwen3}) {
    INFO(architecture_name(a));
    testing::TempModelDir dir(std::string(architecture_name(a)) + "-tp");
    testing::write_hf_model(dir.str(), testing::tiny_spec(a));
    const Model m = Model::open(dir.str());
    const std::vector<int32_t> prompt = {5, 17, 250, 3, 99, 42, 7};
    GenerateOptions o;
    o.new_tokens = 3;
    o.keep_logits = true;
    const GenerateResult one = generate_reference(m, prompt, o);
    o.forced = {one.tokens[0], one.tokens[1]};
    const GenerateResult two = generate_reference(m, prompt, o, 2);
    REQUIRE(two.logits.shape == one.logits.shape);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < one.logits.data.size(); ++i) {
      worst = std::max(worst, std::fabs(two.logits.data[i] - one.logits.data[i]));
      scale = std::max(scale, std::fabs(one.logits.data[i]));
    }
    INFO("logits: max |difference| " << worst << " of max |logit| " << scale);
    CHECK(scale > 0);
    CHECK(worst <= scale / 32);
  }
  testing::TempModelDir dir("llama-tp3");
  testing::write_hf_model(dir.str(), testing::tiny_spec(Architecture::Llama));
  const Model m = Model::open(dir.str());
  CHECK_THROWS_WITH(generate_reference(m, {1, 2}, GenerateOptions{}, 4), Catch::Contains("not divisible by 4 ranks"));
}
