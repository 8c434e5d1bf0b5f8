// Shared by the GPU-tier tests of generated kernels: run one fusion group on the device against the
// CPU reference of the nodes it implements.
#pragma once

#include <functional>
#include <map>

#include "codegen/kernel.h"
#include "layerjit/reference.h"
#include "runtime/stream.h"
#include "tests/gpu/gpu_test_support.h"

namespace lj_test {

using InputFn = std::function<lj::HostTensor(const lj::Graph&, lj::ValueId, const lj::Bindings&, uint64_t)>;

struct GroupCase {
  const lj::Graph* graph = nullptr;
  lj::Bindings bind;
  uint64_t seed = 1;
  bool exact = false;  ///< every element must equal the reference exactly (a single rounding)
  InputFn input;       ///< default: random_input
  lj::EmitOptions emit;
};

/// Random data for a value no group node produces: positions inside the caches, positive scales,
/// values in [-1, 1) otherwise (exactly representable in the dtype).
lj::HostTensor random_input(const lj::Graph& g, lj::ValueId v, const lj::Bindings& b, uint64_t seed);

/// Emits the group's kernel (with c.emit), runs it on random inputs with poisoned outputs and checks
/// every written buffer against the reference: exactly, within one rounding step of the dtype, or
/// for matmuls within a bound that grows with sqrt(K). A dynamic quantize whose input row the kernel
/// also stored is checked exactly against the reference quantize of that stored row; a copy of a
/// returned view (FusionGroup::copies, in a buffer of its own) must equal the view bit for bit. Attention
/// outputs are checked within the rounding of the softmax weights (attention_close). Returns what the
/// kernel stored in each group output, decoded.
std::map<lj::ValueId, lj::HostTensor> check_group(lj::rt::Context& ctx, lj::rt::Stream& stream, const GroupCase& c,
                                                  const lj::FusionGroup& grp);

}  // namespace lj_test
