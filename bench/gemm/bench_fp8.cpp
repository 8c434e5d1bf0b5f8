// The fp8 GEMM (e4m3 x e4m3 -> bf16, fp32 accumulation on the tensor cores) against cuBLASLt's fp8
// GEMM in the same run, the library torch._scaled_mm calls: 8192^3 and the Llama-3-8B projections
// at M = 1 (decode: bytes per second matter, printed for --config candidates), 128 and 4096. Per case:
//   - layerjit's default config on `matmul(%x, %w)` (scales of 1);
//   - layerjit with the scales as a quantized model has them (a per-token row scale, a per-channel
//     weight scale on the f32 sums, one rounding to bf16), to show what they cost;
//   - cuBLASLt fp8 with fast accumulation off (its default and torch._scaled_mm's) and on (as
//     layerjit accumulates), scales of 1 (alpha);
//   - cuBLASLt bf16 at the same shape, for what fp8 gains.
// Inputs rotate through copies so that no repeat finds its operands in L2.
//
// --sweep: also every Hopper config the pruner accepts for the plain GEMM, the best reported.
// --shape NAME / --m ROWS: only that shape / row count. --config CONFIG: timed beside the default.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/common/plan_runner.h"
#include "bench/gemm/cublas_gemm.h"
#include "bench/gemm/gemm_bench_args.h"
#include "layerjit/text.h"
#include "runtime/fill.h"

using namespace lj;
using namespace lj::bench;

namespace {

struct Case {
  const char* name;
  int64_t m, n, k;
};

Graph plain_graph(const Case& c) {
  Module m = parse_module(fmt::format("graph @fp8_{}(%x: f8e4m3[M, {}], %w: param f8e4m3[{}, {}]) {{\n  %y = matmul(%x, %w)\n  return %y\n}}\n",
                                      c.name, c.k, c.n, c.k),
                          "bench_fp8");
  return std::move(m.graphs.at(0));
}

Graph scaled_graph(const Case& c) {
  Module m = parse_module(fmt::format(R"(graph @fp8_scaled_{}(%x: f8e4m3[M, {}], %w: param f8e4m3[{}, {}], %xs: f32[M], %ws: param f32[{}]) {{
  %acc = matmul(%x, %w, %xs) {{out_dtype = f32}}
  %y = mul(%acc, %ws)
  %o = cast(%y) {{dtype = bf16}}
  return %o
}}
)",
                                      c.name, c.k, c.n, c.k, c.n),
                          "bench_fp8");
  return std::move(m.graphs.at(0));
}

// Median ms of one graph's plan over `rotations` copies of its buffers, with config `c` (nullptr:
// the default).
double time_graph(rt::Context& ctx, rt::Stream& stream, const Graph& g, const Bindings& b, int rotations, const MatmulConfig* c) {
  EmitOptions eo = device_emit_options(ctx);
  if (c) eo.matmul = *c;
  const FusionPlan plan = plan_fusion(g);
  std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
  std::vector<PlanRun> runs;
  for (auto& pool : pools) runs.push_back(prepare(ctx, stream, g, plan, b, pool, &eo));
  return time_plan(stream, runs);
}

