// Autotuning of fusion groups on the user's GPU: the candidate configs of a group (the matmul
// pruner's, or the attention tile sets), measured by rt::autotune on random inputs, each verified
// against the default config's output, and the winner recorded in the tuning DB with its time,
// spread and runner-up (the DB keeps a previous winner on a near-tie).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache/kernel_cache.h"
#include "cache/tuning_db.h"
#include "codegen/kernel.h"
#include "runtime/autotune.h"
#include "runtime/stream.h"

namespace lj::tune {

/// Whether the group kind has configs to tune (matmul groups; attention groups whose query rows
/// take the prefill kernels), and if not, why.
std::string untunable_reason(const Graph& g, const FusionGroup& grp);

struct GroupTuning {
  std::string chosen;         ///< the config text the DB now holds (the previous winner on a near-tie)
  std::string measured_best;  ///< this run's fastest
  rt::TuneReport report;
  cache::TuningKey key;
  std::optional<cache::RecordResult> record;  ///< unset when the DB is disabled
  Bindings tuned_at;                          ///< the bucket's top values the kernels ran with
  std::vector<std::string> pruned;            ///< configs the family left out, each "config: why"
  /// Matmul groups with TuneSettings::reference_cublaslt: cuBLASLt's time for the bare GEMM of the
  /// same sizes (no epilogue), measured by the same timer, for reference only (it never runs in a
  /// plan); unset with the reason in `reference_note` where it could not run (no libcublasLt, a
  /// dtype it does not take).
  std::optional<double> reference_ms;
  std::string reference_note;
};

struct TuneSettings {
  rt::AutotuneOptions autotune;
  cache::KernelCache* kernel_cache = nullptr;  ///< compiles go through it when set
  cache::TuningDb* db = nullptr;               ///< the winner is recorded when set (and enabled)
  bool reference_cublaslt = false;             ///< matmul groups: also time cuBLASLt (GroupTuning::reference_ms)
};

/// Whether a candidate's output bytes `got` agree with the default config's `want` (elements of
/// dtype `t`): bit-identical elements always do (poison and unwritten cache entries included), others
/// within abs_tol + rel_tol * |want|; a NaN never does. On disagreement, `why` names the first element.
bool outputs_agree(DType t, double abs_tol, double rel_tol, const std::vector<unsigned char>& want, const std::vector<unsigned char>& got,
                   std::string* why);

/// Tunes one group for the symbol values in `b` (bucketed). Throws UserError when the group has
/// nothing to tune or a symbol is unbound; returns an Error when the GPU work fails.
rt::Result<GroupTuning> tune_group(rt::Stream& stream, const Graph& g, const FusionGroup& grp, const Bindings& b,
                                   const TuneSettings& settings);

}  // namespace lj::tune
