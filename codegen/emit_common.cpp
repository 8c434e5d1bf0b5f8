// Emitter machinery shared by every group kind.
#include "codegen/emit_common.h"

#include "compiler/ir/identifier.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "layerjit/text.h"
#include "layerjit/op_attrs.h"
#include "layerjit/check.h"
#include "ops/rope_frequencies.h"

namespace lj {

const char* c_type(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F16: return "lj_f16";
    case DType::BF16: return "lj_bf16";
    case DType::F8E4M3: return "lj_e4m3";
    case DType::F8E5M2: return "lj_e5m2";
    case DType::I8: return "signed char";
    case DType::I32: return "int";
    case DType::U4:
    case DType::I4: return "unsigned char";  // packed: a kernel reads their bytes, two elements each
  }
  LJ_ASSERT(false, "unhandled dtype {}", static_cast<int>(t));
  __builtin_unreachable();
}

std::string ident(std::string_view value_name) { return cpp_identifier(value_name); }

KernelContext::KernelContext(const Graph& g, const FusionGroup& grp) : g_(g), grp_(grp), layouts_(compute_layouts(g, grp.dense_views)) {
  // Only the rope_kv_write emitter stores copies; any other kernel would silently leave them unwritten.
  LJ_ASSERT(grp.copies.empty() || grp.kind == GroupKind::RopeKvWrite || grp.kind == GroupKind::RopeTable,
            "group {} ({}) lists copies of returned views, which only rope_kv_write kernels make", grp.id, group_kind_name(grp.kind));
}

std::string kernel_name(const Graph& g, const FusionGroup& grp) {
  return fmt::format("lj_{}_g{}_{}", ident(g.name()), grp.id, group_kind_name(grp.kind));
}

std::string KernelContext::kernel_name() const { return lj::kernel_name(g_, grp_); }

GeneratedKernel KernelContext::kernel(const SourceWriter& w) const {
  GeneratedKernel k;
  k.group = grp_.id;
  k.name = kernel_name();
  k.source = w.str();
  k.params = params_;
  return k;
}

std::string KernelContext::buffer_param(ValueId v, bool written) { return param_of_buffer(layout(v).buffer, written); }

std::string KernelContext::param_of_buffer(ValueId buf, bool written) {
  for (auto& p : params_) {
    if (p.kind == KernelParam::Kind::Buffer && p.buffer == buf) {
      p.written = p.written || written;
      p.read = p.read || !written;
      return p.name;
    }
  }
  KernelParam p;
  p.kind = KernelParam::Kind::Buffer;
  p.name = "p_" + ident(g_.value(buf).name);
  p.buffer = buf;
  p.dtype = g_.value(buf).type.dtype;
  p.written = written;
  p.read = !written;
  params_.push_back(p);
  return p.name;
}

std::string KernelContext::copy_param(ValueId v) {
  LJ_ASSERT(std::find(grp_.copies.begin(), grp_.copies.end(), v) != grp_.copies.end(), "%{} is not a copy of group {}",
            g_.value(v).name, grp_.id);
  // The copy's buffer is `v` itself; no other parameter names it, since compute_layouts places a view
  // in the buffer it aliases.
  return param_of_buffer(v, true);
}

void KernelContext::add_symbol_params() {
  std::vector<std::string> used;
  auto note = [&](const Shape& s) {
    for (const Dim& d : s)
      if (d.is_symbol() && std::find(used.begin(), used.end(), d.symbol()) == used.end()) used.push_back(d.symbol());
  };
  for (NodeId n : grp_.nodes) {
    for (ValueId v : g_.node(n).operands) note(g_.value(v).type.shape);
    for (ValueId v : g_.node(n).results) note(g_.value(v).type.shape);
  }
  // Graph order of symbols, so the ABI does not depend on which op mentions a symbol first.
  for (const auto& s : g_.symbols()) {
    if (std::find(used.begin(), used.end(), s) == used.end()) continue;
    KernelParam p;
    p.kind = KernelParam::Kind::Symbol;
    p.name = symbol_ident(s);
    p.symbol = s;
    p.dtype = DType::I32;
    params_.push_back(p);
  }
}