// Median ms of cuBLASLt for each of `opts` (one operand dtype), over the same buffers.
std::vector<double> time_cublas(rt::Context& ctx, rt::Stream& stream, const Case& c, const std::vector<CublasOptions>& opts, int rotations) {
  const CublasOptions& o = opts.at(0);
  const int64_t eb = dtype_bytes(o.operands);
  struct Bufs {
    rt::DeviceBuffer x, w, y;
  };
  std::vector<Bufs> bufs;
  for (int r = 0; r < rotations; ++r) {
    Bufs b{must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(c.m * c.k * eb)), "x"),
           must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(c.n * c.k * eb)), "w"),
           must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(c.m * c.n * 2)), "y")};
    // The fp8 codes of uniform values (no NaN codes), as layerjit's operands get.
    must_ok(rt::fill_random_encoded(stream, b.x.ptr(), static_cast<size_t>(c.m * c.k), o.operands, 77 + static_cast<uint64_t>(r), -1.f, 1.f), "fill x");
    must_ok(rt::fill_random_encoded(stream, b.w.ptr(), static_cast<size_t>(c.n * c.k), o.operands, 99 + static_cast<uint64_t>(r), -1.f, 1.f), "fill w");
    bufs.push_back(std::move(b));
  }
  rt::TimerOptions to;
  to.warmup = 5;
  to.repeats = 30;
  to.rotations = rotations;
  std::vector<double> ms;
  for (const CublasOptions& each : opts) {
    CublasGemm gemm(ctx, c.m, c.n, c.k, each);
    auto t = must(rt::time_on_stream(stream, [&](int r) {
                    Bufs& b = bufs[static_cast<size_t>(r)];
                    return gemm.run(stream, b.x.ptr(), b.w.ptr(), b.y.ptr());
                  }, to),
                  "time cuBLASLt");
    ms.push_back(t.median_ms);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "bench_fp8";
  GemmBenchArgs args;
  if (!parse_gemm_bench_args(argc, argv, "cube|qkv|o|gate_up|down", args)) return 2;
  rt::Context* ctx_p = context_or_skip();
  if (!ctx_p) return 77;
  rt::Context& ctx = *ctx_p;
  if (!device_target(ctx).arch_specific || ctx.info().cc() != 90) {
    // Not a skip of the GPU tier (77 means no driver there): nothing to measure on this GPU.
    std::printf("not run: layerjit's fp8 GEMM is the sm_90a wgmma kernel; this GPU is sm_%d\n", ctx.info().cc());
    return 0;
  }
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");
  std::printf("device: %s (%d SMs)\n\n", ctx.info().name.c_str(), ctx.info().sm_count);
  std::printf("| GEMM | M | layerjit config | layerjit ms | TFLOP/s | with scales ms | cuBLASLt fp8 ms | TFLOP/s | fast-accum ms | TFLOP/s "
              "| cuBLAS fp8 / layerjit time | cuBLASLt bf16 TFLOP/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  const Case cases[] = {{"cube", 8192, 8192, 8192},     {"qkv", 4096, 6144, 4096},   {"o", 4096, 4096, 4096},
                        {"gate_up", 4096, 28672, 4096}, {"down", 4096, 4096, 14336}, {"qkv", 128, 6144, 4096},
                        {"o", 128, 4096, 4096},         {"gate_up", 128, 28672, 4096}, {"down", 128, 4096, 14336},
                        {"qkv", 1, 6144, 4096},         {"o", 1, 4096, 4096},          {"gate_up", 1, 28672, 4096},
                        {"down", 1, 4096, 14336}};
  for (const Case& c : cases) {
    if ((args.shape && std::strcmp(args.shape, c.name) != 0) || (args.m && c.m != args.m)) continue;
    const Graph plain = plain_graph(c), scaled = scaled_graph(c);
    Bindings b;
    b.set("M", c.m);
    const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    const auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
    const double bytes = static_cast<double>(c.m * c.k + c.n * c.k + 2 * c.m * c.n);
    const int rotations = rt::rotations_for(static_cast<size_t>(bytes), static_cast<size_t>(ctx.info().l2_bytes));
    EmitOptions eo = device_emit_options(ctx);
    eo.hint = b;
    const MatmulProblem p = matmul_problem(plain, plan_fusion(plain).groups[0], eo);
    const MatmulConfig dflt = default_matmul_config(p);
    const double ms = time_graph(ctx, stream, plain, b, rotations, &dflt);
    const double sms = time_graph(ctx, stream, scaled, b, rotations, nullptr);
    CublasOptions fp8, fast;
    fp8.operands = fast.operands = DType::F8E4M3;
    fast.fast_accum = true;
    const std::vector<double> fp8_ms = time_cublas(ctx, stream, c, {fp8, fast}, rotations);
    const double cms = fp8_ms[0], fms = fp8_ms[1];
    const double bms = time_cublas(ctx, stream, c, {CublasOptions{}},
                                   rt::rotations_for(static_cast<size_t>(2 * bytes), static_cast<size_t>(ctx.info().l2_bytes)))[0];
    std::printf("| %s %lldx%lld | %lld | %s | %.4f | %.1f | %.4f | %.4f | %.1f | %.4f | %.1f | %.2f | %.1f |\n", c.name,
                static_cast<long long>(c.n), static_cast<long long>(c.k), static_cast<long long>(c.m), dflt.str().c_str(), ms, tflops(ms),
                sms, cms, tflops(cms), fms, tflops(fms), cms / ms, tflops(bms));
    std::fflush(stdout);
    std::vector<MatmulConfig> more = args.extra;
    if (args.sweep)
      for (const MatmulConfig& cand : matmul_candidates(p))
        if (cand.family == MatmulConfig::Family::Wgmma && !(cand == dflt)) more.push_back(cand);
    double best = ms;
    std::string best_cfg = dflt.str();
    for (const MatmulConfig& cand : more) {
      if (std::string why = reject_reason(cand, p); !why.empty()) {
        std::fprintf(stderr, "  %s does not apply to %s M=%lld: %s\n", cand.str().c_str(), c.name, static_cast<long long>(c.m), why.c_str());
        continue;
      }
      const double t = time_graph(ctx, stream, plain, b, rotations, &cand);
      std::fprintf(stderr, "  %s M=%lld %s: %.4f ms, %.1f TFLOP/s, %.0f GB/s\n", c.name, static_cast<long long>(c.m), cand.str().c_str(), t,
                   tflops(t), bytes / (t * 1e-3) / 1e9);
      if (t < best) best = t, best_cfg = cand.str();
    }
    if (!more.empty())
      std::printf("|   best of %zu configs | %lld | %s | %.4f | %.1f | | | | | | %.2f | |\n", more.size() + 1, static_cast<long long>(c.m),
                  best_cfg.c_str(), best, tflops(best), cms / best);
  }
  return 0;
}
