// Hugging Face checkpoints: sharded and single-file layouts, the bind-time fusions, and every
// checkpoint error naming the tensor or the shard.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "layerjit/error.h"
#include "models/model.h"
#include "tests/models/hf_model_writer.h"
#include "tests/models/model_test_util.h"

using namespace lj;
using namespace lj::models;
using Catch::Matchers::Contains;

namespace {

std::string open_error(const std::string& dir) {
  try {
    Model::open(dir);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

const ParamBytes& param(const std::vector<ParamBytes>& ps, const std::string& name) {
  for (const ParamBytes& p : ps)
    if (p.name == name) return p;
  FAIL("no param " << name);
  return ps.front();
}

}  // namespace

/// The sharded tiny model opens through its index; %w_qkv is q, k and v stacked, %w_gate_up gate
/// and up, %b_qkv the biases; nothing is left unused.
TEST_CASE("a sharded checkpoint binds q/k/v and gate/up as stacked rows", "[models]") {
  testing::TempModelDir dir("qwen2");
  testing::write_hf_model(dir.str(), testing::tiny_spec(Architecture::Qwen2));
  const Model m = Model::open(dir.str());
  CHECK(m.checkpoint().file_count() == 2);
  CHECK(m.unused_tensors().empty());
  const ModelConfig& c = m.config();
  for (int64_t l : {int64_t{0}, c.n_layers - 1}) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const HostTensor qkv = to_host(param(m.layer_params(l), "w_qkv"));
    // Rows 0..71 are q_proj, 72..95 k_proj, 96..119 v_proj.
    const exec::SafeTensor* kt = m.checkpoint().find(p + "self_attn.k_proj.weight").tensor;
    const exec::SafetensorsFile* kf = m.checkpoint().find(p + "self_attn.k_proj.weight").file;
    const HostTensor k = kf->read(*kt);
    REQUIRE(qkv.shape == std::vector<int64_t>{120, 72});
    for (int64_t i = 0; i < 24 * 72; ++i) CHECK(qkv.data[static_cast<size_t>(72 * 72 + i)] == k.data[static_cast<size_t>(i)]);
    const HostTensor b = to_host(param(m.layer_params(l), "b_qkv"));
    const auto vb = m.checkpoint().find(p + "self_attn.v_proj.bias");
    const HostTensor v = vb.file->read(*vb.tensor);
    for (int64_t i = 0; i < 24; ++i) CHECK(b.data[static_cast<size_t>(96 + i)] == v.data[static_cast<size_t>(i)]);
    const HostTensor gu = to_host(param(m.layer_params(l), "w_gate_up"));
    const auto up = m.checkpoint().find(p + "mlp.up_proj.weight");
    const HostTensor u = up.file->read(*up.tensor);
    for (int64_t i = 0; i < 100 * 72; ++i) CHECK(gu.data[static_cast<size_t>(100 * 72 + i)] == u.data[static_cast<size_t>(i)]);
  }
}

/// Tied embeddings: the head's %lm_head is the embedding table itself.
TEST_CASE("a tied model's LM head is its embedding table", "[models]") {
  testing::TempModelDir dir("qwen3");
  testing::HfModelSpec s = testing::tiny_spec(Architecture::Qwen3);
  s.shards = 1;
  testing::write_hf_model(dir.str(), s);
  const Model m = Model::open(dir.str());
  CHECK(m.checkpoint().file_count() == 1);
  const ParamBytes& head = param(m.head_params(), "lm_head");
  const ParamBytes& embed = param(m.embed_params(), "embed_tokens");
  CHECK(head.parts.at(0).data.data() == embed.parts.at(0).data.data());
  CHECK(m.unused_tensors().empty());
}

/// An extra tensor is reported as unused; a missing one, a mis-shaped one, a missing shard and a
/// wrong index entry are errors naming the tensor or file.
TEST_CASE("checkpoint errors name the tensor, the shard and both shapes", "[models][errors]") {
  testing::TempModelDir dir("llama");
  testing::HfModelSpec s = testing::tiny_spec(Architecture::Llama);
  testing::write_hf_model(dir.str(), s);
  SECTION("missing shard") {
    std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
    CHECK_THAT(open_error(dir.str()), Contains("shard 'model-00002-of-00002.safetensors' is missing"));
  }
  SECTION("no weights at all") {
    std::filesystem::remove(dir.file("model.safetensors.index.json"));
    CHECK_THAT(open_error(dir.str()), Contains("no weights: neither model.safetensors nor model.safetensors.index.json"));
  }
  SECTION("no config") {
    std::filesystem::remove(dir.file("config.json"));
    CHECK_THAT(open_error(dir.str()), Contains("no config.json"));
  }
  SECTION("an index entry pointing at the wrong shard") {
    std::ifstream in(dir.file("model.safetensors.index.json"));
    nlohmann::json j = nlohmann::json::parse(in);
    j["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
    std::ofstream(dir.file("model.safetensors.index.json")) << j.dump();
    CHECK_THAT(open_error(dir.str()), Contains("the index places tensor 'model.norm.weight' in model-00001-of-00002.safetensors"));
  }
  SECTION("a missing tensor") {
    // A config with one more layer than the checkpoint holds.
    s.layers = 4;
    std::ofstream(dir.file("config.json")) << testing::hf_config_json(s).dump();
    CHECK_THAT(open_error(dir.str()), Contains("no tensor 'model.layers.3.input_layernorm.weight' (the weight %attn_norm of @"));
  }
  SECTION("a tensor of another shape") {
    // The config claims a wider MLP than the weights have.
    s.ffn = 104;
    std::ofstream(dir.file("config.json")) << testing::hf_config_json(s).dump();
    CHECK_THAT(open_error(dir.str()),
               Contains("tensor 'model.layers.0.mlp.gate_proj.weight' is bf16[100, 72] but the config makes it bf16[104, 72]"));
  }
  SECTION("a tensor of another dtype") {
    s.dtype = "float16";
    std::ofstream(dir.file("config.json")) << testing::hf_config_json(s).dump();
    CHECK_THAT(open_error(dir.str()), Contains("is bf16[301, 72] but the config makes it f16[301, 72]"));
  }
  SECTION("an unused tensor is reported, not refused") {
    s.tied = true;  // the checkpoint has lm_head.weight, which a tied model does not read
    std::ofstream(dir.file("config.json")) << testing::hf_config_json(s).dump();
    const Model m = Model::open(dir.str());
    CHECK(m.unused_tensors() == std::vector<std::string>{"lm_head.weight"});
  }
}

/// The checks of a generation request.
TEST_CASE("generate requests are checked against the model", "[models][errors]") {
  testing::TempModelDir dir("mistral");
  testing::write_hf_model(dir.str(), testing::tiny_spec(Architecture::Mistral));
  const Model m = Model::open(dir.str());
  auto err = [&](const std::vector<int32_t>& ids, int64_t n) {
    try {
      check_generate_request(m.config(), ids, n);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(err({}, 3), Contains("the prompt has no token ids"));
  CHECK_THAT(err({1, 301}, 3), Contains("token 1 of the prompt is 301, outside the vocabulary [0, 301)"));
  CHECK_THAT(err({1, -1}, 3), Contains("token 1 of the prompt is -1"));
  CHECK_THAT(err({1}, 0), Contains("at least 1"));
  CHECK_THAT(err({1, 2}, 511), Contains("more than the model's max_position_embeddings (512)"));
  CHECK(err({1, 2}, 510) == "(no error)");
}
