// Hugging Face models on the GPU (models/device_model.h): each family's tiny model fused against the
// CPU reference (teacher-forced on the GPU's own tokens, so one close call cannot derail the rest),
// CUDA-graph decode steps against eager ones, and the Llama-3-8B shapes (2 layers, random weights in
// Hugging Face layout) fused against unfused.
#include <cmath>
#include <optional>

#include <catch2/catch.hpp>

#include "models/device_model.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/models/hf_model_writer.h"
#include "tests/models/model_test_util.h"

using namespace lj;
using namespace lj::models;

namespace {

// Largest |a - b| over the logits, and the largest |b|.
std::pair<double, double> logit_error(const HostTensor& a, const HostTensor& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    err = std::max(err, std::abs(a.data[i] - b.data[i]));
    scale = std::max(scale, std::abs(b.data[i]));
  }
  return {err, scale};
}

GenerateResult on_gpu(const Model& m, const std::vector<int32_t>& prompt, int64_t n, DeviceModelOptions o = {}) {
  rt::Context& ctx = lj_test::gpu();
  o.capacity = static_cast<int64_t>(prompt.size()) + n;
  auto dm = DeviceModel::open(ctx, m, o);
  REQUIRE(dm.ok());
  GenerateOptions g;
  g.new_tokens = n;
  g.keep_logits = true;
  auto r = dm->generate(prompt, g);
  if (!r.ok()) FAIL(r.message());
  return *r;
}

// The family's tiny model (hidden 72, 3 layers, 6 query / 2 KV heads, vocab 301, head_dim 12 but
// Qwen3's 16), or with another head_dim: 12, 10 and 80 run the attention kernels on zero-padded tiles
// of 16 and 128 (copies of 8, 4 and 16 bytes), 16 without padding.
void check_model(const Model& m);

void check_family(Architecture a, std::optional<int64_t> head_dim = std::nullopt) {
  rt::Context& ctx = lj_test::gpu();
  (void)ctx;
  testing::TempModelDir dir(std::string(architecture_name(a)));
  testing::HfModelSpec s = testing::tiny_spec(a);
  if (head_dim) s.head_dim = *head_dim;
  INFO("head_dim " << s.head_dim.value_or(s.hidden / s.heads));
  testing::write_hf_model(dir.str(), s);
  check_model(Model::open(dir.str()));
}

// The model on the GPU against the CPU reference teacher-forced on the GPU's tokens, and its
// CUDA-graph steps against eager ones.
void check_model(const Model& m) {
  const std::vector<int32_t> prompt = {5, 17, 250, 3, 99, 42, 7, 181, 66};  // past Mistral's window of 5
  const GenerateResult gpu = on_gpu(m, prompt, 6);
  GenerateOptions ro;
  ro.new_tokens = 6;
  ro.keep_logits = true;
  ro.forced.assign(gpu.tokens.begin(), gpu.tokens.end() - 1);
  const GenerateResult ref = generate_reference(m, prompt, ro);
  const auto [err, scale] = logit_error(gpu.logits, ref.logits);
  INFO("logits: max |gpu - cpu| " << err << ", max |cpu| " << scale);
  // bf16 activations through three layers: a few bf16 ulps of the logits' scale.
  CHECK(err <= 0.03 * scale + 1e-3);
  // Where the reference's best logit leads the runner-up by more than the error, the GPU chose it.
  for (size_t st = 0; st < gpu.tokens.size(); ++st) {
    const double* row = ref.logits.data.data() + st * 301;
    std::vector<double> sorted(row, row + 301);
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] > 2 * err) CHECK(gpu.tokens[st] == ref.tokens[st]);
  }
  // Decode steps replayed as one CUDA graph give what eager steps give, bit for bit.
  DeviceModelOptions eager;
  eager.graphs = false;
  const GenerateResult e = on_gpu(m, prompt, 6, eager);
  CHECK(e.tokens == gpu.tokens);
  CHECK(e.logits.data == gpu.logits.data);
}

}  // namespace

TEST_CASE("tiny 4-bit AutoAWQ and GPTQ Llamas on the GPU match the CPU reference", "[gpu][models][int4]") {
  rt::Context& ctx = lj_test::gpu();
  (void)ctx;
  for (const auto& [format, group] : {std::pair{testing::QuantSpec::Format::Awq, int64_t{64}},
                                      std::pair{testing::QuantSpec::Format::Gptq, int64_t{32}},
                                      std::pair{testing::QuantSpec::Format::Gptq, int64_t{-1}}}) {
    INFO((format == testing::QuantSpec::Format::Awq ? "awq" : "gptq") << " group " << group);
    testing::TempModelDir dir("quant"), ref("quant-ref");
    testing::QuantSpec q;
    q.format = format;
    q.group = group;
    testing::write_quantized_hf_model(dir.str(), ref.str(), testing::quant_tiny_spec(Architecture::Llama), q);
    check_model(Model::open(dir.str()));
  }
}

TEST_CASE("a tiny Llama (Llama-3.1 RoPE) on the GPU matches the CPU reference", "[gpu][models]") {
  SECTION("head_dim 12") { check_family(Architecture::Llama); }
  SECTION("head_dim 16") { check_family(Architecture::Llama, 16); }
  SECTION("head_dim 10") { check_family(Architecture::Llama, 10); }
  SECTION("head_dim 80") { check_family(Architecture::Llama, 80); }
}
TEST_CASE("a tiny Mistral (sliding window) on the GPU matches the CPU reference", "[gpu][models]") {
  SECTION("head_dim 12") { check_family(Architecture::Mistral); }
  SECTION("head_dim 16") { check_family(Architecture::Mistral, 16); }
}
TEST_CASE("a tiny Qwen2 (QKV bias) on the GPU matches the CPU reference", "[gpu][models]") {
  SECTION("head_dim 12") { check_family(Architecture::Qwen2); }
  SECTION("head_dim 16") { check_family(Architecture::Qwen2, 16); }
}
TEST_CASE("a tiny Qwen3 (q/k norm in the rope kernel, tied) on the GPU matches the CPU reference", "[gpu][models]") {
  SECTION("head_dim 16") { check_family(Architecture::Qwen3); }
  SECTION("head_dim 12") { check_family(Architecture::Qwen3, 12); }
}

/// Two Llama-3-8B-shaped layers with the real vocabulary: the fused plan against --no-fuse's.
TEST_CASE("Llama-3-8B shapes in Hugging Face layout: fused against unfused", "[gpu][models]") {
  rt::Context& ctx = lj_test::gpu();
  (void)ctx;
  testing::TempModelDir dir("llama8b");
  testing::write_hf_model(dir.str(), testing::llama3_8b_spec(2));
  const Model m = Model::open(dir.str());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 77; ++i) prompt.push_back((i * 7919 + 13) % 128256);
  const GenerateResult fused = on_gpu(m, prompt, 4);
  DeviceModelOptions unfused;
  unfused.build.fusion.fuse = false;
  const GenerateResult plain = on_gpu(m, prompt, 4, unfused);
  const auto [err, scale] = logit_error(fused.logits, plain.logits);
  INFO("logits: max |fused - unfused| " << err << ", max |unfused| " << scale);
  CHECK(err <= 0.03 * scale + 1e-3);
  CHECK(fused.tokens[0] == plain.tokens[0]);
}
