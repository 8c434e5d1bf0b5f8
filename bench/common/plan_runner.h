// Shared by the benchmarks: fail-fast helpers (a benchmark has nobody to report an error to but the
// terminal), and plans compiled, loaded and given buffers so that their kernels can be timed back to back.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/kernel.h"
#include "runtime/context.h"
#include "runtime/launch.h"
#include "runtime/memory.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "runtime/timer.h"

namespace lj::bench {

/// Name printed before fatal errors ("bench_gemm: ...").
extern const char* g_program;

[[noreturn]] void die(const std::string& what);
void must_ok(const rt::Status& s, const char* what);
/// The value of a Result, or die with `what` and its message.
template <class R>
auto must(R r, const char* what) {
  if (!r.ok()) die(fmt::format("{}: {}", what, r.message()));
  if constexpr (requires { *r; }) return std::move(*r);
}

/// GPU 0's context, or nullptr after printing "skipped: no CUDA driver (...)" (the caller exits 77).
rt::Context* context_or_skip();

/// The NVRTC target for this device (cubin, or PTX for a GPU newer than NVRTC).
rt::Target device_target(const rt::Context& ctx);

/// Emission for this device: its SMs, shared-memory limit, arch (sm_90a where NVRTC has it, for
/// the wgmma kernels). No size hint and no forced config.
EmitOptions device_emit_options(rt::Context& ctx);

/// One loaded, ready-to-launch kernel of a plan with its buffers.
struct Launchable {
  rt::Module module;
  rt::Kernel kernel;
  rt::KernelArgs args;
  rt::LaunchConfig config;
};

struct PlanRun {
  std::vector<Launchable> kernels;
  std::vector<rt::DeviceBuffer> scratch;  ///< the kernels' scratch buffers (zeroed once)
  double bytes = 0;  ///< the plan's minimum device-memory traffic (group_cost)
  std::string config;  ///< the configs the kernels were emitted with ("; "-separated, "-" for none)
};

/// Compiles (jit::compile_plan, through one kernel cache per process, no tuned configs) and sets up
/// every group of `plan` for the sizes in `b` (also the hint). Buffers come from `pool` (one per IR
/// buffer value, so groups of one plan share intermediates as a real execution would), filled with
/// random values. `emit` (optional) gives the matmul and attention configs, and with arch_specific
/// false the plain sm_XY target.
PlanRun prepare(rt::Context& ctx, rt::Stream& stream, const Graph& g, const FusionPlan& plan, const Bindings& b,
                std::map<ValueId, rt::DeviceBuffer>& pool, const EmitOptions* emit = nullptr);

/// Median time (ms) of one execution: each of `repeats` repeats (after `warmup`) times `batch`
/// consecutive calls of run(i) between its two events and divides by `batch`; i counts 0, 1, ...
/// modulo `rotations` over every call, so consecutive executions read different copies of their
/// inputs. batch = 1: launch, DRAM ramp and drain are in every sample (the kernel as timed alone);
/// batch > 1: no event between executions, as in a stream of kernels (one still ends before the
/// next begins: a stream does not overlap them).
double median_ms_per_run(rt::Stream& stream, int rotations, int batch, int warmup, int repeats,
                         const std::function<rt::Status(int)>& run);

/// Median time of one execution of a plan; consecutive executions take runs[0], runs[1], ... (copies
/// of the same plan over different buffers, so that repeats do not find their inputs in L2), `batch`
/// of them back to back per sample (median_ms_per_run).
double time_plan(rt::Stream& stream, std::vector<PlanRun>& runs, int batch = 1);

/// A hand-written benchmark kernel (the anchors and ceilings below), compiled for the device and
/// loaded; the module keeps the kernel alive.
struct RawKernel {
  rt::Module module;
  rt::Kernel kernel;
};
RawKernel load_raw_kernel(rt::Context& ctx, const char* source, const char* name);

/// `count` buffers of `bytes` each, filled with random floats in [-1, 1) (seeds seed, seed + 1, ...).
std::vector<rt::DeviceBuffer> random_buffers(rt::Context& ctx, rt::Stream& stream, int count, size_t bytes, uint64_t seed);

/// Median time (ms) of one launch of `k` with `cfg`; consecutive launches take args[0], args[1], ...,
/// `batch` of them back to back per sample (median_ms_per_run).
double time_launches(rt::Stream& stream, rt::Kernel& k, const rt::LaunchConfig& cfg, std::vector<rt::KernelArgs>& args, int batch = 1);

/// Device-to-device copy bandwidth (GB/s, read + write) with 16-byte vectors: the bandwidth anchor.
/// Copies small enough to stay in L2 rotate over several buffer pairs (rt::rotations_for), so the
/// rate is HBM's, as for the kernels it is compared with.
double copy_gbps(rt::Context& ctx, rt::Stream& stream, size_t bytes);

/// Read-only bandwidth (GB/s) of `bytes` from HBM: one wave of CTAs, each thread with 8 16-byte loads
/// in flight, folded into one value per thread. The ceiling for kernels that only read (decode
/// attention): at a few MiB a copy pays for its writes and for a grid of one-shot CTAs, a read does not.
/// `batch` reads back to back per sample: the ceiling of kernels timed that way.
double read_gbps(rt::Context& ctx, rt::Stream& stream, size_t bytes, int batch = 1);

}  // namespace lj::bench
