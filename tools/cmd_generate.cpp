// `layerjit generate MODEL_DIR --ids 1,2,3 [--new N] [--cpu] [--logits-out FILE]`: greedy
// generation over a Hugging Face model (models/generate.h). Token ids in, token ids out.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "exec/safetensors.h"
#include "layerjit/check.h"
#include "models/device_model.h"
#include "models/tp_model.h"
#include "models/generate.h"
#include "runtime/context.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/tp_report.h"

namespace lj::cli {

const char* const kGenerateUsage =
    "usage: layerjit generate MODEL_DIR --ids ID,ID,... [--new N] [--cpu] [--no-graphs] [--logits-out FILE.safetensors]\n"
    "                         [--tp N]\n"
    "\n"
    "Greedy generation over a Hugging Face model directory (config.json and model.safetensors, or shards with\n"
    "model.safetensors.index.json; Llama, Mistral, Qwen2 and Qwen3 architectures): the prompt's token ids run\n"
    "through every layer at once, then N - 1 decode steps over the KV caches. Prints the N new token ids and the\n"
    "time per step. The ids are the tokenizer's (layerjit has none): e.g. tokenizer.encode(text) in Python. On the GPU\n"
    "every layer shares one set of compiled kernels, and each decode step after the first is one CUDA-graph replay.\n"
    "--cpu runs the model through the CPU reference (small models; no GPU needed). --logits-out writes the\n"
    "logits of every step as one f32 tensor `logits` [N, vocab] (row 0: the logits after the prompt).\n"
    "--tp N: tensor parallelism over GPUs 0..N-1 (docs/tp.md): every layer sharded, each GPU holding its share\n"
    "of the weights (cut from the checkpoint as they are uploaded) and of the KV caches, NCCL between them; the\n"
    "embedding and the head run whole on every GPU. Refused with the reason where the heads or widths do not\n"
    "divide by N. With --cpu, the CPU reference runs every layer sharded over N ranks (the all-reduces on the\n"
    "host): the same computation without GPUs, to check a model shards.\n";

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      throw UsageError{fmt::format("--ids expects comma-separated token ids, got '{}'", item)};
    ids.push_back(v);
  }
  if (ids.empty()) throw UsageError{"--ids expects comma-separated token ids (e.g. --ids 128000,791,6864)"};
  return ids;
}

