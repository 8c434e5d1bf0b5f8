#include "tune/tune_matmul.h"

#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "cache/compile_cached.h"
#include "codegen/device_headers.h"
#include "codegen/tensor_layout.h"
#include "layerjit/error.h"
#include "runtime/fill.h"
#include "runtime/host_values.h"
#include "runtime/kernel_args.h"
#include "runtime/module.h"

namespace lj::tune {

Bindings bucket(const Bindings& b) {
  Bindings out;
  for (const auto& [name, value] : b.values) {
    int64_t top = 1;
    while (top < value) top *= 2;
    out.set(name, top);
  }
  return out;
}

std::string bucket_text(const Graph& g, const Bindings& bucketed) {
  std::string out;
  for (const std::string& s : g.symbols())
    if (auto v = bucketed.get(s)) out += fmt::format("{}{}<={}", out.empty() ? "" : ",", s, *v);
  return out;
}

std::string group_signature(const Graph& g, const FusionGroup& grp) {
  const std::vector<TensorLayout> layouts = compute_layouts(g);
  std::string out = fmt::format("{}:", group_kind_name(grp.kind));
  for (NodeId id : grp.nodes) {
    const Node& n = g.node(id);
    std::string ops, res;
    for (ValueId v : n.operands) ops += (ops.empty() ? "" : ", ") + g.value(v).type.str();
    for (ValueId v : n.results) res += (res.empty() ? "" : ", ") + g.value(v).type.str();
    out += fmt::format(" {}({}) -> {};", op_name(n.kind), ops, res);
  }
  // Views change how a kernel loads (alignment, strides): part of the problem.
  for (ValueId v : grp.inputs) {
    const TensorLayout& l = layouts[static_cast<size_t>(v)];
    std::string strides;
    for (const DimProduct& s : l.strides) strides += (strides.empty() ? "" : ",") + s.str();
    out += fmt::format(" in@{}[{}]", l.offset.str(), strides);
  }
  return out;
}

cache::TuningKey tuning_key(const rt::Context& ctx, const rt::Target& target, const Graph& g, const FusionGroup& grp,
                            const Bindings& bucketed) {
  cache::TuningKey key;
  key.group_signature = group_signature(g, grp);
  key.symbol_bucket = bucket_text(g, bucketed);
  key.arch = target.name();
  key.driver_version = rt::format_cuda_version(ctx.info().driver_version);
  return key;
}

namespace {

// Two correct fp32-accumulating kernels differ by summation order: up to a few rounding steps of the
// output at the scale of the partial sums (~sqrt(K) for inputs in [-1, 1)), plus the output's
// relative step. Anything past that is a wrong kernel, not a different order.
bool outputs_agree(DType t, int64_t k, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got,
                   std::string* why) {
  const size_t eb = static_cast<size_t>(dtype_bytes(t));
  double unit = std::ldexp(1.0, -16), rel = 1e-5;
  if (t == DType::BF16) unit = std::ldexp(1.0, -7), rel = 1.0 / 32;
  if (t == DType::F16) unit = std::ldexp(1.0, -10), rel = 1.0 / 256;
  const double bound = std::sqrt(static_cast<double>(k)) * unit;
  for (size_t i = 0; i * eb < want.size(); ++i) {
    const double a = rt::decode_element(t, want.data() + i * eb), b = rt::decode_element(t, got.data() + i * eb);
    if (std::isnan(b) || !(std::fabs(a - b) <= bound + rel * std::fabs(a))) {
      if (why) *why = fmt::format("element {}: {} where the default config gives {}", i, b, a);
      return false;
    }
  }
  return true;
}

}  // namespace

rt::Result<MatmulTuning> tune_matmul(rt::Stream& stream, const Graph& g, const FusionGroup& grp, const Bindings& b,
                                     const TuneSettings& settings) {
  LJ_CHECK(grp.kind == GroupKind::Matmul, SourceLoc{}, "group {} of @{} is a {} group: only matmul groups have configs to tune",
           grp.id, g.name(), group_kind_name(grp.kind));
  const rt::Context& ctx = stream.context();
  MatmulTuning out;
  out.tuned_at = bucket(b);
  LJ_RT_ASSIGN(auto archs, rt::supported_archs());
  LJ_RT_ASSIGN(rt::TargetChoice choice, rt::choose_target(ctx.info().cc(), true, archs, rt::nvrtc_version()));

  EmitOptions eo;
  eo.sm = ctx.info().cc();
  eo.arch_specific = choice.target.arch_specific;
  eo.hint = out.tuned_at;
  eo.max_shared_bytes = ctx.info().max_smem_per_block_optin;
  const MatmulProblem problem = matmul_problem(g, grp, eo);
  const std::vector<MatmulConfig> configs = matmul_candidates(problem);

  rt::TuneProblem tp;
  tp.target = choice.target;
  tp.compile.headers = codegen_device_headers();
  std::vector<GeneratedKernel> kernels;
  for (const MatmulConfig& c : configs) {
    eo.matmul = c;
    GeneratedKernel k = emit_group(g, grp, eo);
    rt::LaunchConfig lc = rt::LaunchConfig::linear(static_cast<unsigned>(k.launch.blocks(out.tuned_at)),
                                                   static_cast<unsigned>(k.launch.threads),
                                                   static_cast<unsigned>(k.launch.shared_bytes));
    tp.candidates.push_back(rt::TuneCandidate{c.str(), k.source, k.name, lc, {}, k.arch_specific});
    kernels.push_back(std::move(k));
  }

  // Random inputs, enough copies to rotate past L2; each candidate's arguments over the same buffers
  // (candidates differ in their parameter lists only by tensor maps over those buffers).
  const std::vector<TensorLayout> layouts = compute_layouts(g);
  const Node& mm = g.node(grp.nodes[0]);
  const ValueId y = mm.results[0];
  size_t set_bytes = 0;
  for (const KernelParam& p : kernels[0].params)
    if (p.kind == KernelParam::Kind::Buffer)
      set_bytes += static_cast<size_t>(numel(resolve(g.value(p.buffer).type.shape, out.tuned_at)) * dtype_bytes(g.value(p.buffer).type.dtype));
  const int rotations = rt::rotations_for(set_bytes, static_cast<size_t>(ctx.info().l2_bytes));
  std::vector<rt::DeviceBuffer> buffers;
  for (int r = 0; r < rotations; ++r) {
    std::map<ValueId, CUdeviceptr> set;
    for (const KernelParam& p : kernels[0].params) {
      if (p.kind != KernelParam::Kind::Buffer) continue;
      const TensorType& t = g.value(p.buffer).type;
      const size_t n = static_cast<size_t>(numel(resolve(t.shape, out.tuned_at)));
      LJ_RT_ASSIGN(rt::DeviceBuffer buf, rt::DeviceBuffer::allocate(ctx, n * static_cast<size_t>(dtype_bytes(t.dtype))));
      const uint64_t seed = 7919 * static_cast<uint64_t>(r + 1) + static_cast<uint64_t>(p.buffer);
      // 16-bit inputs get bf16 values in [-1, 1) (read as f16 they are finite values of similar size).
      if (dtype_bytes(t.dtype) == 2) {
        LJ_RT_TRY(rt::fill_random_bf16(stream, buf.ptr(), n, seed, -1.f, 1.f));
      } else if (t.dtype == DType::F32) {
        LJ_RT_TRY(rt::fill_random_f32(stream, buf.ptr(), n, seed, -1.f, 1.f));
      } else {
        return rt::Error{fmt::format("tune: inputs of dtype {} are not supported", dtype_name(t.dtype))};
      }
      if (r == 0 && p.written && p.buffer == layouts[static_cast<size_t>(y)].buffer)
        tp.outputs.push_back(rt::TuneOutput{buf.ptr(), buf.bytes(), static_cast<size_t>(dtype_bytes(t.dtype))});
      set[p.buffer] = buf.ptr();
      buffers.push_back(std::move(buf));
    }
    rt::ArgSources src;
    src.buffer = [&](ValueId v) -> rt::Result<CUdeviceptr> {
      if (auto it = set.find(v); it != set.end()) return it->second;
      return rt::Error{fmt::format("tune: a candidate reads %{}, which the default config does not", g.value(v).name)};
    };
    src.scratch = [](size_t) -> rt::Result<CUdeviceptr> { return rt::Error{"tune: matmul kernels have no scratch"}; };
    for (size_t i = 0; i < kernels.size(); ++i) {
      LJ_RT_ASSIGN(rt::KernelArgs args, rt::pack_kernel_args(ctx, kernels[i], out.tuned_at, src));
      if (i == 0) tp.arg_sets.push_back(args);
      tp.candidates[i].arg_sets.push_back(std::move(args));
    }
  }
  const DType yt = g.value(y).type.dtype;
  const int64_t k_len = problem.k;
  tp.compare = [yt, k_len](size_t, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got, std::string* why) {
    return outputs_agree(yt, k_len, want, got, why);
  };

  rt::AutotuneOptions ao = settings.autotune;
  if (settings.kernel_cache && !ao.compiler) {
    std::vector<std::string> names;
    for (const GeneratedKernel& k : kernels) names.push_back(k.name);
    ao.compiler = [cache = settings.kernel_cache, names](std::span<const rt::CompileJob> jobs) {
      std::vector<rt::Result<rt::CompiledProgram>> programs;
      for (auto& r : cache::compile_many_cached(*cache, jobs, names)) {
        if (r.ok()) programs.emplace_back(std::move(r->program));
        else programs.emplace_back(r.error());
      }
      return programs;
    };
  }
  LJ_RT_ASSIGN(out.report, rt::autotune(stream, tp, ao));
  out.measured_best = configs[static_cast<size_t>(out.report.best)];
  out.chosen = out.measured_best;
  out.key = tuning_key(ctx, choice.target, g, grp, out.tuned_at);
  if (settings.db && settings.db->enabled()) {
    std::vector<cache::Measured> measured;
    for (const rt::CandidateResult& r : out.report.results)
      if (r.status == rt::CandidateStatus::kTimed)
        measured.push_back(cache::Measured{r.config, r.timing.median_ms * 1e3, (r.timing.p90_ms - r.timing.p10_ms) * 1e3});
    out.record = settings.db->record(out.key, measured);
    if (out.record->ok) {
      std::string error;
      if (auto c = parse_matmul_config(out.record->record.winner.config, &error)) out.chosen = *c;
    }
  }
  return out;
}

}  // namespace lj::tune
