// make_hf_model DIR FAMILY [--layers N] [--head-dim D] [--8b] [--shards N] [--seed S] [--awq G | --gptq G [--ref DIR2]]:
// writes a Hugging Face model directory with random weights (hf_model_writer.h): FAMILY is llama,
// llama-tied, mistral, qwen2 or qwen3 (the tiny models of the import tests), or with --8b the
// Llama-3-8B shapes. --awq / --gptq G write a 4-bit checkpoint in that layout with groups of G (-1:
// per channel; the tiny shapes become quant_tiny_spec's) and, at DIR2 (default DIR-ref), the plain
// checkpoint of its dequantized weights. For the CLI tests and the GPU check script.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "layerjit/error.h"
#include "tests/models/hf_model_writer.h"

int main(int argc, char** argv) {
  using lj::models::Architecture;
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_hf_model DIR llama|llama-tied|mistral|qwen2|qwen3 [--layers N] [--head-dim D] [--8b] [--shards N] "
                         "[--seed S] [--awq G | --gptq G [--ref DIR2]]\n");
    return 2;
  }
  const std::string dir = argv[1], family = argv[2];
  lj::testing::HfModelSpec s;
  bool big = false;
  int64_t layers = -1, head_dim = -1;
  std::optional<lj::testing::QuantSpec> quant;
  std::string ref;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "make_hf_model: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (a == "--layers") layers = value();
    else if (a == "--8b") big = true;
    else if (a == "--head-dim") head_dim = value();
    else if (a == "--shards") s.shards = static_cast<int>(value());
    else if (a == "--seed") s.seed = static_cast<uint64_t>(value());
    else if (a == "--awq" || a == "--gptq") {
      quant.emplace();
      quant->format = a == "--awq" ? lj::testing::QuantSpec::Format::Awq : lj::testing::QuantSpec::Format::Gptq;
      quant->group = value();
    } else if (a == "--ref") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "make_hf_model: --ref needs a value\n");
        return 2;
      }
      ref = argv[++i];
    }
    else {
      std::fprintf(stderr, "make_hf_model: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const int shards = s.shards;
  const uint64_t seed = s.seed;
  if (family == "llama" || family == "llama-tied") s = lj::testing::tiny_spec(Architecture::Llama);
  else if (family == "mistral") s = lj::testing::tiny_spec(Architecture::Mistral);
  else if (family == "qwen2") s = lj::testing::tiny_spec(Architecture::Qwen2);
  else if (family == "qwen3") s = lj::testing::tiny_spec(Architecture::Qwen3);
  else {
    std::fprintf(stderr, "make_hf_model: unknown family %s\n", family.c_str());
    return 2;
  }
  if (quant) {
    const lj::testing::HfModelSpec base = s;
    s = lj::testing::quant_tiny_spec(base.arch);
  }
  if (big) s = lj::testing::llama3_8b_spec(2);
  if (family == "llama-tied") {
    s.tied = true;
    s.llama3_rope = false;
  }
  s.shards = shards;
  s.seed = seed;
  if (layers > 0) s.layers = layers;
  if (head_dim > 0) s.head_dim = head_dim;
  try {
    if (quant) lj::testing::write_quantized_hf_model(dir, ref.empty() ? dir + "-ref" : ref, s, *quant);
    else lj::testing::write_hf_model(dir, s);
  } catch (const lj::UserError& e) {
    std::fprintf(stderr, "make_hf_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
