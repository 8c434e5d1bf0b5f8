// Shared machinery of the emitters: kernel parameters, C++ spellings of dtypes, addresses of
// (possibly strided, possibly broadcast) operands, and pointwise op expressions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/source_writer.h"
#include "compiler/fusion/tensor_layout.h"

namespace lj {

/// Storage type of a dtype in device code: lj_bf16, float, ...
const char* c_type(DType t);

/// A C++ identifier for a value name (names may contain '.' or start with a digit).
std::string ident(std::string_view value_name);

/// lj_<graph>_g<id>_<kind>: stable, so profilers show our names.
std::string kernel_name(const Graph& g, const FusionGroup& grp);

class KernelContext {
 public:
  KernelContext(const Graph& g, const FusionGroup& grp);

  const Graph& graph() const { return g_; }
  const FusionGroup& group() const { return grp_; }
  const TensorLayout& layout(ValueId v) const { return layouts_[static_cast<size_t>(v)]; }
  std::string kernel_name() const;

  /// Registers the buffer behind `v` as a parameter (once) and returns its C++ name.
  std::string buffer_param(ValueId v, bool written);
  /// Registers the buffer of its own that a copied returned view `v` (FusionGroup::copies) is stored
  /// to, as a written parameter named after `v` (once), and returns its C++ name; `v` is still read
  /// through buffer_param and address, in place in the buffer it aliases.
  std::string copy_param(ValueId v);
  /// Adds a TMA tensor map over `v`'s buffer (see KernelParam::Kind::TensorMap) and returns its name.
  std::string tensor_map_param(ValueId v, const TensorMapSpec& spec);
  /// Adds the kernel's scratch buffer parameter (see KernelParam::Kind::Scratch) and returns its name.
  std::string scratch_param(int64_t per_block);
  /// The symbols of every shape the kernel touches become int64 parameters.
  void add_symbol_params();
  /// The usual parameter list: every group input, then every output, every copy, then the symbols.
  void add_group_params();
  /// vector_width() over every group input and output, up to 16 bytes of the widest dtype.
  int group_vector_width(const Shape& space) const;
  const std::vector<KernelParam>& params() const { return params_; }
  /// The kernel written in `w`: its group, name, source and these params (the launch is the caller's).
  GeneratedKernel kernel(const SourceWriter& w) const;
  /// "extern \"C\" __global__ void name(params...)" with __launch_bounds__(threads[, min_blocks]).
  std::string signature(int threads, int min_blocks = 0, int cluster = 1) const;

  /// Element offset of `v` at the iteration coordinates `coords` (one C++ expression per dim of the
  /// iteration space `space`; `v`'s dims align right, size-1 dims broadcast). `axis` >= 0 maps a
  /// rank-1 `v` onto that axis instead (a per-channel quantization scale).
  std::string address(ValueId v, const Shape& space, const std::vector<std::string>& coords, int axis = -1) const;
  /// Element offset of a copied returned view `v` in its own buffer (dense, row-major) at `coords`,
  /// one per dim of `v`.
  std::string copy_address(ValueId v, const std::vector<std::string>& coords) const;
  /// True if `v` varies along the innermost dim of `space` (false: broadcast along it).
  bool varies_innermost(ValueId v, const Shape& space, int axis = -1) const;
  /// Largest vector width (elements) <= max_width for which every listed value's innermost run is
  /// contiguous and aligned: stride 1, offset and other strides multiples of the width.
  int vector_width(const std::vector<ValueId>& values, const Shape& space, int max_width) const;

  /// Header comment listing the IR nodes the kernel implements.
  void header_comment(SourceWriter& w) const;

 private:
  /// The Buffer parameter of buffer `buf` (added on first use; flags merged).
  std::string param_of_buffer(ValueId buf, bool written);
  const Graph& g_;
  const FusionGroup& grp_;
  std::vector<TensorLayout> layouts_;
  std::vector<KernelParam> params_;
};

/// How a pointwise node reads one operand: the value, and the axis a per-channel scale follows (-1:
/// numpy broadcasting). The same value read two ways is loaded twice.
struct OperandRead {
  ValueId value = -1;
  int axis = -1;
  bool operator<(const OperandRead& o) const { return value != o.value ? value < o.value : axis < o.axis; }
  bool operator==(const OperandRead&) const = default;
};
OperandRead operand_read(const Graph& g, const Node& n, int index, int space_rank);

/// Emits one pointwise node inside a kernel's per-element loop (index `j`):
/// `const float t_<result> = <expr rounded to the result dtype>;  // <IR statement>`. Operands are read
/// from `reg` (values computed earlier in the kernel) or `loaded` (group inputs, by how they are
/// read); the result is recorded in `reg` and copied to `y_<result>[j]` when `stored` lists it.
/// `rounded_by_store`: a result the caller only stores in its own dtype, so it is left unrounded
/// here (the store's conversion rounds it once, to the same value).
void emit_pointwise_node(SourceWriter& w, const Graph& g, NodeId n, int space_rank, const std::vector<ValueId>& group_inputs,
                         const std::map<OperandRead, std::string>& loaded, std::map<ValueId, std::string>& reg,
                         const std::vector<ValueId>& stored, ValueId rounded_by_store = -1);

/// `expr` rounded through dtype `t` (unchanged for f32): fused kernels keep every intermediate at
/// its IR dtype, so a fused group computes exactly what the unfused ops would store.
std::string rounded_expr(DType t, const std::string& expr);

/// The fp32 expression of a pointwise node over its operands' register expressions.
std::string pointwise_expr(const Node& n, const std::vector<std::string>& operands);

/// Emits `coords[i]` for the flattened index `flat` of `space` (innermost first; the outermost
/// takes the quotient). Returns the coordinate variable names.
std::vector<std::string> emit_coords(SourceWriter& w, const Shape& space, const std::string& flat, const std::string& stem);

/// A rope_table's theta^(-2i/dim), i < dim/2, as the file-scope `lj_inv_freq` (double) array the
/// kernels computing its angles index: constants computed here in double exactly as the CPU reference
/// computes them, so no kernel spends time on pow() and the angles match the reference bit for bit.
void emit_inv_freq_table(SourceWriter& w, const Graph& g, NodeId table);

/// After the kernel's lj_pdl_begin: lj_pdl_launch_dependents() where the plan lets the next kernel
/// launch early (FusionGroup::trigger_dependents), else nothing.
void emit_trigger_dependents(SourceWriter& w, const FusionGroup& grp);

}  // namespace lj
