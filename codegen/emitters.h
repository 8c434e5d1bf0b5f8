// One emitter per group kind (emit_<kind>.cpp); emit_group() dispatches.
#pragma once

#include "codegen/kernel.h"

namespace lj {

GeneratedKernel emit_elementwise(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);
GeneratedKernel emit_row_reduce(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);
GeneratedKernel emit_rope_kv_write(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);
/// Decode GEMV or tensor-core GEMM, as the group's config says (emit_matmul.cpp).
GeneratedKernel emit_matmul(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);
/// Flash-attention prefill or split-KV decode (emit_attention.cpp).
GeneratedKernel emit_attention(const Graph& g, const FusionGroup& grp, const EmitOptions& opts);

}  // namespace lj
