// The family of each group kind, the base defaults of the family interface, and KernelConfig.
#include "codegen/kernel_family.h"

#include <fmt/format.h>

#include "codegen/emitters.h"
#include "layerjit/error.h"
#include "layerjit/check.h"

namespace lj {

std::string KernelConfig::str() const {
  if (const MatmulConfig* m = matmul()) return m->str();
  if (const AttentionConfig* a = attention()) return a->str();
  return "";
}

size_t KernelConfig::hash() const { return std::hash<std::string>{}(str()); }

void KernelConfig::apply(EmitOptions& eo) const {
  eo.matmul.reset();
  eo.attention.reset();
  if (const MatmulConfig* m = matmul()) eo.matmul = *m;
  if (const AttentionConfig* a = attention()) eo.attention = *a;
}

std::optional<KernelConfig> KernelFamily::parse_config(std::string_view text, std::string* error) const {
  if (error) *error = fmt::format("{} groups have no configs (got '{}')", name(), text);
  return std::nullopt;
}

std::vector<KernelConfig> KernelFamily::candidates(const Graph&, const FusionGroup&, const EmitOptions&, std::vector<std::string>*) const {
  return {};
}

const KernelFamily* kernel_family(GroupKind k) {
  switch (k) {
    case GroupKind::Elementwise: return &elementwise_family();
    case GroupKind::RowReduce: return &row_reduce_family();
    case GroupKind::RopeKvWrite: return &rope_kv_write_family();
    case GroupKind::RopeTable: return &rope_table_family();
    case GroupKind::Matmul: return &matmul_family();
    case GroupKind::Attention: return &attention_family();
    case GroupKind::Gather: return &gather_family();
    case GroupKind::Reduce:
    case GroupKind::Copy:
    case GroupKind::AllReduce: return nullptr;  // NCCL's, not a generated kernel
  }
  LJ_ASSERT(false, "unhandled group kind {}", static_cast<int>(k));
  __builtin_unreachable();
}

bool has_emitter(GroupKind k) { return kernel_family(k) != nullptr; }

GeneratedKernel emit_group(const Graph& g, const FusionGroup& grp, const EmitOptions& opts) {
  if (const KernelFamily* f = kernel_family(grp.kind)) return f->emit(g, grp, opts);
  if (grp.kind == GroupKind::AllReduce)
    throw UserError(fmt::format("group {} of @{} is an all_reduce: NCCL runs it between the ranks' kernels, no kernel is generated "
                                "for it (docs/tp.md)", grp.id, g.name()));
  const std::string_view kind = group_kind_name(grp.kind);
  const bool vowel = std::string_view("aeiou").find(kind.front()) != std::string_view::npos;
  throw UserError(fmt::format("group {} of @{} is {} {} group: its kernel generator is not written yet",
                              grp.id, g.name(), vowel ? "an" : "a", kind));
}

}  // namespace lj
