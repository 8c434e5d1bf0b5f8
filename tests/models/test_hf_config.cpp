// config.json import: each family's fields land in the layer config, and every refused or
// malformed field is an error naming it.
#include <catch2/catch.hpp>

#include "layerjit/error.h"
#include "models/hf_config.h"
#include "ops/rope_frequencies.h"
#include "tests/models/hf_model_writer.h"

using namespace lj;
using namespace lj::models;
using Catch::Matchers::Contains;

namespace {

ModelConfig parse(const nlohmann::json& j) { return parse_model_config(j.dump(), "m/config.json", "m"); }

std::string error_of(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

nlohmann::json tiny(Architecture a) { return testing::hf_config_json(testing::tiny_spec(a)); }

}  // namespace

/// Llama with Llama-3.1 RoPE: shapes, eps, theta, the scaling and the defaults of absent fields.
TEST_CASE("a Llama config gives the layer's shapes and Llama-3.1 RoPE", "[models]") {
  const ModelConfig c = parse(tiny(Architecture::Llama));
  CHECK(c.architecture == Architecture::Llama);
  CHECK(c.layer.name == "m");
  CHECK(c.layer.hidden == 72);
  CHECK(c.layer.n_heads == 6);
  CHECK(c.layer.n_kv_heads == 2);
  CHECK(c.layer.head_dim == 12);
  CHECK(c.layer.ffn == 100);
  CHECK(c.layer.eps == 1e-5);
  CHECK(c.layer.rope_theta == 10000.0);
  CHECK(c.layer.dtype == DType::BF16);
  CHECK(c.layer.rope_scaling.kind == attr::RopeScaling::Kind::Llama3);
  CHECK(c.layer.rope_scaling.factor == 8.0);
  CHECK(c.layer.rope_scaling.original_max_pos == 32);
  CHECK_FALSE(c.layer.sliding_window);
  CHECK_FALSE(c.layer.qkv_bias);
  CHECK_FALSE(c.layer.qk_norm);
  CHECK(c.n_layers == 3);
  CHECK(c.vocab == 301);
  CHECK(c.max_positions == 512);
  CHECK_FALSE(c.tie_embeddings);

  nlohmann::json j = tiny(Architecture::Llama);
  for (const char* f : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings", "tie_word_embeddings"}) j.erase(f);
  const ModelConfig d = parse(j);
  CHECK(d.layer.n_kv_heads == 6);  // absent: as many as query heads (no GQA)
  CHECK(d.layer.eps == 1e-6);
  CHECK(d.layer.rope_theta == 10000.0);
  CHECK(d.max_positions == 2048);
  CHECK_FALSE(d.tie_embeddings);
}

/// Each family's own option: Mistral's window, Qwen2's bias, Qwen3's q/k norm and explicit head_dim.
TEST_CASE("Mistral, Qwen2 and Qwen3 configs set their family's options", "[models]") {
  const ModelConfig m = parse(tiny(Architecture::Mistral));
  CHECK(m.layer.sliding_window == std::optional<int64_t>(5));
  nlohmann::json no_window = tiny(Architecture::Mistral);
  no_window["sliding_window"] = nullptr;
  CHECK_FALSE(parse(no_window).layer.sliding_window);
  no_window.erase("sliding_window");
  CHECK(parse(no_window).layer.sliding_window == std::optional<int64_t>(4096));  // MistralConfig's default

  const ModelConfig q2 = parse(tiny(Architecture::Qwen2));
  CHECK(q2.layer.qkv_bias);
  CHECK_FALSE(q2.layer.qk_norm);
  const ModelConfig q3 = parse(tiny(Architecture::Qwen3));
  CHECK(q3.layer.qk_norm);
  CHECK_FALSE(q3.layer.qkv_bias);
  CHECK(q3.layer.head_dim == 16);
  CHECK(q3.tie_embeddings);
}

/// transformers 5 writes rope_parameters (with rope_theta inside) and dtype instead of torch_dtype.
TEST_CASE("transformers 5's rope_parameters and dtype are read", "[models]") {
  nlohmann::json j = tiny(Architecture::Llama);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 500000.0}, {"factor", 2.0}};
  const ModelConfig c = parse(j);
  CHECK(c.layer.dtype == DType::F16);
  CHECK(c.layer.rope_theta == 500000.0);
  CHECK(c.layer.rope_scaling.kind == attr::RopeScaling::Kind::Linear);
  CHECK(c.layer.rope_scaling.factor == 2.0);
}

