// The INT8 W8A8 GEMM (i8 x i8, exact s32 sums on the tensor cores returned as f32) against
// cuBLASLt's int8 GEMM (CUDA_R_8I operands, CUBLAS_COMPUTE_32I, int32 output) in the same run, and
// against layerjit's bf16 GEMM of the same shape (what 8-bit operands gain), on the Llama-3-8B
// projections at M = 1, 16, 128 and 4096, and 8192^3. Per case:
//   - layerjit's default config on `matmul(%x, %w) {out_dtype = f32}`: the bare sums, 4-byte outputs
//     as cuBLASLt's int32;
//   - layerjit with the scales a W8A8 model has (a per-token row scale, a per-channel weight scale,
//     one rounding to bf16), to show what they cost;
//   - cuBLASLt int8 on the same operand buffers, its int32 sums checked against layerjit's f32 sums
//     (equal below 2^24; one f32 rounding above; a difference fails the run), or why cuBLASLt
//     refused the shape;
//   - layerjit bf16, default config.
// Operands are i8 codes uniform over [-127, 127] (fill_random_operand, as the tuner's); each
// operand's checksum (sum of codes, nonzero codes) is printed, so that a zero fill shows. Inputs
// rotate through copies so that no repeat finds its operands in L2; times are medians of 30 repeats.
//
// --sweep: also every tensor-core config the pruner accepts for the bare i8 GEMM, the best reported.
// --shape NAME / --m ROWS: only that shape / row count. --config CONFIG: timed beside the default.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "bench/common/plan_runner.h"
#include "bench/gemm/gemm_bench_args.h"
#include "bench/quant/cublas_int8.h"
#include "layerjit/text.h"
#include "runtime/fill.h"

using namespace lj;
using namespace lj::bench;

