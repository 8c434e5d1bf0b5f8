// Graph-to-graph passes (one free function each, one file each under compiler/passes/).
#pragma once

#include "layerjit/graph.h"

namespace lj {

/// Rebuilds `g` with every bound symbol replaced by its value, re-verifying every op (so a binding
/// that breaks a shape rule, e.g. reshape of [T, 4096] to [T, 32, 100], is reported).
Graph bind_symbols(const Graph& g, const Bindings& b);

}  // namespace lj
