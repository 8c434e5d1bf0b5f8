// LAYERJIT_DUMP=ir,fusion,source,ptx (or `all`): print those pipeline stages to stderr from any
// command, each under a `== LAYERJIT_DUMP <stage>: <what> ==` header.
#pragma once

#include <string_view>

namespace lj {

enum class DumpStage { Ir, Fusion, Source, Ptx };

/// True if LAYERJIT_DUMP names the stage. Unknown names are reported once on stderr.
bool dump_enabled(DumpStage stage);

/// Writes `text` under a header naming the stage and `what`, if the stage is enabled.
void dump(DumpStage stage, std::string_view what, std::string_view text);

}  // namespace lj
