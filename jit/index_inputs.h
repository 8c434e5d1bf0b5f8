// Valid values for integer graph inputs that index caches, for runs on generated data (`layerjit
// run`, the tuner, the GPU tests): a KV cache's positions must lie inside it and a paged cache's
// block table must name pool pages, or the kernels (rightly) trap.
#pragma once

#include "layerjit/graph.h"
#include "layerjit/reference.h"

namespace lj::jit {

enum class IndexFill {
  Random,  ///< positions uniform in the valid range (from the seed); other integers in [0, 1000)
  Last,    ///< positions at the end of every cache (full caches); other integers 0, 1, 2, ...
};

/// Block tables (operand `block_table` of attention / kv_cache_write) get distinct pool pages, a
/// seeded shuffle (pages repeat only when the pool is smaller than the table); positions (`pos`,
/// `cache_pos`) a value every cache they index can hold (a paged cache holds pages x page positions;
/// an attention's T new tokens must fit) and embedding ids rows of the table; other i32 inputs as
/// `fill` says.
HostTensor index_input(const Graph& g, ValueId v, const Bindings& b, uint64_t seed, IndexFill fill);

}  // namespace lj::jit
