// The kernel families (kernel_family.h), one per emit_<kind>.cpp; kernel_family() finds them.
#pragma once

#include "codegen/kernel_family.h"

namespace lj {

const KernelFamily& elementwise_family();
const KernelFamily& row_reduce_family();
const KernelFamily& rope_kv_write_family();
const KernelFamily& rope_table_family();  // a rope_table alone: the same emitter
/// Decode GEMV or tensor-core GEMM (mma.sync, wgmma), as the group's config says (emit_matmul.cpp).
const KernelFamily& matmul_family();
/// Flash-attention prefill or split-KV decode (emit_attention.cpp).
const KernelFamily& attention_family();
/// An embedding lookup (emit_embedding.cpp).
const KernelFamily& gather_family();

}  // namespace lj
