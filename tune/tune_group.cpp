#include "tune/tune_group.h"

#include "compiler/dump.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "codegen/kernel_family.h"
#include "jit/index_inputs.h"
#include "jit/compile_kernels.h"
#include "jit/target.h"
#include "jit/tuned_config.h"
#include "layerjit/error.h"
#include "runtime/cublaslt.h"
#include "runtime/fill.h"
#include "runtime/host_values.h"
#include "runtime/kernel_args.h"
#include "runtime/memory.h"
#include "runtime/module.h"
#include "tune/group_candidates.h"

namespace lj::tune {

std::string untunable_reason(const Graph& g, const FusionGroup& grp) {
  const KernelFamily* family = kernel_family(grp.kind);
  if (!family || !family->tunable())
    return fmt::format("group {} is a {} group: only matmul and attention groups have configs to tune", grp.id, group_kind_name(grp.kind));
  return family->reject_reason(g, grp, EmitOptions{});
}

bool outputs_agree(DType t, double abs_tol, double rel_tol, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got,
                   std::string* why) {
  const size_t eb = static_cast<size_t>(dtype_bytes(t));
  if (want.size() != got.size()) {
    if (why) *why = fmt::format("{} bytes where the default config gives {}", got.size(), want.size());
    return false;
  }
  // Identical bits agree, poison included: a cache written in place keeps its unwritten entries.
  // Only elements whose bytes differ are decoded: the decode KV caches are 512 MiB at B = 32, and
  // decoding every element of every candidate's took the QKV group's verification past two minutes.
  for (size_t at = 0;;) {
    const auto first = std::mismatch(want.begin() + static_cast<std::ptrdiff_t>(at), want.end(), got.begin() + static_cast<std::ptrdiff_t>(at)).first;
    if (first == want.end()) return true;
    const size_t i = static_cast<size_t>(first - want.begin()) / eb;  // the element holding the first differing byte
    const double a = rt::decode_element(t, want.data() + i * eb), b = rt::decode_element(t, got.data() + i * eb);
    if (std::isnan(b) || !(std::fabs(a - b) <= abs_tol + rel_tol * std::fabs(a))) {
      if (why) *why = fmt::format("element {}: {} where the default config gives {}", i, b, a);
      return false;
    }
    at = (i + 1) * eb;
  }
}

namespace {

// cuBLASLt's bare GEMM at the matmul's sizes over fresh random operands rotated past L2, timed as
// the candidates are (settings' timer): the reference `layerjit tune` prints beside the winner.
rt::Result<double> time_reference(rt::Stream& stream, const MatmulProblem& p, const rt::TimerOptions& timer) {
  const rt::Context& ctx = stream.context();
  LJ_RT_ASSIGN(rt::CublasLtGemm gemm, rt::CublasLtGemm::create(ctx, p.dtype, p.m, p.n, p.k));
  const size_t eb = static_cast<size_t>(dtype_bytes(p.dtype));
  const size_t xb = static_cast<size_t>(p.m * p.k) * eb, wb = static_cast<size_t>(p.n * p.k) * eb,
               yb = static_cast<size_t>(p.m * p.n * dtype_bytes(gemm.output_dtype()));
  const int rotations = rt::rotations_for(xb + wb + yb, static_cast<size_t>(ctx.info().l2_bytes));
  std::vector<rt::DeviceBuffer> bufs;
  for (int r = 0; r < rotations; ++r)
    for (size_t bytes : {xb, wb, yb}) {
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, (bytes + 3) / 4 * 4));
      // Random bits as bf16 pairs: finite values for 16-bit operands; fp8 bytes of every kind.
      LJ_RT_TRY(rt::fill_random_bf16(stream, buf.ptr(), buf.bytes() / 2, 104729 + 31 * bufs.size(), -1.f, 1.f));
      bufs.push_back(std::move(buf));
    }
  rt::TimerOptions opts = timer;
  opts.rotations = rotations;
  LJ_RT_ASSIGN(rt::Timing t, rt::time_on_stream(stream, [&](int r) {
    const size_t at = static_cast<size_t>(r) * 3;
    return gemm.run(stream, bufs[at].ptr(), bufs[at + 1].ptr(), bufs[at + 2].ptr());
  }, opts));
  return t.median_ms;
}

}  // namespace

