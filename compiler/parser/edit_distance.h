// Levenshtein distance, for "did you mean" suggestions: unknown op names in the parser, unknown
// options in the CLI (both strings short).
#pragma once

#include <cstddef>
#include <string_view>

namespace lj {

size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace lj