namespace {

struct Case {
  const char* name;
  int64_t n, k;
};

Graph gemm_graph(const Case& c, const char* dtype, bool scaled) {
  const std::string text =
      scaled ? fmt::format("graph @w8a8_{}(%x: i8[M, {}], %w: param i8[{}, {}], %xs: f32[M], %ws: param f32[{}]) {{\n"
                           "  %acc = matmul(%x, %w, %xs) {{out_dtype = f32}}\n  %y = mul(%acc, %ws)\n"
                           "  %o = cast(%y) {{dtype = bf16}}\n  return %o\n}}\n",
                           c.name, c.k, c.n, c.k, c.n)
             : fmt::format("graph @{}_{}(%x: {}[M, {}], %w: param {}[{}, {}]) {{\n  %y = matmul(%x, %w){}\n  return %y\n}}\n", dtype,
                           c.name, dtype, c.k, dtype, c.n, c.k, std::strcmp(dtype, "i8") == 0 ? " {out_dtype = f32}" : "");
  Module m = parse_module(text, "bench_int8");
  return std::move(m.graphs.at(0));
}

// A graph's plan over `rotations` copies of its buffers (kept, so that cuBLASLt can run on them).
struct Prepared {
  std::vector<std::map<ValueId, rt::DeviceBuffer>> pools;
  std::vector<PlanRun> runs;
};

Prepared prepare_graph(rt::Context& ctx, rt::Stream& stream, const Graph& g, const Bindings& b, int rotations, const MatmulConfig* c) {
  EmitOptions eo = device_emit_options(ctx);
  if (c) eo.matmul = *c;
  const FusionPlan plan = plan_fusion(g);
  Prepared p;
  p.pools.resize(static_cast<size_t>(rotations));
  for (auto& pool : p.pools) p.runs.push_back(prepare(ctx, stream, g, plan, b, pool, &eo));
  return p;
}

double time_graph(rt::Context& ctx, rt::Stream& stream, const Graph& g, const Bindings& b, int rotations, const MatmulConfig* c) {
  Prepared p = prepare_graph(ctx, stream, g, b, rotations, c);
  return time_plan(stream, p.runs);
}

template <class T>
std::vector<T> download(rt::Stream& stream, const rt::DeviceBuffer& buf, size_t n) {
  std::vector<T> host(n);
  must_ok(rt::copy_to_host(stream, host.data(), buf.ptr(), n * sizeof(T)), "download");
  must_ok(stream.synchronize(), "download");
  return host;
}

// "sum S, Z of N nonzero": a zero (or constant) fill is visible at a glance.
std::string checksum(const std::vector<int8_t>& codes) {
  int64_t sum = 0, nonzero = 0;
  for (int8_t c : codes) sum += c, nonzero += c != 0;
  return fmt::format("sum {}, {} of {} nonzero", sum, nonzero, codes.size());
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "bench_int8";
  GemmBenchArgs args;
  if (!parse_gemm_bench_args(argc, argv, "qkv|o|gate_up|down", args)) return 2;
  rt::Context* ctx_p = context_or_skip();
  if (!ctx_p) return 77;
  rt::Context& ctx = *ctx_p;
  if (ctx.info().cc() < 80) {  // not a skip of the GPU tier (77 means no driver): nothing to measure here
    std::printf("not run: layerjit's int8 GEMM needs mma.sync m16n8k32 s8 (sm_80+); this GPU is sm_%d\n", ctx.info().cc());
    return 0;
  }
  rt::Stream stream = must(rt::Stream::create(ctx), "stream");
  std::printf("device: %s (%d SMs), target %s\n\n", ctx.info().name.c_str(), ctx.info().sm_count, device_target(ctx).name().c_str());
  std::printf("| GEMM | M | layerjit i8 config | i8 ms | TOP/s | with scales ms | cuBLASLt int8 ms | TOP/s | cuBLASLt / layerjit time "
              "| layerjit bf16 ms | bf16 / i8 time | operands x; w |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  int mismatches = 0;  // a wrong product fails the run (exit 1), whatever the times
  // The Llama projections at four row counts, and 8192^3 (the square anchor of the GEMM tables).
  const Case shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}, {"square", 8192, 8192}};
  for (const int64_t m : {8192, 4096, 128, 16, 1})
    for (const Case& c : shapes) {
      if ((args.shape && std::strcmp(args.shape, c.name) != 0) || (args.m && m != args.m)) continue;
      if ((m == 8192) != (std::strcmp(c.name, "square") == 0)) continue;  // 8192 rows for the square only
      const Graph plain = gemm_graph(c, "i8", false), scaled = gemm_graph(c, "i8", true), bf16 = gemm_graph(c, "bf16", false);
      Bindings b;
      b.set("M", m);
      const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(c.n) * static_cast<double>(c.k);
      const auto tops = [&](double ms) { return ops / (ms * 1e-3) / 1e12; };
      const double bytes = static_cast<double>(m * c.k + c.n * c.k + 4 * m * c.n);
      const int rotations = rt::rotations_for(static_cast<size_t>(bytes), static_cast<size_t>(ctx.info().l2_bytes));
      EmitOptions eo = device_emit_options(ctx);
      eo.hint = b;
      const MatmulProblem p = matmul_problem(plain, plan_fusion(plain).groups[0], eo);
      const MatmulConfig dflt = default_matmul_config(p);

      Prepared lj8 = prepare_graph(ctx, stream, plain, b, rotations, &dflt);
      const double ms = time_plan(stream, lj8.runs);
      const double sms = time_graph(ctx, stream, scaled, b, rotations, nullptr);
      const double bms = time_graph(ctx, stream, bf16, b, rt::rotations_for(static_cast<size_t>(2 * bytes), static_cast<size_t>(ctx.info().l2_bytes)),
                                    nullptr);
      // cuBLASLt on layerjit's operand buffers (graph inputs %x, %w), int32 outputs of its own.
      const ValueId x = plain.inputs().at(0), w = plain.inputs().at(1), y = plain.outputs().at(0);
      const auto xs = download<int8_t>(stream, lj8.pools[0].at(x), static_cast<size_t>(m * c.k));
      const auto ws = download<int8_t>(stream, lj8.pools[0].at(w), static_cast<size_t>(c.n * c.k));
      const std::string sums = checksum(xs) + "; " + checksum(ws);
      CublasInt8Gemm gemm(ctx, m, c.n, c.k);
      std::string cublas = "refused: " + gemm.error(), ratio = "-", cublas_tops = "-";
      if (gemm.error().empty()) {
        std::vector<rt::DeviceBuffer> out;
        for (int r = 0; r < rotations; ++r) out.push_back(must(rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(4 * m * c.n)), "y"));
        const double cms = median_ms_per_run(stream, rotations, 1, 5, 30, [&](int r) {
          auto& pool = lj8.pools[static_cast<size_t>(r)];
          return gemm.run(stream, pool.at(x).ptr(), pool.at(w).ptr(), out[static_cast<size_t>(r)].ptr());
        });
        // The same product: cuBLASLt's int32 against layerjit's f32 (one rounding of the int above 2^24).
        const auto want = download<int32_t>(stream, out[0], static_cast<size_t>(m * c.n));
        const auto got = download<float>(stream, lj8.pools[0].at(y), static_cast<size_t>(m * c.n));
        int64_t bad = 0;
        for (size_t i = 0; i < want.size(); ++i) bad += std::fabs(got[i] - want[i]) > std::fabs(static_cast<double>(want[i])) * 0x1p-24;
        cublas = bad == 0 ? fmt::format("{:.4f}", cms) : fmt::format("{:.4f} (MISMATCH: {} of {} sums differ)", cms, bad, want.size());
        cublas_tops = fmt::format("{:.1f}", tops(cms));
        ratio = fmt::format("{:.2f}", cms / ms);
        mismatches += bad != 0;
        if (bad != 0) std::fprintf(stderr, "bench_int8: %s M=%lld: layerjit's sums and cuBLASLt's differ\n", c.name, static_cast<long long>(m));
      }
      std::printf("| %s %lldx%lld | %lld | %s | %.4f | %.1f | %.4f | %s | %s | %s | %.4f | %.2f | %s |\n", c.name, static_cast<long long>(c.n),
                  static_cast<long long>(c.k), static_cast<long long>(m), dflt.str().c_str(), ms, tops(ms), sms, cublas.c_str(),
                  cublas_tops.c_str(), ratio.c_str(), bms, bms / ms, sums.c_str());
      std::fflush(stdout);

