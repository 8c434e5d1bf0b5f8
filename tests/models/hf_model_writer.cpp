#include "tests/models/hf_model_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "exec/safetensors.h"
#include "layerjit/check.h"
#include "layerjit/host_tensor.h"
#include "runtime/host_values.h"

namespace lj::testing {

namespace {

using models::Architecture;

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  double lo, hi;
};

std::vector<Tensor> model_tensors(const HfModelSpec& s) {
  const int64_t d = s.head_dim.value_or(s.hidden / s.heads);
  const int64_t q = s.heads * d, kv = s.kv_heads * d;
  auto proj = [](int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); };
  std::vector<Tensor> t = {{"model.embed_tokens.weight", {s.vocab, s.hidden}, -1.0, 1.0}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back({p + "input_layernorm.weight", {s.hidden}, 0.8, 1.2});
    t.push_back({p + "self_attn.q_proj.weight", {q, s.hidden}, -proj(s.hidden), proj(s.hidden)});
    t.push_back({p + "self_attn.k_proj.weight", {kv, s.hidden}, -proj(s.hidden), proj(s.hidden)});
    t.push_back({p + "self_attn.v_proj.weight", {kv, s.hidden}, -proj(s.hidden), proj(s.hidden)});
    if (s.arch == Architecture::Qwen2) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, -0.5, 0.5});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, -0.5, 0.5});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, -0.5, 0.5});
    }
    if (s.arch == Architecture::Qwen3) {
      t.push_back({p + "self_attn.q_norm.weight", {d}, 0.8, 1.2});
      t.push_back({p + "self_attn.k_norm.weight", {d}, 0.8, 1.2});
    }
    t.push_back({p + "self_attn.o_proj.weight", {s.hidden, q}, -proj(q), proj(q)});
    t.push_back({p + "post_attention_layernorm.weight", {s.hidden}, 0.8, 1.2});
    t.push_back({p + "mlp.gate_proj.weight", {s.ffn, s.hidden}, -proj(s.hidden), proj(s.hidden)});
    t.push_back({p + "mlp.up_proj.weight", {s.ffn, s.hidden}, -proj(s.hidden), proj(s.hidden)});
    t.push_back({p + "mlp.down_proj.weight", {s.hidden, s.ffn}, -proj(s.ffn), proj(s.ffn)});
  }
  t.push_back({"model.norm.weight", {s.hidden}, 0.8, 1.2});
  if (!s.tied) t.push_back({"lm_head.weight", {s.vocab, s.hidden}, -proj(s.hidden), proj(s.hidden)});
  return t;
}

DType dtype_of(const std::string& name) {
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  return DType::F32;
}

// Uniform values in [lo, hi) rounded to the dtype, encoded as the file holds them (no array of
// doubles: the 8B-shaped embedding table alone has 525M elements). 64 pieces, each from its own
// seed, filled on as many threads as the machine has: the same bytes whatever the thread count.
void fill_piece(DType dt, unsigned char* out, int64_t n, uint64_t seed, double lo, double hi) {
  const auto eb = static_cast<size_t>(dtype_bytes(dt));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
    const double v = lo + (hi - lo) * u;
    unsigned char* p = out + static_cast<size_t>(i) * eb;
    if (dt == DType::BF16) {
      // Round to nearest even on the float's upper half (finite values), as round_to(BF16) does.
      const auto f = static_cast<float>(v);
      uint32_t b = 0;
      std::memcpy(&b, &f, 4);
      b += 0x7fffu + ((b >> 16) & 1u);
      const auto h = static_cast<uint16_t>(b >> 16);
      std::memcpy(p, &h, 2);
      continue;
    }
    const bool ok = rt::encode_element(dt, round_to(dt, v), p);
    LJ_ASSERT(ok, "a rounded value does not encode");
  }
}

