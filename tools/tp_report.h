// `--tp N` on the command line: the value's check, and the tensor-parallel header `layerjit plan`
// prints before a rank graph's plan (how inputs are split, the all_reduces and their bytes).
#pragma once

#include <string>

#include "layerjit/shard.h"

namespace lj::cli {

/// N of `--tp N`: an integer in 1..64, else a UsageError naming the value.
int parse_tp(const std::string& v);

/// The header of a rank graph's plan: ranks, each split input, each all_reduce with its bytes per
/// call where `b` binds its sizes, and the per-rank notes of the pass.
std::string tp_summary(const ShardedGraph& s, const Bindings& b);

}  // namespace lj::cli
