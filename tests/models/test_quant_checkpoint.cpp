// 4-bit checkpoints (AutoAWQ's GEMM layout and GPTQ's), written here as their packers write them:
// imported, each projection's codes, scales and zero points repacked into the IR's layout, the model
// generates exactly what the plain checkpoint with the dequantized weights generates (the same
// reference arithmetic on the same weight values), and every layout or option layerjit does not
// read is refused by name.
#include <catch2/catch.hpp>

#include "layerjit/error.h"
#include "layerjit/text.h"
#include "models/generate.h"
#include "models/model.h"
#include "tests/models/hf_model_writer.h"
#include "tests/models/model_test_util.h"

using namespace lj;
using namespace lj::models;

namespace {

testing::HfModelSpec quant_spec() { return testing::quant_tiny_spec(Architecture::Llama); }

std::string open_error(const std::string& dir) {
  try {
    (void)Model::open(dir);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

void check_same_generation(const testing::QuantSpec& q) {
  testing::TempModelDir dir("quant"), ref("quant-ref");
  testing::write_quantized_hf_model(dir.str(), ref.str(), quant_spec(), q);
  const Model m = Model::open(dir.str()), r = Model::open(ref.str());
  CHECK(m.unused_tensors().empty());
  // The layer graphs dequantize each projection's codes; the plain one reads bf16 weights.
  const std::string text = print_graph(m.graphs().prefill);
  CHECK(text.find("%w_qkv = dequantize(%w_qkv_q, %w_qkv_s, %w_qkv_z)") != std::string::npos);
  CHECK(text.find("%w_down_q: param u4[128, 192]") != std::string::npos);
  const std::vector<int32_t> prompt = {5, 17, 250, 3, 99, 42, 7};
  GenerateOptions o;
  o.new_tokens = 5;
  o.keep_logits = true;
  const GenerateResult a = generate_reference(m, prompt, o), b = generate_reference(r, prompt, o);
  CHECK(a.tokens == b.tokens);
  CHECK(a.logits.data == b.logits.data);  // the same weight values: bit for bit
}

}  // namespace

TEST_CASE("an AutoAWQ checkpoint generates what its dequantized weights do", "[models][int4]") {
  testing::QuantSpec q;
  q.format = testing::QuantSpec::Format::Awq;
  q.group = 64;
  check_same_generation(q);
}

TEST_CASE("a GPTQ checkpoint generates what its dequantized weights do: groups of 32, per channel, v2 zeros", "[models][int4]") {
  testing::QuantSpec q;
  q.format = testing::QuantSpec::Format::Gptq;
  q.group = 32;
  check_same_generation(q);
  q.group = -1;  // one scale per output channel (i8 zero points: one group per row)
  check_same_generation(q);
  q.group = 64;
  q.gptq_v1 = false;
  check_same_generation(q);
}

TEST_CASE("4-bit checkpoints layerjit does not read are refused by name", "[models][int4]") {
  testing::TempModelDir dir("quant-bad"), ref("quant-bad-ref");
  testing::QuantSpec q;
  q.format = testing::QuantSpec::Format::Gptq;
  q.desc_act = true;
  testing::write_quantized_hf_model(dir.str(), ref.str(), quant_spec(), q);
  CHECK(open_error(dir.str()) == dir.str() + "/config.json: quantization_config: field 'desc_act': act-order GPTQ checkpoints "
                                             "(desc_act = true: groups follow g_idx's permutation of K) are not supported");
  q.desc_act = false;
  q.permuted_g_idx = true;
  testing::TempModelDir dir2("quant-bad2"), ref2("quant-bad2-ref");
  testing::write_quantized_hf_model(dir2.str(), ref2.str(), quant_spec(), q);
  CHECK(open_error(dir2.str()) == "model.layers.0.self_attn.q_proj.g_idx: input 0 is in group 1, not 0 (0 / group size 64): "
                                  "act-order checkpoints are not supported");
  q.permuted_g_idx = false;
  q.zero_of_zero = true;
  testing::TempModelDir dir3("quant-bad3"), ref3("quant-bad3-ref");
  testing::write_quantized_hf_model(dir3.str(), ref3.str(), quant_spec(), q);
  CHECK(open_error(dir3.str()) == "model.layers.0.self_attn.q_proj.qzeros: group 0 of output 0 stores 15, a zero point of 16 in "
                                  "GPTQ's v1 format, which 4-bit zero points cannot hold");
}

TEST_CASE("quantization_config fields layerjit does not build are refused by name", "[models][int4][hf_config]") {
  auto error_of = [](const std::string& qc) {
    const std::string text = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_attention_heads": 4,
      "intermediate_size": 192, "num_hidden_layers": 1, "vocab_size": 301, "torch_dtype": "bfloat16",
      "quantization_config": )" + qc + "}";
    try {
      (void)parse_model_config(text, "c.json", "m");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"quant_method": "bitsandbytes"})") ==
        "c.json: quantization_config: field 'quant_method': 'bitsandbytes' is not supported (layerjit reads 4-bit awq and gptq checkpoints)");
  CHECK(error_of(R"({"quant_method": "gptq", "bits": 8, "group_size": 128})") ==
        "c.json: quantization_config: field 'bits': 8-bit weights are not supported (4 only)");
  CHECK(error_of(R"({"quant_method": "awq", "bits": 4, "group_size": 48})") ==
        "c.json: quantization_config: field 'group_size': must be 32, 64, 128 or -1 (per channel), got 48");
  CHECK(error_of(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})") ==
        "c.json: quantization_config: field 'version': 'gemv' is not supported (AutoAWQ's GEMM layout only: qweight [in, out / 8])");
  CHECK(error_of(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})") ==
        "c.json: quantization_config: field 'zero_point': symmetric AWQ checkpoints (zero_point = false) are not supported");
  CHECK(error_of(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["lm_head", "q_proj"]})") ==
        "c.json: quantization_config: field 'modules_to_not_convert': checkpoints that keep some projections unquantized are not supported");
  CHECK(error_of(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})") ==
        "c.json: quantization_config: field 'checkpoint_format': 'marlin' is not supported (gptq or gptq_v2)");
  const ModelConfig c = parse_model_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_attention_heads": 4,
      "intermediate_size": 192, "num_hidden_layers": 1, "vocab_size": 301,
      "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": false}})", "c.json", "m");
  REQUIRE(c.layer.quant);
  CHECK(c.layer.quant->group == 0);
  CHECK(c.quant_method == ModelConfig::QuantMethod::Gptq);
  CHECK(c.gptq_zeros_minus_one);
}
