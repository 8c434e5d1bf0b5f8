// Tuned configs: the key a fusion group's tuning record is stored under (what the group computes,
// the bucket of its symbol values, the target and driver), and a stored config's text applied to
// the emission options. The tuner records under these keys, and compile_plan looks them up, so
// every caller of the compile path gets the same kernels.
#pragma once

#include <string>

#include "cache/tuning_db.h"
#include "codegen/kernel.h"
#include "jit/target.h"

namespace lj::jit {

/// Symbol values rounded up to the next power of two: one tuning serves every value of a bucket
/// (T = 3000 and T = 4096 share "T<=4096"), and the kernel is tuned at the bucket's top.
Bindings bucket(const Bindings& b);
/// "B<=1,C<=4096": the bucket as the tuning DB's key text (symbols in graph order).
std::string bucket_text(const Graph& g, const Bindings& bucketed);

/// What identifies a group's tuning problem independently of value names: kinds, dtypes and shapes
/// of its nodes ("matmul(bf16[T, 4096], bf16[6144, 4096]) -> bf16[T, 6144]"), and the operands'
/// view layouts (an offset view loads differently).
std::string group_signature(const Graph& g, const FusionGroup& grp);

/// The tuning DB key for a group at bucket `bucketed` on `target` (its arch and driver).
cache::TuningKey tuning_key(const JitTarget& target, const Graph& g, const FusionGroup& grp, const Bindings& bucketed);

/// A config's text (a tuned record's, or one given by `inspect --config`), applied to `eo` if it
/// parses and the group's emitter accepts it; otherwise `eo` is left alone and the reason returned.
std::string apply_config(const Graph& g, const FusionGroup& grp, const std::string& config, EmitOptions& eo);

}  // namespace lj::jit
