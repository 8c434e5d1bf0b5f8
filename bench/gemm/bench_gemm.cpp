// Matmul kernels against cuBLASLt in the same run: the Llama-3-8B projections (qkv 6144x4096, o
// 4096x4096, gate_up 28672x4096, down 4096x14336) at M in {1, 16, 128, 4096} rows and the square
// 8192^3 GEMM ("cube", M = 8192), bf16 in and out,
// fp32 accumulation. Both libraries multiply the same buffers; inputs are rotated through enough
// copies that no repeat finds its weight in L2. Reports time, TFLOP/s, GB/s (x + W + y bytes once)
// and the ratio cuBLAS time / layerjit time (> 1: layerjit faster). Then the fused epilogues: the
// Llama MLP and the o projection + residual, fused plan against matmuls with separate epilogue kernels.
//
// --shape NAME / --m ROWS: only that shape / row count (for profiling one kernel).
// --sweep: also times every config the pruner accepts at M = 16, 128 and 4096 and reports the best
// (what the autotuner would find), so the default config can be judged against it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/common/plan_runner.h"
#include "bench/gemm/cublas_gemm.h"
#include "bench/gemm/gemm_bench_args.h"
#include "bench/gemm/mma_peak.h"
#include "layerjit/text.h"
#include "runtime/fill.h"

using namespace lj;
using namespace lj::bench;