/// Every refusal names the file, the field and the value.
TEST_CASE("unsupported or malformed config fields are errors naming the field", "[models][errors]") {
  auto with = [](Architecture a, const std::string& field, const nlohmann::json& v) {
    nlohmann::json j = tiny(a);
    if (v.is_discarded()) j.erase(field);
    else j[field] = v;
    return error_of(j);
  };
  const nlohmann::json erase = nlohmann::json::value_t::discarded;
  CHECK_THAT(with(Architecture::Llama, "architectures", {"GPT2LMHeadModel"}),
             Contains("m/config.json: field 'architectures': 'GPT2LMHeadModel' is not an architecture layerjit builds"));
  CHECK_THAT(with(Architecture::Llama, "architectures", erase), Contains("field 'architectures': missing"));
  CHECK_THAT(with(Architecture::Llama, "hidden_size", erase), Contains("field 'hidden_size': missing"));
  CHECK_THAT(with(Architecture::Llama, "hidden_size", "72"), Contains("field 'hidden_size': must be an integer, got \"72\""));
  CHECK_THAT(with(Architecture::Llama, "num_hidden_layers", 0), Contains("field 'num_hidden_layers': must be at least 1, got 0"));
  CHECK_THAT(with(Architecture::Llama, "num_key_value_heads", 4), Contains("field 'num_key_value_heads': 4 does not divide"));
  CHECK_THAT(with(Architecture::Llama, "head_dim", 13), Contains("field 'head_dim': must be even"));
  CHECK_THAT(with(Architecture::Llama, "torch_dtype", "int8"), Contains("field 'torch_dtype': 'int8' is not a dtype"));
  CHECK_THAT(with(Architecture::Llama, "hidden_act", "gelu"), Contains("field 'hidden_act': 'gelu' is not supported"));
  CHECK_THAT(with(Architecture::Llama, "attention_bias", true), Contains("field 'attention_bias'"));
  CHECK_THAT(with(Architecture::Llama, "mlp_bias", true), Contains("field 'mlp_bias'"));
  CHECK_THAT(with(Architecture::Llama, "partial_rotary_factor", 0.5), Contains("field 'partial_rotary_factor'"));
  CHECK_THAT(with(Architecture::Llama, "quantization_config", {{"quant_method", "fp8"}}),
             Contains("quantization_config: field 'quant_method': 'fp8' is not supported"));
  CHECK_THAT(with(Architecture::Llama, "quantization_config", 4), Contains("field 'quantization_config': must be an object, got 4"));
  CHECK_THAT(with(Architecture::Llama, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
             Contains("field 'rope_scaling': rope_type 'yarn' is not supported"));
  CHECK_THAT(with(Architecture::Llama, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0},
                                                        {"original_max_position_embeddings", 8192}}),
             Contains("field 'low_freq_factor': missing (rope_type 'llama3' needs it)"));
  CHECK_THAT(with(Architecture::Llama, "rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                                                        {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 8192}}),
             Contains("high_freq_factor (1) must be greater than low_freq_factor (4)"));
  CHECK_THAT(with(Architecture::Qwen2, "use_sliding_window", true), Contains("field 'use_sliding_window'"));
  CHECK_THAT(with(Architecture::Llama, "layer_types", {"full_attention", "sliding_attention", "full_attention"}),
             Contains("field 'layer_types'"));
  CHECK_THAT(error_of(nlohmann::json::array()), Contains("m/config.json: not a JSON object"));
  CHECK_THAT([] {
    try {
      parse_model_config("{\"architectures\": [", "m/config.json", "m");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), Contains("m/config.json: not valid JSON"));
}

/// Llama-3.1's bands against the formula spelled out for one head_dim-12 table: the highest
/// frequency kept, the lowest divided by the factor, the one between blended.
TEST_CASE("llama3 RoPE scaling keeps, blends and divides by wavelength", "[models][rope]") {
  attr::RopeScaling s;
  s.kind = attr::RopeScaling::Kind::Llama3;
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_pos = 32;
  const std::vector<double> f = rope_inv_freq(12, 10000.0, s);
  const std::vector<double> plain = rope_inv_freq(12, 10000.0, {});
  REQUIRE(f.size() == 6);
  // Wavelengths 2 pi / plain[i]: 6.28 (< 32/4: kept), 29.2 (between 8 and 32: blended), then > 32 (divided).
  CHECK(f[0] == plain[0]);
  const double wl = 2 * 3.14159265358979323846 / plain[1];
  const double w = (32.0 / wl - 1.0) / (4.0 - 1.0);
  CHECK(std::abs(f[1] - ((1 - w) * plain[1] / 8.0 + w * plain[1])) < 1e-15);
  CHECK(f[1] < plain[1]);
  CHECK(f[1] > plain[1] / 8.0);
  for (size_t i = 2; i < 6; ++i) CHECK(f[i] == plain[i] / 8.0);
  attr::RopeScaling lin;
  lin.kind = attr::RopeScaling::Kind::Linear;
  lin.factor = 4.0;
  const std::vector<double> l = rope_inv_freq(12, 10000.0, lin);
  for (size_t i = 0; i < 6; ++i) CHECK(l[i] == plain[i] / 4.0);
}

/// Graph names come from the directory, made identifiers.
TEST_CASE("a model's name is its directory's, sanitised", "[models]") {
  CHECK(model_name_from_dir("/x/Llama-3.2-1B") == "Llama_3_2_1B");
  CHECK(model_name_from_dir("/x/qwen3/") == "qwen3");
  CHECK(model_name_from_dir("/x/7b.model") == "m_7b_model");
}
