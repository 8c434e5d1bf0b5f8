// The public model API (layerjit/model.h) over models/: the internal Model and DeviceModel behind the
// pimpl, internal Result errors turned into RuntimeError (UserError passes through as thrown).
#include "layerjit/model.h"

#include <optional>

#include "models/device_model.h"
#include "models/tp_model.h"
#include "models/generate.h"
#include "models/model.h"
#include "runtime/context.h"

namespace lj {

namespace {

Generation generation_of(models::GenerateResult r) {
  Generation g;
  g.tokens = std::move(r.tokens);
  g.logits = std::move(r.logits);
  g.step_ms = std::move(r.step_ms);
  return g;
}

models::GenerateOptions options_of(const GenerateSettings& s) {
  models::GenerateOptions o;
  o.new_tokens = s.new_tokens;
  o.keep_logits = s.keep_logits;
  return o;
}

ModelInfo info_of(const models::Model& m) {
  const models::ModelConfig& c = m.config();
  ModelInfo i;
  i.name = c.layer.name;
  i.architecture = std::string(models::architecture_name(c.architecture));
  i.layers = c.n_layers;
  i.hidden = c.layer.hidden;
  i.heads = c.layer.n_heads;
  i.kv_heads = c.layer.n_kv_heads;
  i.head_dim = c.layer.head_dim;
  i.intermediate = c.layer.ffn;
  i.vocab = c.vocab;
  i.max_positions = c.max_positions;
  i.sliding_window = c.layer.sliding_window.value_or(0);
  i.tied_embeddings = c.tie_embeddings;
  i.qkv_bias = c.layer.qkv_bias;
  i.qk_norm = c.layer.qk_norm;
  i.dtype = c.layer.dtype;
  i.weight_bytes = m.weight_bytes();
  return i;
}

}  // namespace

struct Model::Impl {
  models::Model model;
  ModelInfo info;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::open(const std::string& dir) {
  models::Model m = models::Model::open(dir);
  ModelInfo info = info_of(m);
  return Model(std::make_unique<Impl>(Impl{std::move(m), std::move(info)}));
}

const ModelInfo& Model::info() const { return impl_->info; }

std::vector<Graph> Model::graphs() const {
  const models::ModelGraphs& g = impl_->model.graphs();
  return {g.embed, g.prefill, g.decode, g.head};
}

std::vector<std::string> Model::unused_tensors() const { return impl_->model.unused_tensors(); }

Generation Model::generate_cpu(const std::vector<int32_t>& prompt, const GenerateSettings& settings, int tensor_parallel) const {
  return generation_of(models::generate_reference(impl_->model, prompt, options_of(settings), tensor_parallel));
}

struct ModelRunner::Impl {
  std::optional<models::DeviceModel> dm;
  std::unique_ptr<models::TpModel> tp;  // tensor_parallel > 1
};

ModelRunner::ModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelRunner::ModelRunner(ModelRunner&&) noexcept = default;
ModelRunner& ModelRunner::operator=(ModelRunner&&) noexcept = default;
ModelRunner::~ModelRunner() = default;

ModelRunner ModelRunner::open(const Device& device, const Model& model, const ModelRunnerSettings& settings) {
  rt::Context& ctx = *static_cast<rt::Context*>(device.ctx_);
  if (auto s = ctx.make_current(); !s.ok()) throw RuntimeError(s.message());
  models::DeviceModelOptions o;
  o.capacity = settings.capacity;
  o.graphs = settings.cuda_graphs;
  o.build.fusion.fuse = settings.fuse;
  o.build.use_tuned = settings.use_tuned;
  auto impl = std::make_unique<Impl>();
  if (settings.tensor_parallel > 1) {
    models::TpModelOptions to;
    to.model = o;
    to.tp = settings.tensor_parallel;
    for (int r = 0; r < to.tp; ++r) to.devices.push_back(device.ordinal() + r);
    rt::Result<std::unique_ptr<models::TpModel>> tm = models::TpModel::open(model.impl_->model, to);
    if (!tm.ok()) throw RuntimeError(tm.message());
    impl->tp = std::move(tm).value();
    return ModelRunner(std::move(impl));
  }
  rt::Result<models::DeviceModel> dm = models::DeviceModel::open(ctx, model.impl_->model, o);
  if (!dm.ok()) throw RuntimeError(dm.message());
  impl->dm.emplace(std::move(dm).value());
  return ModelRunner(std::move(impl));
}

Generation ModelRunner::generate(const std::vector<int32_t>& prompt, const GenerateSettings& settings) {
  rt::Result<models::GenerateResult> r = impl_->tp ? impl_->tp->generate(prompt, options_of(settings))
                                                   : impl_->dm->generate(prompt, options_of(settings));
  if (!r.ok()) throw RuntimeError(r.message());
  return generation_of(std::move(r).value());
}

int64_t ModelRunner::capacity() const { return impl_->tp ? impl_->tp->capacity() : impl_->dm->capacity(); }
size_t ModelRunner::launches_per_decode_step() const {
  return impl_->tp ? impl_->tp->launches_per_decode_step() : impl_->dm->launches_per_decode_step();
}
double ModelRunner::compile_seconds() const { return impl_->tp ? impl_->tp->compile_seconds() : impl_->dm->compile_seconds(); }

}  // namespace lj