std::vector<unsigned char> random_bytes(DType dt, int64_t n, uint64_t seed, double lo, double hi) {
  const auto eb = static_cast<size_t>(dtype_bytes(dt));
  std::vector<unsigned char> out(static_cast<size_t>(n) * eb);
  constexpr int64_t kPieces = 64;
  const int64_t per = (n + kPieces - 1) / kPieces;
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (int64_t piece = w; piece < kPieces; piece += workers) {
        const int64_t first = piece * per, count = std::min(per, n - first);
        if (count > 0) fill_piece(dt, out.data() + static_cast<size_t>(first) * eb, count, seed * kPieces + static_cast<uint64_t>(piece), lo, hi);
      }
    });
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace

HfModelSpec tiny_spec(Architecture a) {
  HfModelSpec s;
  s.arch = a;
  switch (a) {
    case Architecture::Llama: s.llama3_rope = true; break;
    case Architecture::Mistral: s.sliding_window = 5; break;
    case Architecture::Qwen2: break;
    case Architecture::Qwen3:
      s.head_dim = 16;
      s.tied = true;
      break;
  }
  return s;
}

HfModelSpec llama3_8b_spec(int64_t layers) {
  HfModelSpec s;
  s.hidden = 4096;
  s.layers = layers;
  s.heads = 32;
  s.kv_heads = 8;
  s.ffn = 14336;
  s.vocab = 128256;
  s.max_positions = 8192;
  s.rope_theta = 500000.0;
  return s;
}

// transformers' AutoConfig picks the config class by model_type (layerjit reads architectures).
static const char* model_type(Architecture a) {
  switch (a) {
    case Architecture::Llama: return "llama";
    case Architecture::Mistral: return "mistral";
    case Architecture::Qwen2: return "qwen2";
    case Architecture::Qwen3: return "qwen3";
  }
  return "";
}

nlohmann::json hf_config_json(const HfModelSpec& s) {
  nlohmann::json j = {
      {"architectures", {std::string(models::architecture_name(s.arch))}},
      {"model_type", model_type(s.arch)},
      {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"intermediate_size", s.ffn},
      {"vocab_size", s.vocab},
      {"max_position_embeddings", s.max_positions},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", s.rope_theta},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", s.tied},
      {"torch_dtype", s.dtype},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
  if (s.head_dim) j["head_dim"] = *s.head_dim;
  if (s.llama3_rope)
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 32}};
  if (s.arch == Architecture::Mistral) j["sliding_window"] = s.sliding_window ? nlohmann::json(*s.sliding_window) : nlohmann::json(nullptr);
  if (s.arch == Architecture::Qwen2 || s.arch == Architecture::Qwen3) j["use_sliding_window"] = false;
  return j;
}

void write_hf_model(const std::string& dir, const HfModelSpec& s) {
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/config.json");
    out << hf_config_json(s).dump(2) << "\n";
    LJ_CHECK(out.good(), SourceLoc{}, "cannot write {}/config.json", dir);
  }
  const std::vector<Tensor> all = model_tensors(s);
  const DType dt = dtype_of(s.dtype);
  const size_t per_shard = (all.size() + static_cast<size_t>(s.shards) - 1) / static_cast<size_t>(s.shards);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t seed = s.seed;
  for (int shard = 0; shard < s.shards; ++shard) {
    const std::string file = s.shards == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, s.shards);
    std::vector<std::vector<unsigned char>> data;
    std::vector<exec::RawTensor> raw;
    data.reserve(per_shard);
    for (size_t i = static_cast<size_t>(shard) * per_shard; i < std::min(all.size(), static_cast<size_t>(shard + 1) * per_shard); ++i) {
      const Tensor& t = all[i];
      data.push_back(random_bytes(dt, numel(t.shape), ++seed, t.lo, t.hi));
      raw.push_back({t.name, dt, t.shape, data.back()});
      weight_map[t.name] = file;
    }
    exec::write_safetensors_raw(dir + "/" + file, raw);
  }
  if (s.shards > 1) {
    std::ofstream out(dir + "/model.safetensors.index.json");
    out << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    LJ_CHECK(out.good(), SourceLoc{}, "cannot write {}/model.safetensors.index.json", dir);
  }
}

}  // namespace lj::testing
