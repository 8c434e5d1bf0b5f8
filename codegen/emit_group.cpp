// emit_group: the dispatch from group kind to emitter.
#include "codegen/emit_common.h"
#include "codegen/emitters.h"

namespace lj {

bool has_emitter(GroupKind k) {
  switch (k) {
    case GroupKind::Elementwise:
    case GroupKind::RowReduce:
    case GroupKind::RopeKvWrite:
    case GroupKind::Matmul:
    case GroupKind::Attention: return true;
    case GroupKind::Reduce:
    case GroupKind::Copy: return false;
  }
  LJ_ASSERT(false, "unhandled group kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

GeneratedKernel emit_group(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  switch (grp.kind) {
    case GroupKind::Elementwise: return emit_elementwise(g, grp, opts);
    case GroupKind::RowReduce: return emit_row_reduce(g, grp, opts);
    case GroupKind::RopeKvWrite: return emit_rope_kv_write(g, grp, opts);
    case GroupKind::Matmul: return emit_matmul(g, grp, opts);
    case GroupKind::Attention: return emit_attention(g, grp, opts);
    case GroupKind::Reduce:
    case GroupKind::Copy: break;
  }
  const std::string_view kind = group_kind_name(grp.kind);
  const bool vowel = std::string_view("aeiou").find(kind.front()) != std::string_view::npos;
  throw UserError(fmt::format("group {} of @{} is {} {} group: its kernel generator is not written yet",
                              grp.id, g.name(), vowel ? "an" : "a", kind));
}

}  // namespace lj