std::string KernelContext::tensor_map_param(ValueId v, const TensorMapSpec& spec) {
  KernelParam p;
  p.kind = KernelParam::Kind::TensorMap;
  p.buffer = layout(v).buffer;
  p.name = "tm_" + ident(g_.value(v).name);
  p.dtype = g_.value(v).type.dtype;
  if (is_packed(p.dtype)) p.dtype = DType::I8;  // 4-bit codes: a map over their bytes (the spec counts bytes)
  p.read = true;
  p.tmap = spec;
  params_.push_back(p);
  return p.name;
}

std::string KernelContext::scratch_param(int64_t per_block) {
  KernelParam p;
  p.kind = KernelParam::Kind::Scratch;
  p.name = "p_scratch";
  p.dtype = DType::I8;
  p.written = p.read = true;
  p.scratch_per_block = per_block;
  params_.push_back(p);
  return p.name;
}

void KernelContext::add_group_params() {
  for (ValueId v : grp_.inputs) buffer_param(v, false);
  for (ValueId v : grp_.outputs) buffer_param(v, true);
  for (ValueId v : grp_.copies) copy_param(v);
  add_symbol_params();
}

int KernelContext::group_vector_width(const Shape& space) const {
  std::vector<ValueId> accessed = grp_.inputs;
  accessed.insert(accessed.end(), grp_.outputs.begin(), grp_.outputs.end());
  int widest = 1;
  for (ValueId v : accessed) widest = std::max(widest, dtype_bytes(g_.value(v).type.dtype));
  return vector_width(accessed, space, 16 / widest);
}

std::string KernelContext::signature(int threads, int min_blocks, int cluster) const {
  std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__({}{}) {}{}(", threads,
                                min_blocks > 0 ? fmt::format(", {}", min_blocks) : "",
                                cluster > 1 ? fmt::format("__cluster_dims__({}, 1, 1) ", cluster) : "", kernel_name());
  for (size_t i = 0; i < params_.size(); ++i) {
    const KernelParam& p = params_[i];
    std::string decl = p.kind == KernelParam::Kind::Symbol    ? fmt::format("const lj_i64 {}", p.name)
                       : p.kind == KernelParam::Kind::Scratch ? fmt::format("unsigned char* __restrict__ {}", p.name)
                       : p.kind == KernelParam::Kind::TensorMap ? fmt::format("const __grid_constant__ lj_tensor_map {}", p.name)
                                                              : fmt::format("{}{}* __restrict__ {}", p.written ? "" : "const ",
                                                                            c_type(p.dtype), p.name);
    out += fmt::format("\n    {}{}", decl, i + 1 < params_.size() ? "," : ")");
  }
  if (params_.empty()) out += ")";
  return out;
}

std::string KernelContext::address(ValueId v, const Shape& space, const std::vector<std::string>& coords, int axis) const {
  const TensorLayout& l = layout(v);
  if (axis >= 0) {
    std::string off = l.offset.constant != 0 ? product_expr(l.offset) + " + " : "";
    const DimProduct& st = l.strides[0];
    return off + (st.symbols.empty() && st.constant == 1 ? coords[static_cast<size_t>(axis)]
                                                        : fmt::format("{} * {}", coords[static_cast<size_t>(axis)], product_expr(st)));
  }
  const Shape& s = g_.value(v).type.shape;
  const size_t shift = space.size() - s.size();
  std::string out;
  if (l.offset.constant != 0) out = product_expr(l.offset);
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k].is_const() && s[k].value() == 1 && !(space[k + shift].is_const() && space[k + shift].value() == 1)) continue;
    const DimProduct& st = l.strides[k];
    std::string term = st.symbols.empty() && st.constant == 1 ? coords[k + shift]
                                                              : fmt::format("{} * {}", coords[k + shift], product_expr(st));
    out += (out.empty() ? "" : " + ") + term;
  }
  return out.empty() ? "0" : out;
}

std::string KernelContext::copy_address(ValueId v, const std::vector<std::string>& coords) const {
  const std::vector<DimProduct> strides = dense_strides(g_.value(v).type.shape);
  std::string out;
  for (size_t k = 0; k < strides.size(); ++k) {
    const DimProduct& st = strides[k];
    out += (out.empty() ? "" : " + ") +
           (st.symbols.empty() && st.constant == 1 ? coords[k] : fmt::format("{} * {}", coords[k], product_expr(st)));
  }
  return out.empty() ? "0" : out;
}