namespace {

struct GemmShape {
  const char* name;
  int64_t n, k;
};

Graph matmul_graph(const GemmShape& s) {
  Module m = parse_module(fmt::format("graph @{}(%x: bf16[M, {}], %w: param bf16[{}, {}]) {{\n  %y = matmul(%x, %w)\n  return %y\n}}\n",
                                      s.name, s.k, s.n, s.k),
                          "bench_gemm");
  return std::move(m.graphs.at(0));
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "bench_gemm";
  GemmBenchArgs args;
  if (!parse_gemm_bench_args(argc, argv, "qkv|o|gate_up|down|cube", args)) return 2;
  const bool sweep = args.sweep;
  const char* only_shape = args.shape;
  const int64_t only_m = args.m;
  const std::vector<MatmulConfig>& extra = args.extra;
  rt::Context* ctx_p = context_or_skip();
  if (!ctx_p) return 77;
  rt::Context& ctx = *ctx_p;
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");
  std::printf("device: %s (%d SMs)\n\n", ctx.info().name.c_str(), ctx.info().sm_count);
  std::printf("| GEMM | M | layerjit config | layerjit ms | TFLOP/s | GB/s | cuBLASLt ms | TFLOP/s | GB/s | cuBLAS / layerjit time |\n");
  std::printf("|------|---|-----------------|-------------|---------|------|-------------|---------|------|------------------------|\n");
  // The Llama projections, and the square 8192^3 GEMM issue 9 names (at M = 8192 only).
  const GemmShape shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"cube", 8192, 8192}};
  std::vector<std::string> sweep_lines;
  for (const GemmShape& s : shapes) {
    if (only_shape && std::strcmp(only_shape, s.name) != 0) continue;
    const Graph g = matmul_graph(s);
    const FusionPlan plan = plan_fusion(g);
    // --m picks any row count (e.g. 32, decode at B = 32), else the four of the issue.
    const bool cube = std::strcmp(s.name, "cube") == 0;
    const std::vector<int64_t> rows = only_m ? std::vector<int64_t>{only_m}
                                      : cube ? std::vector<int64_t>{8192}
                                             : std::vector<int64_t>{1, 16, 128, 4096};
    for (int64_t m : rows) {
      Bindings b;
      b.set("M", m);
      const double bytes = 2.0 * static_cast<double>(m * s.k + s.n * s.k + m * s.n);
      const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      const int rotations = rt::rotations_for(static_cast<size_t>(bytes), static_cast<size_t>(ctx.info().l2_bytes));
      std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
      const EmitOptions eo = device_emit_options(ctx);  // sm_90a: the wgmma GEMM
      MatmulProblem p = matmul_problem(g, plan.groups[0], [&] { EmitOptions e = eo; e.hint = b; return e; }());
      // The default config, and where that is the Hopper GEMM also the mma.sync default it replaced.
      std::vector<MatmulConfig> timed{default_matmul_config(p)};
      if (timed[0].family == MatmulConfig::Family::Wgmma) {
        MatmulProblem plain = p;
        plain.arch_specific = false;
        timed.push_back(default_matmul_config(plain));
      }
      for (const MatmulConfig& c : extra) {
        const std::string why = reject_reason(c, p);
        if (!why.empty()) {
          std::fprintf(stderr, "  --config %s does not apply to %s M=%lld: %s\n", c.str().c_str(), s.name,
                       static_cast<long long>(m), why.c_str());
        } else {
          timed.push_back(c);
        }
      }
      std::vector<double> times;
      std::vector<std::vector<PlanRun>> config_runs;  // kept for the back-to-back rows at M <= 16
      for (const MatmulConfig& c : timed) {
        EmitOptions ec = eo;
        ec.matmul = c;
        std::vector<PlanRun> runs;
        for (auto& pool : pools) runs.push_back(prepare(ctx, stream, g, plan, b, pool, &ec));
        times.push_back(time_plan(stream, runs));
        config_runs.push_back(std::move(runs));
      }

      // cuBLASLt over the same buffers (operands in parameter order: x, w, y).
      CublasGemm cublas(ctx, m, s.n, s.k);
      const ValueId x = g.inputs()[0], w = g.inputs()[1], y = g.outputs()[0];
      auto cublas_ms = [&](int batch) {
        return median_ms_per_run(stream, rotations, batch, 5, 30, [&](int r) {
          auto& pool = pools[static_cast<size_t>(r)];
          return cublas.run(stream, pool.at(x).ptr(), pool.at(w).ptr(), pool.at(y).ptr());
        });
      };
      const double cms = cublas_ms(1);
      for (size_t i = 0; i < timed.size(); ++i) {
        const double ms = times[i];
        std::printf("| %s %lldx%lld | %lld | %s | %.4f | %.1f | %.0f | %.4f | %.1f | %.0f | %.2f |\n", s.name,
                    static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m), timed[i].str().c_str(), ms,
                    flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9, cms, flops / (cms * 1e-3) / 1e12,
                    bytes / (cms * 1e-3) / 1e9, cms / ms);
      }
      if (m >= 4096) {
        // The mma.sync rows are held to what the instruction delivers on this device at all, and at
        // the 8 warps per SM the 128 x 128 default runs (two CTAs of 4 warps).
        static const MmaPeak peak = mma_sync_peak(ctx, stream);
        std::string by;
        for (const auto& [warps, tf] : peak.by_warps) by += fmt::format("{}{} warps/SM {:.0f}", by.empty() ? "" : ", ", warps, tf);
        std::printf("| %s %lldx%lld | %lld | (mma.sync m16n8k16 alone, no memory: %.1f TFLOP/s (%s); 0.60x cuBLAS is %.0f %% of it) | | | | | | | |\n",
                    s.name, static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m), peak.best, by.c_str(),
                    100.0 * 0.60 * flops / (cms * 1e-3) / 1e12 / peak.best);
      }
      if (m <= 16) {
        // At decode sizes the GEMM streams W once: a kernel that only reads the same bytes, timed the
        // same way, is the ceiling its GB/s is held to (launch, DRAM ramp and drain included).
        const double rg = read_gbps(ctx, stream, static_cast<size_t>(bytes) / 16 * 16);
        std::printf("| %s %lldx%lld | %lld | (a read of the same %.0f MiB) | %.4f | | %.0f | | | | |\n", s.name, static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(m), bytes / (1 << 20), bytes / (rg * 1e9) * 1e3, rg);
        // The same three timed kBatch launches back to back per sample, each on its own copy of the
        // operands: what a decode step's stream of kernels sees, with no event between them (but no
        // overlap either: one kernel still ends before the next begins).
        constexpr int kBatch = 20;
        const double bcms = cublas_ms(kBatch);
        const double brg = read_gbps(ctx, stream, static_cast<size_t>(bytes) / 16 * 16, kBatch);
        for (size_t i = 0; i < timed.size(); ++i) {
          const double bms = time_plan(stream, config_runs[i], kBatch);
          std::printf("| %s %lldx%lld | %lld | %s, %d back to back | %.4f | %.1f | %.0f | %.4f | %.1f | %.0f | %.2f |\n", s.name,
                      static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m), timed[i].str().c_str(), kBatch,
                      bms, flops / (bms * 1e-3) / 1e12, bytes / (bms * 1e-3) / 1e9, bcms, flops / (bcms * 1e-3) / 1e12,
                      bytes / (bcms * 1e-3) / 1e9, bcms / bms);
        }
        std::printf("| %s %lldx%lld | %lld | (a read of the same %.0f MiB, %d back to back) | %.4f | | %.0f | | | | |\n", s.name,
                    static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(m), bytes / (1 << 20), kBatch,
                    bytes / (brg * 1e9) * 1e3, brg);
      }
      std::fflush(stdout);

      if (sweep && m > 1) {
        double best = 1e30;
        std::string best_cfg;
        for (const MatmulConfig& c : matmul_candidates(p)) {
          if (c.family != timed[0].family) continue;  // the default's family (on sm_90a at M = 4096: wgmma)
          EmitOptions ec = eo;
          ec.matmul = c;
          std::vector<PlanRun> cruns;
          for (auto& pool : pools) cruns.push_back(prepare(ctx, stream, g, plan, b, pool, &ec));
          const double cm = time_plan(stream, cruns);
          std::fprintf(stderr, "  sweep %s M=%lld %s: %.4f ms, %.1f TFLOP/s\n", s.name, static_cast<long long>(m), c.str().c_str(), cm,
                       flops / (cm * 1e-3) / 1e12);
          if (cm < best) best = cm, best_cfg = c.str();
        }
        sweep_lines.push_back(fmt::format("| {} | {} | {} | {:.4f} | {:.1f} | {:.2f} |", s.name, m, best_cfg, best,
                                          flops / (best * 1e-3) / 1e12, cms / best));
      }
    }
  }
  // Epilogue fusion: the Llama-3-8B MLP (gate/up projection, SwiGLU, down projection, residual add)
  // and the attention output projection with its residual add, each as the fused plan (epilogues in
  // the matmul kernels) against the plan that keeps matmuls alone (SwiGLU and the adds as kernels of
  // their own), over the same buffers.
  if (!only_shape) {
    Module mods = parse_module(R"(
graph @mlp(%x: bf16[M, 4096], %w_gate_up: param bf16[28672, 4096], %w_down: param bf16[4096, 14336]) {
  %gate_up = matmul(%x, %w_gate_up)
  %gate, %up = split(%gate_up) {axis = 1, sizes = [14336, 14336]}
  %gate_act = silu(%gate)
  %act = mul(%gate_act, %up)
  %down = matmul(%act, %w_down)
  %out = add(%x, %down)
  return %out
}
graph @o_residual(%attn: bf16[M, 4096], %x: bf16[M, 4096], %w_o: param bf16[4096, 4096]) {
  %o = matmul(%attn, %w_o)
  %h = add(%x, %o)
  return %h
}
)",
                               "bench_gemm");
    std::printf("\nEpilogue fusion (same buffers, default configs):\n\n");
    std::printf("| graph | M | fused: kernels | ms | separate epilogues: kernels | ms | separate / fused time |\n");
    std::printf("|-------|---|----------------|----|-----------------------------|----|-----------------------|\n");
    for (const Graph& g : mods.graphs) {
      for (int64_t m : {int64_t{1}, int64_t{16}, int64_t{4096}}) {
        if (only_m && m != only_m) continue;
        Bindings b;
        b.set("M", m);
        const EmitOptions eo = device_emit_options(ctx);
        double ms[2];
        size_t kernels[2];
        for (int fused = 1; fused >= 0; --fused) {
          FusionOptions fo;
          fo.matmul_epilogues = fused == 1;
          const FusionPlan plan = plan_fusion(g, fo);
          double bytes = 0;
          for (const FusionGroup& grp : plan.groups) bytes += group_cost(g, grp, b).bytes;
          const int rotations = rt::rotations_for(static_cast<size_t>(bytes), static_cast<size_t>(ctx.info().l2_bytes));
          std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
          std::vector<PlanRun> runs;
          for (auto& pool : pools) runs.push_back(prepare(ctx, stream, g, plan, b, pool, &eo));
          ms[fused] = time_plan(stream, runs);
          kernels[fused] = plan.groups.size();
        }
        std::printf("| %s | %lld | %zu | %.4f | %zu | %.4f | %.2f |\n", g.name().c_str(), static_cast<long long>(m), kernels[1], ms[1],
                    kernels[0], ms[0], ms[0] / ms[1]);
        std::fflush(stdout);
        // The fused plan again with each --config for its matmuls, against the same separate plan.
        for (const MatmulConfig& c : m == 4096 ? extra : std::vector<MatmulConfig>{}) {
          EmitOptions ec = eo;
          ec.matmul = c;
          const FusionPlan plan = plan_fusion(g);
          double bytes = 0;
          for (const FusionGroup& grp : plan.groups) bytes += group_cost(g, grp, b).bytes;
          const int rotations = rt::rotations_for(static_cast<size_t>(bytes), static_cast<size_t>(ctx.info().l2_bytes));
          std::vector<std::map<ValueId, rt::DeviceBuffer>> pools(static_cast<size_t>(rotations));
          std::vector<PlanRun> runs;
          try {
            for (auto& pool : pools) runs.push_back(prepare(ctx, stream, g, plan, b, pool, &ec));
          } catch (const std::exception& e) {
            std::fprintf(stderr, "  --config %s on @%s: %s\n", c.str().c_str(), g.name().c_str(), e.what());
            continue;
          }
          const double cm = time_plan(stream, runs);
          std::printf("| %s (%s) | %lld | %zu | %.4f | %zu | %.4f | %.2f |\n", g.name().c_str(), c.str().c_str(), static_cast<long long>(m),
                      plan.groups.size(), cm, kernels[0], ms[0], ms[0] / cm);
          std::fflush(stdout);
        }
      }
    }
  }
  if (sweep) {
    std::printf("\nBest pruned config per shape (--sweep):\n\n| GEMM | M | best config | ms | TFLOP/s | cuBLAS / best time |\n|---|---|---|---|---|---|\n");
    for (const auto& l : sweep_lines) std::printf("%s\n", l.c_str());
  }
  return 0;
}