rt::Result<GroupTuning> tune_group(rt::Stream& stream, const Graph& g, const FusionGroup& grp, const Bindings& b,
                                   const TuneSettings& settings) {
  if (std::string why = untunable_reason(g, grp); !why.empty()) throw UserError(fmt::format("@{}: {}", g.name(), why));
  const rt::Context& ctx = stream.context();
  GroupTuning out;
  out.tuned_at = jit::bucket(b);
  LJ_RT_ASSIGN(const jit::JitTarget target, jit::JitTarget::of_device(ctx));
  const EmitOptions eo = target.emit_options(out.tuned_at);
  Candidates cands = group_candidates(g, grp, eo);
  out.pruned = cands.pruned;
  std::vector<GeneratedKernel> kernels;

  rt::TuneProblem tp;
  for (Candidate& c : cands.list) {
    rt::LaunchConfig lc = rt::LaunchConfig::linear(static_cast<unsigned>(c.kernel.launch.blocks(out.tuned_at)),
                                                   static_cast<unsigned>(c.kernel.launch.threads),
                                                   static_cast<unsigned>(c.kernel.launch.shared_bytes));
    tp.candidates.push_back(rt::TuneCandidate{c.config, jit::compile_job(c.kernel, target.target), c.kernel.name, lc, {}});
    kernels.push_back(std::move(c.kernel));
  }

  // Random inputs, enough copies to rotate past L2; each candidate's arguments over the same buffers
  // (candidates differ in their parameter lists only by tensor maps over those buffers). Positions
  // sit at the end of every cache, as `layerjit run` puts them, and block tables name distinct pages:
  // a decode attention timed at position 0 reads one key, and the tuner once chose for Llama-3-8B at
  // B = 1 a 4096-token chunk per CTA that was 1.09x faster there and 10x slower over a full cache.
  // Every buffer the kernel writes is compared (the fused epilogue's output, the values and cache
  // entries a RoPE epilogue stores), never the matmul's product, which a fused group keeps on chip.
  std::vector<DType> output_types;  // of tp.outputs, in order
  size_t set_bytes = 0;
  for (const KernelParam& p : kernels[0].params)
    if (p.kind == KernelParam::Kind::Buffer)
      set_bytes += static_cast<size_t>(tensor_bytes(g.value(p.buffer).type.dtype, resolve(g.value(p.buffer).type.shape, out.tuned_at)));
  const int rotations = rt::rotations_for(set_bytes, static_cast<size_t>(ctx.info().l2_bytes));
  std::vector<rt::DeviceBuffer> buffers;
  std::vector<rt::DeviceBuffer> scratch(kernels.size());
  for (int r = 0; r < rotations; ++r) {
    std::map<ValueId, CUdeviceptr> set;
    for (const KernelParam& p : kernels[0].params) {
      if (p.kind != KernelParam::Kind::Buffer || set.count(p.buffer)) continue;
      const TensorType& t = g.value(p.buffer).type;
      const size_t n = static_cast<size_t>(numel(resolve(t.shape, out.tuned_at)));
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, static_cast<size_t>(tensor_bytes(t.dtype, resolve(t.shape, out.tuned_at)))));
      const uint64_t seed = 7919 * static_cast<uint64_t>(r + 1) + static_cast<uint64_t>(p.buffer);
      if (t.dtype == DType::I32) {
        LJ_RT_TRY(rt::upload_tensor(stream, buf.ptr(), jit::index_input(g, p.buffer, out.tuned_at, seed, jit::IndexFill::Last)));
      } else {
        LJ_RT_TRY(rt::fill_random_operand(stream, buf.ptr(), n, t.dtype, seed));
      }
      if (r == 0 && p.written) {
        tp.outputs.push_back(rt::TuneOutput{buf.ptr(), buf.bytes(), static_cast<size_t>(dtype_bytes(t.dtype))});
        output_types.push_back(t.dtype);
      }
      set[p.buffer] = buf.ptr();
      buffers.push_back(std::move(buf));
    }
    rt::ArgSources src;
    src.buffer = [&](ValueId v) -> rt::Result<CUdeviceptr> {
      if (auto it = set.find(v); it != set.end()) return it->second;
      return rt::Error{fmt::format("tune: a candidate reads %{}, which the default config does not", g.value(v).name)};
    };
    // A kernel's scratch (split-K partials and counters): zeroed once, shared by its argument sets
    // (launches run one after another and leave the counters at zero).
    size_t current = 0;
    src.scratch = [&](size_t bytes) -> rt::Result<CUdeviceptr> {
      rt::DeviceBuffer& sc = scratch[current];
      if (sc.bytes() < bytes) {
        LJ_RT_ASSIGN(sc, rt::DeviceBuffer::allocate(ctx, bytes));
        LJ_RT_TRY(rt::fill_zero(stream, sc.ptr(), sc.bytes()));
      }
      return sc.ptr();
    };
    for (size_t i = 0; i < kernels.size(); ++i) {
      current = i;
      LJ_RT_ASSIGN(rt::KernelArgs args, rt::pack_kernel_args(ctx, kernels[i], out.tuned_at, src));
      if (i == 0) tp.arg_sets.push_back(args);
      tp.candidates[i].arg_sets.push_back(std::move(args));
    }
  }
  if (tp.outputs.empty()) return rt::Error{fmt::format("tune: group {} writes no buffer to compare candidates by", grp.id)};
  tp.compare = [output_types, a = cands.abs_tolerance, rel = cands.rel_tolerance](size_t i, const std::vector<unsigned char>& want,
                                                                                 const std::vector<unsigned char>& got, std::string* why) {
    return outputs_agree(output_types.at(i), a, rel, want, got, why);
  };

  rt::AutotuneOptions ao = settings.autotune;
  if (settings.kernel_cache && !ao.compiler) {
    std::vector<std::string> names;
    for (const GeneratedKernel& k : kernels) names.push_back(k.name);
    // Candidates NVRTC compiles are reported as each finishes (the cache's are counted at once).
    std::vector<std::string> configs;
    for (const GeneratedKernel& k : kernels) configs.push_back(k.config);
    std::function<void(const jit::CompileProgress&)> heard;
    if (ao.progress)
      heard = [say = ao.progress, configs](const jit::CompileProgress& p) {
        if (p.cache_hit || p.index >= configs.size()) return;
        say(fmt::format("  [{}/{}] {} {} ({:.2f} s)", p.done, p.total, configs[p.index], p.ok ? "compiled" : "FAILED", p.seconds));
      };
    ao.compiler = [cache = settings.kernel_cache, names, workers = ao.compile_workers, heard](std::span<const rt::CompileJob> jobs) {
      std::vector<rt::Result<rt::CompiledProgram>> programs;
      for (auto& r : jit::compile_jobs(jobs, names, jit::KernelCompileOptions{cache, false, workers, heard})) {
        if (r.ok()) programs.emplace_back(std::move(r->program));
        else programs.emplace_back(r.error());
      }
      return programs;
    };
  }
  LJ_RT_ASSIGN(out.report, rt::autotune(stream, tp, ao));
  if (log_enabled(LogCategory::Tune))
    for (const rt::CandidateResult& r : out.report.results)
      log_line(LogCategory::Tune, r.status == rt::CandidateStatus::kTimed
                                      ? fmt::format("group {} '{}': {:.4f} ms (p10-p90 {:.4f}-{:.4f})", grp.id, r.config, r.timing.median_ms,
                                                    r.timing.p10_ms, r.timing.p90_ms)
                                      : fmt::format("group {} '{}': {}{}", grp.id, r.config, rt::to_string(r.status),
                                                    r.detail.empty() ? "" : ": " + r.detail.substr(0, r.detail.find('\n'))));
  if (settings.reference_cublaslt && grp.kind == GroupKind::Matmul) {
    auto ref = time_reference(stream, matmul_problem(g, grp, eo), settings.autotune.timer);
    if (ref.ok()) out.reference_ms = *ref;
    else out.reference_note = ref.message();
  }
  out.measured_best = tp.candidates[static_cast<size_t>(out.report.best)].config;
  out.chosen = out.measured_best;
  out.key = jit::tuning_key(target, g, grp, out.tuned_at);
  if (settings.db && settings.db->enabled()) {
    std::vector<cache::Measured> measured;
    for (const rt::CandidateResult& r : out.report.results)
      if (r.status == rt::CandidateStatus::kTimed)
        measured.push_back(cache::Measured{r.config, r.timing.median_ms * 1e3, (r.timing.p90_ms - r.timing.p10_ms) * 1e3});
    out.record = settings.db->record(out.key, measured);
    if (out.record->ok) out.chosen = out.record->record.winner.config;
    log_line(LogCategory::Tune, fmt::format("group {}: record {} (winner '{}'){}", grp.id, to_string(out.record->decision),
                                            out.record->record.winner.config, out.record->ok ? "" : ": " + out.record->error));
  }
  return out;
}

}  // namespace lj::tune