bool KernelContext::varies_innermost(ValueId v, const Shape& space, int axis) const {
  if (axis >= 0) return axis + 1 == static_cast<int>(space.size());
  const Shape& s = g_.value(v).type.shape;
  if (s.empty()) return false;
  const Dim& d = s.back();
  return !(d.is_const() && d.value() == 1) || (space.back().is_const() && space.back().value() == 1);
}

int KernelContext::vector_width(const std::vector<ValueId>& values, const Shape& space, int max_width) const {
  if (space.empty() || !space.back().is_const()) return 1;
  const int64_t inner = space.back().value();
  for (int w = max_width; w > 1; w /= 2) {
    if (inner % w != 0) continue;
    bool ok = true;
    for (ValueId v : values) {
      if (!varies_innermost(v, space)) continue;
      const TensorLayout& l = layout(v);
      const DimProduct& inner_stride = l.strides.back();
      ok = ok && inner_stride.symbols.empty() && inner_stride.constant == 1 && l.offset.constant % w == 0;
      for (size_t k = 0; k + 1 < l.strides.size(); ++k) ok = ok && l.strides[k].constant % w == 0;
    }
    if (ok) return w;
  }
  return 1;
}

void KernelContext::header_comment(SourceWriter& w) const {
  w.comment(fmt::format("{}: fusion group {} of @{} ({}), generated by layerjit", kernel_name(), grp_.id, g_.name(),
                        group_kind_name(grp_.kind)));
  w.comment("Implements:");
  for (NodeId n : grp_.nodes) w.comment(fmt::format("  {}", print_node(g_, n)));
  std::string reads, writes, keeps, copies;
  for (ValueId v : grp_.inputs) reads += (reads.empty() ? "%" : ", %") + g_.value(v).name;
  for (ValueId v : grp_.outputs) writes += (writes.empty() ? "%" : ", %") + g_.value(v).name;
  for (ValueId v : grp_.internal) keeps += (keeps.empty() ? "%" : ", %") + g_.value(v).name;
  for (ValueId v : grp_.copies) copies += (copies.empty() ? "%" : ", %") + g_.value(v).name;
  if (!copies.empty())
    copies = "; copies " + copies + (grp_.copies.size() == 1 ? " into a buffer of its own" : " into buffers of their own");
  w.comment(fmt::format("Reads {}; writes {}{}{}", reads.empty() ? "nothing" : reads, writes, copies,
                        keeps.empty() ? "" : "; keeps on chip " + keeps));
}

OperandRead operand_read(const Graph& g, const Node& n, int index, int space_rank) {
  OperandRead r{n.operands[static_cast<size_t>(index)], -1};
  if ((n.kind == OpKind::Quantize || n.kind == OpKind::Dequantize) && index == 1) {
    if (const std::optional<int64_t> a = attr::scale_axis(n.attrs)) r.axis = static_cast<int>(*a < 0 ? *a + space_rank : *a);
  }
  (void)g;
  return r;
}

std::string rounded_expr(DType t, const std::string& expr) {
  if (t == DType::F32) return expr;
  return fmt::format("lj_to_float(lj_from_float<{}>({}))", c_type(t), expr);
}

std::string pointwise_expr(const Node& n, const std::vector<std::string>& a) {
  switch (n.kind) {
    case OpKind::Add: return fmt::format("{} + {}", a[0], a[1]);
    case OpKind::Sub: return fmt::format("{} - {}", a[0], a[1]);
    case OpKind::Mul: return fmt::format("{} * {}", a[0], a[1]);
    case OpKind::Div: return fmt::format("{} / {}", a[0], a[1]);
    case OpKind::Silu: return fmt::format("lj_silu({})", a[0]);
    case OpKind::Gelu:
      return attr::gelu_approx(n.attrs) == attr::GeluApprox::Tanh ? fmt::format("lj_gelu_tanh({})", a[0]) : fmt::format("lj_gelu_erf({})", a[0]);
    case OpKind::Relu: return fmt::format("lj_relu({})", a[0]);
    case OpKind::Exp: return fmt::format("__expf({})", a[0]);
    case OpKind::Rsqrt: return fmt::format("lj_rsqrt({})", a[0]);
    // A cast inside a fused kernel rounds through the target type, so the value matches what an
    // unfused cast would have stored.
    case OpKind::Cast: return fmt::format("lj_to_float(lj_from_float<{}>({}))", c_type(attr::dtype(n.attrs)), a[0]);
    case OpKind::Dequantize: return fmt::format("{} * {}", a[0], a[1]);
    case OpKind::Quantize:
      return fmt::format("lj_to_float(lj_from_float<{}>({} / {}))", c_type(attr::dtype(n.attrs)), a[0], a[1]);
    case OpKind::Matmul:
    case OpKind::RmsNorm:
    case OpKind::RmsScale:
    case OpKind::LayerNorm:
    case OpKind::RopeTable:
    case OpKind::Rope:
    case OpKind::Softmax:
    case OpKind::Attention:
    case OpKind::KvCacheWrite:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Split:
    case OpKind::Concat:
    case OpKind::ReduceSum:
    case OpKind::ReduceMax:
    case OpKind::ReduceMean:
    case OpKind::Embedding:
    case OpKind::Argmax:
    case OpKind::AllReduce: break;
  }
  LJ_ASSERT(false, "{} is not a pointwise op", op_name(n.kind));
  __builtin_unreachable();
}

