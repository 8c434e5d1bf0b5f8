// One interface per kernel family (after nvFuser's scheduler entries): what a family of kernels
// knows about the groups it implements, asked before any source is written. The JIT emits through
// it, the tuner takes its candidates from it, and a stored or given config is checked by it, so no
// caller switches over group kinds or learns validity by emitting and catching an error.
//
//   family          group kind     configs
//   elementwise     elementwise    none
//   row reduce      row_reduce     none
//   rope/kv write   rope_kv_write  none
//   matmul          matmul         MatmulConfig: GEMV (SIMT, tensor-core fp8), mma.sync GEMM, wgmma GEMM
//   attention       attention      AttentionConfig: flash prefill (mma.sync, wgmma), split-KV decode
//   gather          gather         none (an embedding lookup)
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "codegen/attention_config.h"
#include "codegen/kernel.h"
#include "codegen/matmul_config.h"

namespace lj {

/// A family's tunable choice, typed: none (families without configs), a matmul config or attention
/// tiles. Its text is what the tuning DB stores and `inspect --config` takes.
class KernelConfig {
 public:
  KernelConfig() = default;
  KernelConfig(const MatmulConfig& c) : v_(c) {}     // NOLINT(google-explicit-constructor)
  KernelConfig(const AttentionConfig& c) : v_(c) {}  // NOLINT(google-explicit-constructor)

  bool empty() const { return std::holds_alternative<std::monostate>(v_); }
  const MatmulConfig* matmul() const { return std::get_if<MatmulConfig>(&v_); }
  const AttentionConfig* attention() const { return std::get_if<AttentionConfig>(&v_); }
  /// MatmulConfig::str or AttentionConfig::str; "" when empty.
  std::string str() const;
  /// Equal configs hash equal (a hash of the text, which names every field).
  size_t hash() const;
  bool operator==(const KernelConfig& o) const = default;
  /// `eo` asks for this config (EmitOptions::matmul or ::attention); an empty config asks for none.
  void apply(EmitOptions& eo) const;

 private:
  std::variant<std::monostate, MatmulConfig, AttentionConfig> v_;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual GroupKind kind() const = 0;
  /// "matmul", "attention", ... (the group kind's name).
  std::string_view name() const { return group_kind_name(kind()); }
  /// Whether the family has configs to tune.
  virtual bool tunable() const { return false; }
  /// A config's text (KernelConfig::str's form); nullopt with `error` set (what, and the form
  /// expected) for anything else, a family without configs included.
  virtual std::optional<KernelConfig> parse_config(std::string_view text, std::string* error) const;
  /// Empty if emit() implements the group under `opts` (its given config, else the family's default
  /// for the hint and target); else why not, in the words emit() would throw.
  virtual std::string reject_reason(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const = 0;
  /// The configs the tuner measures, the default first, each accepted by reject_reason (the one home
  /// of the family's candidate list); `pruned` (optional) receives "config: why" for those left out.
  /// Empty for a family without configs.
  virtual std::vector<KernelConfig> candidates(const Graph& g, const FusionGroup& grp, const EmitOptions& opts,
                                               std::vector<std::string>* pruned) const;
  /// The kernel. Throws UserError with reject_reason's text where that is not empty.
  virtual GeneratedKernel emit(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) const = 0;
};

/// A family without configs: its refusal and its emitter are plain functions of the group (the
/// elementwise, row reduce and rope/kv write families).
class UntunedFamily final : public KernelFamily {
 public:
  using Reject = std::string (*)(const Graph&, const FusionGroup&);
  using Emit = GeneratedKernel (*)(const Graph&, const FusionGroup&);
  UntunedFamily(GroupKind k, Reject refuse, Emit write) : kind_(k), reject_(refuse), emit_(write) {}
  GroupKind kind() const override { return kind_; }
  std::string reject_reason(const Graph& g, const FusionGroup& grp, const EmitOptions&) const override { return reject_(g, grp); }
  GeneratedKernel emit(const Graph& g, const FusionGroup& grp, const EmitOptions&) const override { return emit_(g, grp); }

 private:
  GroupKind kind_;
  Reject reject_;
  Emit emit_;
};

/// The family that implements groups of kind `k`; nullptr where no generator is written yet (reduce,
/// copy).
const KernelFamily* kernel_family(GroupKind k);

}  // namespace lj

template <>
struct std::hash<lj::KernelConfig> {
  size_t operator()(const lj::KernelConfig& c) const { return c.hash(); }
};
