// Seeded inputs of a whole graph on the GPU, shared by `layerjit run` and `layerjit bench`: weights
// scaled like an initialised model, activations in [-1, 1), positions at the end of each cache,
// block tables naming distinct pages; each executable gets private copies of the inputs it updates
// in place (the KV caches), so plans compared on the same inputs do not see each other's writes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "exec/executable.h"
#include "exec/safetensors.h"
#include "layerjit/error.h"
#include "layerjit/reference.h"
#include "runtime/memory.h"
#include "tools/cli.h"

namespace lj::cli {

/// The value of a runtime Result (or nothing, for a Status); a failure becomes a UserError that says
/// `what` was being done and why it failed.
template <class R>
auto must(R r, const char* what) {
  if (!r.ok()) throw UserError(fmt::format("{}: {}", what, r.message()));
  if constexpr (requires { *r; }) return std::move(*r);
}

struct DeviceTensor {
  rt::DeviceBuffer buf;
  size_t bytes = 0;
};

struct SeededInputs {
  std::map<ValueId, DeviceTensor> device;       ///< every graph input, uploaded
  std::map<std::string, HostTensor> host;       ///< the same values by name (the CPU reference's inputs)
  std::vector<DeviceTensor> copies;             ///< private copies of in-place inputs, per bound executable
};

/// The value of --seed: a non-negative integer (UsageError otherwise).
uint64_t parse_seed(const std::string& text);
/// Every symbol of `g` must have a value in `b` (UsageError naming the first that has none).
void require_symbols(const Graph& g, const Bindings& b);
/// GPU 0's context (UserError with the driver's message when there is none).
rt::Context& gpu_context();

/// The fused and the unfused plan of `g`, built for the sizes `b` (compiled or loaded from the cache).
struct Plans {
  exec::Executable fused, unfused;
  double fused_seconds = 0, unfused_seconds = 0;  ///< each Executable::build, wall: plan, emit, compile or load, module load
  int64_t nvrtc_compiles = 0;                     ///< made by both builds
};
/// `fusion`: the fused plan's options (--no-one-row-prologues); the unfused plan is one kernel per op.
/// The fused plan from `bundle` where one is given (the unfused one, the check, always compiles).
/// Unless `quiet`, a line on stderr per kernel NVRTC compiles, as it finishes.
Plans build_plans(rt::Context& ctx, const Graph& g, const Bindings& b, bool arch_specific, const FusionOptions& fusion = {},
                  std::shared_ptr<const jit::Bundle> bundle = nullptr, bool quiet = false);

/// Every input of `g` at `b` from `seed` (with `weights`, every param input the file's tensor of its
/// name), host values only: what make_inputs uploads.
std::map<std::string, HostTensor> seeded_host_inputs(const Graph& g, const Bindings& b, uint64_t seed,
                                                     const exec::SafetensorsFile* weights = nullptr);
/// `t` in its dtype's device encoding (an InternalError naming input `name` where a value does not fit).
std::vector<unsigned char> encoded(const HostTensor& t, std::string_view name);

/// Generates and uploads every input of `g` at `b` from `seed`; with `weights`, every param input is
/// the file's tensor of its name instead (exact). Throws UserError on a GPU failure.
SeededInputs make_inputs(rt::Context& ctx, rt::Stream& stream, const Graph& g, const Bindings& b, uint64_t seed,
                         const exec::SafetensorsFile* weights = nullptr);

/// Binds every input of `e` to `in` (a private copy for each input `e` writes).
void bind_inputs(rt::Context& ctx, rt::Stream& stream, exec::Executable& e, SeededInputs& in);

}  // namespace lj::cli
