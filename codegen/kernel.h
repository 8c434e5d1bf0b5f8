// A generated kernel: its CUDA C++ source and the contract with the runtime — the parameter list
// (buffers, then symbol values) and the launch rule.
#pragma once

#include <string>
#include <vector>

#include "compiler/fusion/fusion_group.h"
#include "layerjit/graph.h"

namespace lj {

struct KernelParam {
  enum class Kind { Buffer, Symbol };
  Kind kind = Kind::Buffer;
  std::string name;    // C++ parameter name in the source
  ValueId buffer = -1; // Buffer: the value owning the memory
  DType dtype = DType::F32;
  bool written = false;  // Buffer: the kernel stores to it
  bool read = false;     // Buffer: the kernel loads from it (both: an in-place cache update)
  std::string symbol;    // Symbol: which IR symbol (passed as int64)
};

/// grid.x = ceil(work / per_block), block = threads, with `shared_bytes` of dynamic shared memory.
struct LaunchRule {
  DimProduct work;
  int64_t per_block = 1;
  int threads = 128;
  int shared_bytes = 0;
};

struct GeneratedKernel {
  int group = 0;
  std::string name;    // lj_<graph>_g<id>_<kind>: stable, so profilers show our names
  std::string source;  // complete translation unit for NVRTC
  std::vector<KernelParam> params;
  LaunchRule launch;
};

struct EmitOptions {
  int sm = 90;  // target architecture (80, 90, ...): specialises the source
};

/// Emits the kernel of one group: elementwise, row_reduce, rope_kv_write, or matmul (the decode GEMV
/// family; the tensor-core GEMM for large M is next). Attention, reduce and copy groups have no
/// generator yet: asking for one is a UserError naming the group.
GeneratedKernel emit_group(const Graph& g, const FusionGroup& grp, const EmitOptions& opts = {});

/// Whether emit_group has an emitter for this kind.
bool has_emitter(GroupKind k);

}  // namespace lj
