// Attention at Llama-3-8B head counts (32 query heads, 8 KV heads, head_dim 128, bf16):
//   prefill, B=1, causal, S in {2048, 8192}: TFLOP/s counting the causal half of the score matrix
//   (4 * S * S * D * Hq / 2 FLOPs: QK^T and PV, two FLOPs per multiply-add);
//   decode, one token per sequence over a full 4096-token cache, B in {1, 32}: GB/s of K and V read
//   (2 * B * C * Hkv * D * 2 bytes), the cost that bounds it.
// Each case is one fusion group timed with CUDA events (median of 30 repeats after 5 warm-ups); the
// decode caches are rotated through enough copies that no repeat finds them in L2. bench/attention/
// sdpa.py times PyTorch's scaled_dot_product_attention on the same shapes for the ratio.
// On Hopper the wgmma prefill kernel (the sm_90a default) is timed first, then the mma.sync default;
// `--sweep` also times both families with other tile configs; `--sweep-decode` times the decode kernel's
// tile sets (the autotuner's decode candidates) instead of the prefill cases.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/plan_runner.h"
#include "codegen/attention_plan.h"
#include "layerjit/text.h"

using namespace lj;
using namespace lj::bench;

namespace {

Graph parse_one(const std::string& text) {
  Module m = parse_module(text, "bench_attention");
  return std::move(m.graphs.at(0));
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "bench_attention";
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!mode.empty() && mode != "--sweep" && mode != "--sweep-decode") {
    std::fprintf(stderr, "usage: bench_attention [--sweep | --sweep-decode]\n");
    return 2;
  }
  const bool sweep = mode == "--sweep";
  const bool sweep_decode = mode == "--sweep-decode";  // the decode kernel's tile sets only
  rt::Context* ctx_p = context_or_skip();
  if (!ctx_p) return 77;
  rt::Context& ctx = *ctx_p;
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");
  std::printf("device: %s\n\n", ctx.info().name.c_str());
  std::printf("| case | kernel | time (ms) | TFLOP/s | GB/s |\n|------|--------|-----------|---------|------|\n");

  const Graph prefill = parse_one(R"(
graph @prefill(%q: bf16[T, 32, 128], %k: bf16[T, 8, 128], %v: bf16[T, 8, 128]) {
  %o = attention(%q, %k, %v) {causal = true}
  return %o
})");
  // The sm_90a default (wgmma) where the device is Hopper, then the mma.sync default; --sweep adds
  // the other tile configs of both families.
  const bool hopper = ctx.info().cc() == 90;
  std::vector<AttentionConfig> configs;
  if (hopper) configs.push_back(AttentionConfig::hopper());
  configs.push_back(AttentionConfig{});
  if (sweep) {
    for (AttentionConfig c : {AttentionConfig{128, 2, 32, 2}, AttentionConfig{128, 2, 32, 3}, AttentionConfig{128, 1, 64, 2},
                              AttentionConfig{64, 1, 64, 2}, AttentionConfig{64, 1, 64, 3}, AttentionConfig{64, 2, 64, 2},
                              AttentionConfig{64, 2, 32, 3}, AttentionConfig{128, 1, 32, 3}})
      configs.push_back(c);
    if (hopper)
      for (AttentionConfig c : {AttentionConfig{128, 1, 64, 2, true}, AttentionConfig{128, 1, 64, 4, true},
                                AttentionConfig{128, 1, 128, 3, true}})
        configs.push_back(c);
  }
  for (int64_t s : {2048, 8192}) {
    if (sweep_decode) break;
    for (const AttentionConfig& cfg : configs) {
      Bindings b;
      b.set("T", s);
      EmitOptions eo;
      eo.sm = ctx.info().cc();
      eo.arch_specific = cfg.wgmma;
      eo.attention = cfg;
      std::map<ValueId, rt::DeviceBuffer> pool;
      std::vector<PlanRun> runs;
      runs.push_back(prepare(ctx, stream, prefill, plan_fusion(prefill), b, pool, &eo));
      const double ms = time_plan(stream, runs);
      const double flops = 4.0 * static_cast<double>(s) * static_cast<double>(s) * 128 * 32 / 2;
      std::printf("| prefill B=1 S=%lld causal | flash prefill %s | %.4f | %.1f | |\n", static_cast<long long>(s),
                  cfg.str().c_str(), ms, flops / (ms * 1e-3) / 1e12);
    }
  }

  const Graph decode = parse_one(R"(
graph @decode(%q: bf16[B, 1, 32, 128], %kc: bf16[B, C, 8, 128], %vc: bf16[B, C, 8, 128], %pos: i32[B]) {
  %o = attention(%q, %kc, %vc, %pos) {causal = true}
  return %o
})");
  const ValueId pos = decode.inputs().back();
  for (int64_t batch : {1, 32}) {
    const int64_t c = 4096;
    Bindings b;
    b.set("B", batch);
    b.set("C", c);
    const double kv_bytes = 2.0 * static_cast<double>(batch * c) * 8 * 128 * 2;
    const int rotations = rt::rotations_for(static_cast<size_t>(kv_bytes), static_cast<size_t>(ctx.info().l2_bytes));
    std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
    const std::vector<int> last(static_cast<size_t>(batch), static_cast<int>(c - 1));  // the new token fills the cache
    // The default, then with --sweep-decode every decode tile set (those the emitter refuses say why).
    std::vector<std::optional<AttentionConfig>> dconfigs{std::nullopt};
    if (sweep_decode)
      for (const AttentionConfig& dc : decode_attention_candidates()) dconfigs.push_back(dc);
    for (const std::optional<AttentionConfig>& dc : dconfigs) {
      EmitOptions eo;
      eo.sm = ctx.info().cc();
      eo.hint = b;
      eo.attention = dc;
      std::vector<PlanRun> runs;
      try {
        for (auto& pool : pools) {
          runs.push_back(prepare(ctx, stream, decode, plan_fusion(decode), b, pool, &eo));
          must_ok(rt::copy_to_device(stream, pool.at(pos).ptr(), last.data(), last.size() * 4), "positions");
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "  %s: %s\n", dc->str().c_str(), e.what());
        continue;
      }
      must_ok(stream.synchronize(), "positions");
      const double ms = time_plan(stream, runs);
      std::printf("| decode B=%lld ctx=%lld | split-KV decode %s | %.4f | | %.0f |\n", static_cast<long long>(batch),
                  static_cast<long long>(c), runs[0].config.c_str(), ms, kv_bytes / (ms * 1e-3) / 1e9);
    }
    // What a plain copy of the same bytes reaches (L2-cold like the kernel): the ceiling a kernel
    // that reads this little is measured against, launch and DRAM ramp included.
    std::printf("| decode B=%lld ctx=%lld | (a copy of the same %.0f MiB) | | | %.0f |\n", static_cast<long long>(batch),
                static_cast<long long>(c), kv_bytes / (1 << 20), copy_gbps(ctx, stream, static_cast<size_t>(kv_bytes / 2) / 16 * 16));
    // A kernel that only reads them: the ceiling for a kernel whose output is a few KiB.
    std::printf("| decode B=%lld ctx=%lld | (a read of the same %.0f MiB) | | | %.0f |\n", static_cast<long long>(batch),
                static_cast<long long>(c), kv_bytes / (1 << 20), read_gbps(ctx, stream, static_cast<size_t>(kv_bytes) / 16 * 16));
  }
  return 0;
}