void emit_pointwise_node(SourceWriter& w, const Graph& g, NodeId n, int space_rank, const std::vector<ValueId>& group_inputs,
                         const std::map<OperandRead, std::string>& loaded, std::map<ValueId, std::string>& reg,
                         const std::vector<ValueId>& stored, ValueId rounded_by_store) {
  auto listed = [](const std::vector<ValueId>& vs, ValueId v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); };
  const Node& node = g.node(n);
  std::vector<std::string> ops;
  for (int i = 0; i < static_cast<int>(node.operands.size()); ++i) {
    const OperandRead rd = operand_read(g, node, i, space_rank);
    ops.push_back(listed(group_inputs, rd.value) ? loaded.at(rd) : reg.at(rd.value));
  }
  const ValueId r = node.results[0];
  const std::string t = "t_" + ident(g.value(r).name);
  const std::string expr = pointwise_expr(node, ops);
  if (r == rounded_by_store && g.value(r).type.dtype != DType::F32)
    w.line("const float {} = {};  // {} (rounded by its store)", t, expr, print_node(g, n));
  else
    w.line("const float {} = {};  // {}", t, rounded_expr(g.value(r).type.dtype, expr), print_node(g, n));
  reg[r] = t;
  if (listed(stored, r)) w.line("y_{}[j] = {};", ident(g.value(r).name), t);
}

std::vector<std::string> emit_coords(SourceWriter& w, const Shape& space, const std::string& flat, const std::string& stem) {
  std::vector<std::string> c(space.size());
  if (space.empty()) return c;
  std::string rest = flat;
  for (size_t k = space.size(); k-- > 1;) {
    c[k] = fmt::format("{}{}", stem, k);
    const std::string dim = product_expr(dim_as_product(space[k]));
    w.line("const lj_i64 {} = {} % {};", c[k], rest, dim);
    std::string q = fmt::format("{}q{}", stem, k);
    w.line("const lj_i64 {} = {} / {};", q, rest, dim);
    rest = q;
  }
  c[0] = rest;
  return c;
}

void emit_inv_freq_table(SourceWriter& w, const Graph& g, NodeId table) {
  const Node& tn = g.node(table);
  const int64_t dim = attr::rope_dim(tn.attrs);
  const attr::RopeScaling scaling = attr::rope_scaling(tn.attrs);
  const std::vector<double> freq = rope_inv_freq(dim, attr::rope_theta(tn.attrs), scaling);
  std::string values;
  for (size_t i = 0; i < freq.size(); ++i) {
    // 17 significant digits read back to the same double.
    values += fmt::format("{}{:.17g}", i == 0 ? "" : (i % 4 == 0 ? ",\n    " : ", "), freq[i]);
  }
  w.line("// {}: inv_freq[i] = {}", print_node(g, table), rope_inv_freq_formula(scaling));
  w.line("static __device__ const double lj_inv_freq[{}] = {{\n    {}}};", dim / 2, values);
  w.blank();
}

void emit_trigger_dependents(SourceWriter& w, const FusionGroup& grp) {
  if (grp.trigger_dependents) w.line("lj_pdl_launch_dependents();  // the next kernel, an attention reading its cache first, may launch now");
}

}  // namespace lj
