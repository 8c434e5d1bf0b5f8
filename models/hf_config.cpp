// config.json -> ModelConfig. Defaults are the ones Hugging Face's config classes use when a field
// is absent (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config), so an absent field means what
// it means to transformers; a field whose value would change the computation in a way layerjit does
// not build is refused naming the field and the value.
#include "models/hf_config.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layerjit/check.h"
#include "layerjit/error.h"
#include "ops/rope_frequencies.h"

namespace lj::models {

namespace {

using json = nlohmann::json;

struct Family {
  Architecture arch;
  std::string_view name;
  int64_t default_max_positions;  // the config class's max_position_embeddings default
};
constexpr Family kFamilies[] = {
    {Architecture::Llama, "LlamaForCausalLM", 2048},
    {Architecture::Mistral, "MistralForCausalLM", 4096 * 32},
    {Architecture::Qwen2, "Qwen2ForCausalLM", 32768},
    {Architecture::Qwen3, "Qwen3ForCausalLM", 32768},
};

// Field access with errors that name the file and the field.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(std::string_view field, const std::string& why) const {
    throw UserError(fmt::format("{}: field '{}': {}", where_, field, why));
  }
  bool has(std::string_view f) const { return j_.contains(f) && !j_.at(std::string(f)).is_null(); }
  const json& at(std::string_view f) const { return j_.at(std::string(f)); }