      std::vector<MatmulConfig> more = args.extra;
      if (args.sweep)
        for (const MatmulConfig& cand : matmul_candidates(p))
          if (cand.family != MatmulConfig::Family::Gemv && !(cand == dflt)) more.push_back(cand);
      double best = ms;
      std::string best_cfg = dflt.str();
      for (const MatmulConfig& cand : more) {
        if (std::string why = reject_reason(cand, p); !why.empty()) {
          std::fprintf(stderr, "  %s does not apply to %s M=%lld: %s\n", cand.str().c_str(), c.name, static_cast<long long>(m), why.c_str());
          continue;
        }
        const double t = time_graph(ctx, stream, plain, b, rotations, &cand);
        std::fprintf(stderr, "  %s M=%lld %s: %.4f ms, %.1f TOP/s, %.0f GB/s\n", c.name, static_cast<long long>(m), cand.str().c_str(), t,
                     tops(t), bytes / (t * 1e-3) / 1e9);
        if (t < best) best = t, best_cfg = cand.str();
      }
      if (!more.empty())
        std::printf("|   best of %zu configs | %lld | %s | %.4f | %.1f | | | | | | | |\n", more.size() + 1, static_cast<long long>(m),
                    best_cfg.c_str(), best, tops(best));
    }
  return mismatches == 0 ? 0 : 1;
}
