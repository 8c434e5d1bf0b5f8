// A generated kernel: its CUDA C++ source, the config it was generated with, and its ABI (the
// parameter list and launch rule the runtime launches it by: layerjit/kernel_abi.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/attention_config.h"
#include "codegen/matmul_config.h"
#include "compiler/fusion/fusion_group.h"
#include "layerjit/graph.h"
#include "layerjit/kernel_abi.h"

namespace lj {

/// The name (lj_<graph>_g<id>_<kind>: stable, so profilers show our names), parameters and launch
/// rule are the kernel's ABI (layerjit/kernel_abi.h), all the runtime sees of it.
struct GeneratedKernel : KernelAbi {
  int group = 0;
  std::string source;  // complete translation unit for NVRTC
  /// The source uses arch-specific instructions (wgmma): it compiles only for sm_<EmitOptions::sm>a.
  bool arch_specific = false;
  /// The tunable choice it was generated with ("wgmma bm=128 bn=256 stages=4 gm=8", an attention
  /// tile "128x2x64x2"); empty for kernels without one.
  std::string config;
};

struct EmitOptions {
  int sm = 90;  // target architecture (80, 90, ...): specialises the source
  /// The target is the arch-specific variant (sm_90a): kernels may use wgmma and setmaxnreg, and must
  /// then be compiled for exactly that target.
  bool arch_specific = false;
  /// Symbol values the kernel is chosen for (a tuning bucket's representative): picks the default
  /// config, e.g. GEMV or tensor-core GEMM for a matmul over T rows. The kernel stays correct for any
  /// value; only its speed depends on the hint.
  Bindings hint;
  /// A matmul group's config (the autotuner's choice); unset: default_matmul_config.
  std::optional<MatmulConfig> matmul;
  /// An attention prefill kernel's tiles; unset: the default.
  std::optional<AttentionConfig> attention;
  /// Opt-in shared memory per block of the target device (limits GEMM tiles).
  int max_shared_bytes = 227 * 1024;
  /// SMs of the target device: a persistent kernel launches this many CTAs (correct for any count).
  int sm_count = 132;
};

/// Emits the kernel of one group through its family (kernel_family.h): elementwise, row_reduce,
/// rope_kv_write, matmul (GEMV or tensor-core GEMM) or attention (flash prefill or split-KV decode).
/// Reduce and copy groups have no generator yet: asking for one is a UserError naming the group.
GeneratedKernel emit_group(const Graph& g, const FusionGroup& grp, const EmitOptions& opts = {});

/// The matmul problem of a matmul group (M from the constant shape or the hint, 0 if unknown).
MatmulProblem matmul_problem(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);

/// Whether emit_group has an emitter for this kind (kernel_family(k) is not null).
bool has_emitter(GroupKind k);

}  // namespace lj