  int64_t int_field(std::string_view f, std::optional<int64_t> dflt = std::nullopt, int64_t min = 1) const {
    if (!has(f)) {
      if (!dflt) fail(f, "missing (the model's shape needs it)");
      return *dflt;
    }
    const json& v = at(f);
    if (!v.is_number_integer()) fail(f, fmt::format("must be an integer, got {}", v.dump()));
    const auto x = v.get<int64_t>();
    if (x < min) fail(f, fmt::format("must be at least {}, got {}", min, x));
    return x;
  }
  double float_field(std::string_view f, double dflt) const {
    if (!has(f)) return dflt;
    const json& v = at(f);
    if (!v.is_number()) fail(f, fmt::format("must be a number, got {}", v.dump()));
    return v.get<double>();
  }
  bool bool_field(std::string_view f, bool dflt) const {
    if (!has(f)) return dflt;
    const json& v = at(f);
    if (!v.is_boolean()) fail(f, fmt::format("must be true or false, got {}", v.dump()));
    return v.get<bool>();
  }
  std::optional<std::string> string_field(std::string_view f) const {
    if (!has(f)) return std::nullopt;
    const json& v = at(f);
    if (!v.is_string()) fail(f, fmt::format("must be a string, got {}", v.dump()));
    return v.get<std::string>();
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

const Family& read_architecture(const Fields& f) {
  if (!f.has("architectures")) f.fail("architectures", "missing (which model class the checkpoint is)");
  const json& a = f.at("architectures");
  if (!a.is_array() || a.size() != 1 || !a[0].is_string())
    f.fail("architectures", fmt::format("must list one architecture, got {}", a.dump()));
  const auto name = a[0].get<std::string>();
  std::string known;
  for (const Family& fam : kFamilies) {
    if (fam.name == name) return fam;
    known += (known.empty() ? "" : ", ") + std::string(fam.name);
  }
  f.fail("architectures", fmt::format("'{}' is not an architecture layerjit builds (it builds {})", name, known));
}

DType read_dtype(const Fields& f, bool* from_weights) {
  // transformers 4 writes torch_dtype, transformers 5 dtype.
  const std::string_view field = f.has("dtype") ? "dtype" : "torch_dtype";
  const std::optional<std::string> d = f.string_field(field);
  *from_weights = !d;
  if (!d) return DType::BF16;  // replaced by the embedding table's dtype
  if (*d == "bfloat16") return DType::BF16;
  if (*d == "float16") return DType::F16;
  if (*d == "float32") return DType::F32;
  f.fail(field, fmt::format("'{}' is not a dtype layerjit runs (bfloat16, float16, float32)", *d));
}

// rope_scaling (transformers 4) or rope_parameters (transformers 5, which also holds rope_theta).
void read_rope(const Fields& f, LlamaConfig& c) {
  const bool v5 = f.has("rope_parameters");
  const std::string_view field = v5 ? "rope_parameters" : "rope_scaling";
  c.rope_theta = f.float_field("rope_theta", 10000.0);
  if (!f.has(field)) return;
  const json& r = f.at(field);
  if (!r.is_object()) f.fail(field, fmt::format("must be an object or null, got {}", r.dump()));
  const Fields rf(r, fmt::format("{}: field '{}'", f.where(), field));
  if (v5) c.rope_theta = rf.float_field("rope_theta", c.rope_theta);
  if (c.rope_theta <= 1.0) f.fail("rope_theta", fmt::format("must be greater than 1, got {}", c.rope_theta));
  std::optional<std::string> type = rf.string_field("rope_type");
  if (!type) type = rf.string_field("type");
  if (!type || *type == "default") return;
  auto positive = [&](std::string_view k) {
    if (!rf.has(k)) rf.fail(k, fmt::format("missing (rope_type '{}' needs it)", *type));
    const double v = rf.float_field(k, 0);
    if (!(v > 0)) rf.fail(k, fmt::format("must be positive, got {}", v));
    return v;
  };
  if (*type == "linear") {
    c.rope_scaling.kind = attr::RopeScaling::Kind::Linear;
    c.rope_scaling.factor = positive("factor");
  } else if (*type == "llama3") {
    c.rope_scaling.kind = attr::RopeScaling::Kind::Llama3;
    c.rope_scaling.factor = positive("factor");
    c.rope_scaling.low_freq_factor = positive("low_freq_factor");
    c.rope_scaling.high_freq_factor = positive("high_freq_factor");
    c.rope_scaling.original_max_pos = rf.int_field("original_max_position_embeddings");
  } else {
    f.fail(field, fmt::format("rope_type '{}' is not supported (layerjit builds default, linear and llama3 RoPE)", *type));
  }
  if (std::string why = rope_scaling_problem(c.rope_scaling); !why.empty()) f.fail(field, why);
}

// Fields whose non-default values layerjit does not build.
// AutoAWQ (GEMM layout) and GPTQ 4-bit checkpoints; every other method or option is refused by name.
void read_quantization(const Fields& f, ModelConfig& m) {
  if (!f.has("quantization_config")) return;
  const json& q = f.at("quantization_config");
  if (!q.is_object()) f.fail("quantization_config", fmt::format("must be an object, got {}", q.dump()));
  const Fields qf(q, f.where() + ": quantization_config");
  const std::optional<std::string> method = qf.string_field("quant_method");
  if (method != "awq" && method != "gptq")
    qf.fail("quant_method", fmt::format("'{}' is not supported (layerjit reads 4-bit awq and gptq checkpoints)", method.value_or("")));
  if (const int64_t bits = qf.int_field("bits"); bits != 4)
    qf.fail("bits", fmt::format("{}-bit weights are not supported (4 only)", bits));
  LlamaConfig::WeightQuant w;
  const int64_t g = qf.int_field("group_size", std::nullopt, -1);
  if (g == -1) w.group = 0;  // one scale per output channel
  else if (g == 32 || g == 64 || g == 128) w.group = g;
  else qf.fail("group_size", fmt::format("must be 32, 64, 128 or -1 (per channel), got {}", g));
  if (q.contains("modules_to_not_convert") && !q.at("modules_to_not_convert").is_null() && !q.at("modules_to_not_convert").empty())
    qf.fail("modules_to_not_convert", "checkpoints that keep some projections unquantized are not supported");
  if (*method == "awq") {
    m.quant_method = ModelConfig::QuantMethod::Awq;
    const std::string version = qf.string_field("version").value_or("gemm");
    if (version != "gemm" && version != "GEMM")
      qf.fail("version", fmt::format("'{}' is not supported (AutoAWQ's GEMM layout only: qweight [in, out / 8])", version));
    if (!qf.bool_field("zero_point", true)) qf.fail("zero_point", "symmetric AWQ checkpoints (zero_point = false) are not supported");
    w.codes = DType::U4;
    w.zero_points = true;
  } else {
    m.quant_method = ModelConfig::QuantMethod::Gptq;
    if (qf.bool_field("desc_act", false))
      qf.fail("desc_act", "act-order GPTQ checkpoints (desc_act = true: groups follow g_idx's permutation of K) are not supported");
    const std::string format = qf.string_field("checkpoint_format").value_or("gptq");
    if (format != "gptq" && format != "gptq_v2")
      qf.fail("checkpoint_format", fmt::format("'{}' is not supported (gptq or gptq_v2)", format));
    m.gptq_zeros_minus_one = format == "gptq";
    w.codes = DType::U4;  // symmetric ones too: their zero points are 8
    w.zero_points = true;
  }
  m.layer.quant = w;
}

void refuse_unsupported(const Fields& f, Architecture arch) {
  if (const auto act = f.string_field("hidden_act"); act && *act != "silu")
    f.fail("hidden_act", fmt::format("'{}' is not supported (the MLP is SwiGLU: silu)", *act));
  if (f.has("partial_rotary_factor") && f.float_field("partial_rotary_factor", 1.0) != 1.0)
    f.fail("partial_rotary_factor", "RoPE over part of each head is not supported (1.0 only)");
  if (f.bool_field("mlp_bias", false)) f.fail("mlp_bias", "biases on the MLP projections are not supported");
  // Qwen2's bias on q/k/v is the architecture's own; a config's attention_bias adds o_proj's too.
  if (arch != Architecture::Qwen2 && f.bool_field("attention_bias", false))
    f.fail("attention_bias", "biases on the attention projections are not supported for this architecture");
  if ((arch == Architecture::Qwen2 || arch == Architecture::Qwen3) && f.bool_field("use_sliding_window", false))
    f.fail("use_sliding_window", "Qwen's per-layer sliding windows (max_window_layers) are not supported");
  if (f.has("layer_types")) {
    const json& lt = f.at("layer_types");
    if (!lt.is_array()) f.fail("layer_types", fmt::format("must be a list, got {}", lt.dump()));
    for (const json& t : lt) {
      const bool full = t == "full_attention";
      const bool sliding = t == "sliding_attention" && arch == Architecture::Mistral;
      if (!full && !sliding)
        f.fail("layer_types", fmt::format("layer type {} is not supported (every layer must be full_attention)", t.dump()));
    }
  }
}

}  // namespace

std::string_view architecture_name(Architecture a) {
  for (const Family& fam : kFamilies)
    if (fam.arch == a) return fam.name;
  LJ_ASSERT(false, "unhandled architecture {}", static_cast<int>(a));
  __builtin_unreachable();
}

ModelConfig parse_model_config(const std::string& text, const std::string& where, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  if (!j.is_object()) throw UserError(fmt::format("{}: not a JSON object", where));
  const Fields f(j, where);
  const Family& fam = read_architecture(f);
  refuse_unsupported(f, fam.arch);

  ModelConfig m;
  m.architecture = fam.arch;
  LlamaConfig& c = m.layer;
  c.name = name;
  c.hidden = f.int_field("hidden_size");
  c.n_heads = f.int_field("num_attention_heads");
  c.n_kv_heads = f.int_field("num_key_value_heads", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    f.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads ({})", c.n_kv_heads, c.n_heads));
  if (!f.has("head_dim") && c.hidden % c.n_heads != 0)
    f.fail("head_dim", fmt::format("missing, and hidden_size ({}) is not a multiple of num_attention_heads ({})", c.hidden, c.n_heads));
  c.head_dim = f.int_field("head_dim", c.hidden / c.n_heads);
  if (c.head_dim % 2 != 0) f.fail("head_dim", fmt::format("must be even (RoPE rotates pairs), got {}", c.head_dim));
  c.ffn = f.int_field("intermediate_size");
  c.eps = f.float_field("rms_norm_eps", 1e-6);
  if (!(c.eps > 0)) f.fail("rms_norm_eps", fmt::format("must be positive, got {}", c.eps));
  c.dtype = read_dtype(f, &m.dtype_from_weights);
  read_rope(f, c);
  c.qkv_bias = fam.arch == Architecture::Qwen2;
  c.qk_norm = fam.arch == Architecture::Qwen3;
  if (fam.arch == Architecture::Mistral) {
    // MistralConfig's default window is 4096; null means full attention.
    if (!j.contains("sliding_window")) c.sliding_window = 4096;
    else if (f.has("sliding_window")) c.sliding_window = f.int_field("sliding_window");
  }
  m.n_layers = f.int_field("num_hidden_layers");
  m.vocab = f.int_field("vocab_size");
  m.max_positions = f.int_field("max_position_embeddings", fam.default_max_positions);
  m.tie_embeddings = f.bool_field("tie_word_embeddings", false);
  read_quantization(f, m);
  return m;
}

std::string model_name_from_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
  if (ec) p = dir;
  std::string base = p.filename().string();
  if (base.empty()) base = p.parent_path().filename().string();
  if (base.empty() || base == "." || base == "..") base = "model";
  for (char& ch : base)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  if (std::isdigit(static_cast<unsigned char>(base[0]))) base = "m_" + base;
  return base;
}

ModelConfig read_model_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path, std::ios::binary);
  LJ_CHECK(in.good(), SourceLoc{}, "{}: no config.json (a Hugging Face model directory holds config.json and safetensors weights)", dir);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str(), path, model_name_from_dir(dir));
}

}  // namespace lj::models
