// A group NCCL runs between the ranks' kernels (an all_reduce, docs/tp.md) has no source, but the
// executable plans memory and binds buffers by kernel ABIs alone: this is that ABI, the buffer it
// sends (read) and the one it receives into (written), so liveness and binding treat the call as
// they treat a kernel.
#pragma once

#include "codegen/kernel.h"

namespace lj {

/// The ABI of an all_reduce group: name lj_<graph>_g<id>_all_reduce, params [send, recv] and the
/// symbols of its shape; empty source. Throws UserError when its operand is not dense from the
/// start of its buffer (NCCL takes one contiguous range), naming the group and the value.
GeneratedKernel collective_call(const Graph& g, const FusionGroup& grp);

/// Whether the group is run by NCCL rather than a generated kernel.
bool is_collective(GroupKind k);

}  // namespace lj