int64_t parse_count(const std::string& text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1)
    throw UsageError{fmt::format("--new expects a positive number of tokens, got '{}'", text)};
  return v;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args) {
  std::optional<std::string> dir, ids_text, logits_out;
  std::string new_text = "8";
  bool cpu = false, no_graphs = false;
  CommandLine cl("generate", kGenerateUsage);
  cl.positional("MODEL_DIR", dir, "a Hugging Face model directory", /*required=*/true);
  cl.option("--ids", ids_text, "ID,ID,...", "the prompt's token ids");
  cl.option("--new", new_text, "N", "how many tokens to generate (default 8)");
  cl.flag("--cpu", cpu, "run the CPU reference (small models; no GPU needed)");
  cl.flag("--no-graphs", no_graphs, "launch every decode step's kernels one by one instead of replaying a CUDA graph");
  cl.option("--logits-out", logits_out, "FILE", "write every step's logits as f32 `logits` [N, vocab] (safetensors)");
  int tp = 1;
  cl.option("--tp", [&tp](const std::string& v) { tp = parse_tp(v); }, "N", "tensor parallelism over N GPUs (1-64)");
  if (!cl.parse(args)) return kExitOk;
  const bool graphs = !no_graphs;
  if (!ids_text) throw UsageError{"--ids is required (the prompt's token ids)"};
  const std::vector<int32_t> prompt = parse_ids(*ids_text);
  models::GenerateOptions opts;
  opts.new_tokens = parse_count(new_text);
  opts.keep_logits = logits_out.has_value();

  const models::Model m = models::Model::open(*dir);
  const models::ModelConfig& c = m.config();
  models::check_generate_request(c, prompt, opts.new_tokens);
  std::printf("model: %s (%.*s, %lld layers, hidden %lld, %lld/%lld heads of %lld, vocab %lld, %s)\n", c.layer.name.c_str(),
              static_cast<int>(architecture_name(c.architecture).size()), architecture_name(c.architecture).data(),
              static_cast<long long>(c.n_layers), static_cast<long long>(c.layer.hidden), static_cast<long long>(c.layer.n_heads),
              static_cast<long long>(c.layer.n_kv_heads), static_cast<long long>(c.layer.head_dim), static_cast<long long>(c.vocab),
              std::string(dtype_name(c.layer.dtype)).c_str());
  const std::vector<std::string> unused = m.unused_tensors();
  if (!unused.empty()) {
    std::string list;
    for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
    if (unused.size() > 5) list += fmt::format(", ... ({} more)", unused.size() - 5);
    std::fprintf(stderr, "note: %zu checkpoint tensor%s not used by the model: %s\n", unused.size(), unused.size() == 1 ? " is" : "s are",
                 list.c_str());
  }
  models::GenerateResult r;
  if (cpu) {
    r = models::generate_reference(m, prompt, opts, tp);
    std::printf("prompt: %zu tokens; generated %zu (CPU reference%s)\n", prompt.size(), r.tokens.size(),
                tp > 1 ? fmt::format(", every layer sharded over {} ranks", tp).c_str() : "");
  } else if (tp > 1) {
    models::TpModelOptions topts;
    topts.tp = tp;
    topts.model.capacity = static_cast<int64_t>(prompt.size()) + opts.new_tokens;
    topts.model.graphs = graphs;
    auto tm = models::TpModel::open(m, topts);
    LJ_CHECK(tm.ok(), SourceLoc{}, "{}", tm.ok() ? "" : tm.message());
    auto gr = (*tm)->generate(prompt, opts);
    LJ_CHECK(gr.ok(), SourceLoc{}, "{}", gr.ok() ? "" : gr.message());
    r = std::move(*gr);
    std::printf("prompt: %zu tokens; generated %zu on %d GPUs (tp = %d: %zu kernels and NCCL calls per decode step on each%s; "
                "compiled in %.2f s)\n",
                prompt.size(), r.tokens.size(), tp, tp, (*tm)->launches_per_decode_step(), graphs ? ", one CUDA graph per GPU" : "",
                (*tm)->compile_seconds());
  } else {
    auto ctx = rt::Context::get(0);
    LJ_CHECK(ctx.ok(), SourceLoc{}, "{} (generate --cpu runs the CPU reference without a GPU)", ctx.ok() ? "" : ctx.message());
    models::DeviceModelOptions dopts;
    dopts.capacity = static_cast<int64_t>(prompt.size()) + opts.new_tokens;
    dopts.graphs = graphs;
    auto dm = models::DeviceModel::open(**ctx, m, dopts);
    LJ_CHECK(dm.ok(), SourceLoc{}, "{}", dm.ok() ? "" : dm.message());
    auto gr = dm->generate(prompt, opts);
    LJ_CHECK(gr.ok(), SourceLoc{}, "{}", gr.ok() ? "" : gr.message());
    r = std::move(*gr);
    std::printf("prompt: %zu tokens; generated %zu on %s (%zu kernels per decode step%s; compiled in %.2f s)\n", prompt.size(),
                r.tokens.size(), (*ctx)->info().name.c_str(), dm->launches_per_decode_step(), graphs ? ", one CUDA graph" : "",
                dm->compile_seconds());
  }
  std::printf("tokens: %s\n", join_ids(r.tokens).c_str());
  std::vector<double> decode(r.step_ms.begin() + 1, r.step_ms.end());
  std::printf("time: prefill %.2f ms", r.step_ms[0]);
  if (!decode.empty()) std::printf(", decode %.2f ms per step (median of %zu)", median(decode), decode.size());
  std::printf("\n");
  if (logits_out) {
    exec::write_safetensors(*logits_out, {{"logits", r.logits}});
    std::printf("logits: %s (f32 [%lld, %lld])\n", logits_out->c_str(), static_cast<long long>(r.logits.shape[0]),
                static_cast<long long>(r.logits.shape[1]));
  }
  return kExitOk;
}

}  // namespace lj::cli
