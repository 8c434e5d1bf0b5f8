// Which Hugging Face tensors make each param of the model's graphs: the one home of the name
// mapping and of the bind-time fusions. A param is the rows of one or more checkpoint tensors
// stacked along axis 0: %w_qkv is q_proj, k_proj and v_proj's weights, %w_gate_up gate_proj's and
// up_proj's, %b_qkv the three biases; %lm_head is the embedding table where the config ties them.
// The fourth fusion, folding each RMSNorm's weight into the matmul after it, is the executable's
// weight preparation (compiler/passes/fold_norms.cpp), run when the weights are bound.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/host_tensor.h"
#include "models/checkpoint.h"
#include "models/hf_config.h"

namespace lj::models {

struct TensorPart {
  std::string name;  ///< the checkpoint's tensor
  int64_t rows = 0;  ///< its extent along axis 0 (the rest of its shape is the param's)
};

struct ParamSource {
  std::string param;  ///< the graph param's name
  std::vector<TensorPart> parts;
  /// A 4-bit checkpoint's projection param (%w_qkv_q, _s, _z): which of the repacked tensors it is;
  /// each part then names a projection's prefix ("....self_attn.q_proj"), whose qweight, qzeros,
  /// scales (and g_idx) are read and repacked (models/quant_repack.h).
  enum class Quant { None, Codes, Scales, Zeros } quant = Quant::None;
  int64_t k = 0;  ///< a quantized projection's input features
};

/// Sources of the params of the layer graphs (@<m>_prefill, @<m>_decode) for layer `layer`.
std::vector<ParamSource> layer_param_sources(const ModelConfig& c, int64_t layer);
/// Sources of @<m>_embed's and @<m>_head's params.
std::vector<ParamSource> embed_param_sources(const ModelConfig& c);
std::vector<ParamSource> head_param_sources(const ModelConfig& c);

/// One param's bytes as the checkpoint holds them: its parts in order, each a mapped span that goes
/// at byte `offset` of the param's buffer (row-major, the parts stacked).
struct ParamBytes {
  ValueId param = -1;
  std::string name;
  TensorType type;  ///< constant shape
  uint64_t bytes = 0;
  struct Part {
    std::span<const unsigned char> data;
    uint64_t offset = 0;
  };
  std::vector<Part> parts;
  /// Bytes made at bind time (repacked 4-bit weights) that the parts point into; empty when the
  /// parts are the checkpoint's mapped bytes.
  std::shared_ptr<const std::vector<unsigned char>> owned;
};

/// A 4-bit checkpoint's scale dtype, from its first q_proj.scales, into c.layer.quant (the graphs'
/// scale params take it). Nothing for an unquantized config. Throws UserError when absent.
void take_scale_dtype(ModelConfig& c, const Checkpoint& ck);

/// Every param of `g`, found in `ck` through `sources` and checked: a param without a source, a
/// missing tensor, or a part whose dtype or shape differs from what the config makes of it is a
/// UserError naming the tensor, its shape and the shape expected. In g.inputs() order.
std::vector<ParamBytes> resolve_params(const Graph& g, const std::vector<ParamSource>& sources, const Checkpoint& ck,
                                       const ModelConfig& c);

/// The param's values (exact: the dtype's values widened to double), for the CPU reference.
HostTensor to_host(const ParamBytes& p);

}  // namespace lj::models
