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

HfModelSpec quant_tiny_spec(Architecture a) {
  HfModelSpec s = tiny_spec(a);
  s.hidden = 128;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.ffn = 192;
  s.layers = 2;
  return s;
}

void write_quantized_hf_model(const std::string& dir, const std::string& ref_dir, const HfModelSpec& spec, const QuantSpec& q) {
  HfModelSpec s = spec;
  s.shards = 1;
  write_hf_model(ref_dir, s);
  const DType dt = dtype_of(s.dtype);
  const std::string ref_file = ref_dir + "/model.safetensors";
  std::vector<std::pair<std::string, HostTensor>> ref, quant;
  {
    const exec::SafetensorsFile f = exec::SafetensorsFile::open(ref_file);
    for (const exec::SafeTensor& t : f.tensors()) ref.emplace_back(t.name, f.read(t));
  }
  uint64_t x = s.seed * 0x9E3779B97F4A7C15ull + 77;  // xorshift64
  auto next = [&x](uint64_t mod) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x % mod;
  };
  const bool awq = q.format == QuantSpec::Format::Awq;
  for (auto& [name, w] : ref) {
    const std::string suffix = "_proj.weight";
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      quant.emplace_back(name, w);
      continue;
    }
    const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
    const int64_t n = w.shape[0], k = w.shape[1], group = q.group < 0 ? k : q.group, groups = k / group;
    LJ_ASSERT(n % 8 == 0 && k % group == 0 && k % 8 == 0, "write_quantized_hf_model: {} is {}x{}", name, n, k);
    // intweight[k][n], zeros[g][n], scales[g][n]: nn.Linear's transposed view, as the packers hold them.
    std::vector<uint32_t> iw(static_cast<size_t>(k * n)), zeros(static_cast<size_t>(groups * n));
    HostTensor scales(DType::F16, {groups, n});
    for (auto& v : iw) v = static_cast<uint32_t>(next(16));
    for (auto& z : zeros) z = static_cast<uint32_t>(1 + next(14));
    if (q.zero_of_zero) zeros[0] = 0;
    for (auto& sc : scales.data) sc = 0.002 + 0.018 * static_cast<double>(next(1 << 20)) / (1 << 20);
    scales.round_to_dtype();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const auto at = static_cast<size_t>(c / group * n + r);
        const float p = static_cast<float>(static_cast<double>(iw[static_cast<size_t>(c * n + r)]) - zeros[at]) * static_cast<float>(scales.data[at]);
        w.data[static_cast<size_t>(r * k + c)] = round_to(dt, p);
      }
    auto word = [](uint32_t u) { return static_cast<double>(static_cast<int32_t>(u)); };
    HostTensor qweight(DType::I32, awq ? std::vector<int64_t>{k, n / 8} : std::vector<int64_t>{k / 8, n});
    HostTensor qzeros(DType::I32, {groups, n / 8});
    if (awq) {
      // AutoAWQ's GEMM pack: word (row, col) |= value(row, col * 8 + order[i]) << 4i.
      constexpr int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
      for (int64_t row = 0; row < k; ++row)
        for (int64_t col = 0; col < n / 8; ++col) {
          uint32_t v = 0;
          for (int i = 0; i < 8; ++i) v |= iw[static_cast<size_t>(row * n + col * 8 + order[i])] << (4 * i);
          qweight.data[static_cast<size_t>(row * (n / 8) + col)] = word(v);
        }
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t col = 0; col < n / 8; ++col) {
          uint32_t v = 0;
          for (int i = 0; i < 8; ++i) v |= zeros[static_cast<size_t>(g * n + col * 8 + order[i])] << (4 * i);
          qzeros.data[static_cast<size_t>(g * (n / 8) + col)] = word(v);
        }
    } else {
      // GPTQ's pack: qweight word (row, col) |= value(row * 8 + i, col) << 4i; zeros along N, minus one in v1.
      for (int64_t row = 0; row < k / 8; ++row)
        for (int64_t col = 0; col < n; ++col) {
          uint32_t v = 0;
          for (int i = 0; i < 8; ++i) v |= iw[static_cast<size_t>((row * 8 + i) * n + col)] << (4 * i);
          qweight.data[static_cast<size_t>(row * n + col)] = word(v);
        }
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t col = 0; col < n / 8; ++col) {
          uint32_t v = 0;
          for (int i = 0; i < 8; ++i) v |= ((zeros[static_cast<size_t>(g * n + col * 8 + i)] - (q.gptq_v1 ? 1u : 0u)) & 15u) << (4 * i);
          qzeros.data[static_cast<size_t>(g * (n / 8) + col)] = word(v);
        }
      HostTensor g_idx(DType::I32, {k});
      for (int64_t c = 0; c < k; ++c) g_idx.data[static_cast<size_t>(c)] = static_cast<double>(c / group);
      if (q.permuted_g_idx && k > 1) std::swap(g_idx.data[0], g_idx.data[static_cast<size_t>(k - 1)]);
      quant.emplace_back(prefix + ".g_idx", g_idx);
    }
    quant.emplace_back(prefix + ".qweight", qweight);
    quant.emplace_back(prefix + ".qzeros", qzeros);
    quant.emplace_back(prefix + ".scales", scales);
  }
  exec::write_safetensors(ref_file, ref);
  std::filesystem::create_directories(dir);
  exec::write_safetensors(dir + "/model.safetensors", quant);
  nlohmann::json config = hf_config_json(s);
  nlohmann::json qc = {{"quant_method", awq ? "awq" : "gptq"}, {"bits", 4}, {"group_size", q.group}};
  if (awq) {
    qc["zero_point"] = true;
    qc["version"] = "gemm";
  } else {
    qc["desc_act"] = q.desc_act;
    qc["sym"] = false;
    qc["checkpoint_format"] = q.gptq_v1 ? "gptq" : "gptq_v2";
  }
  config["quantization_config"] = qc;
  std::ofstream out(dir + "/config.json");
  out << config.dump(2) << "\n";
  LJ_CHECK(out.good(), SourceLoc{}, "cannot write {}/config.json", dir);
}

}  // namespace lj::testing
