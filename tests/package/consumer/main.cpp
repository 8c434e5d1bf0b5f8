// A consumer of the installed package (tests/package): the public API alone, layerjit/layerjit.h.
// CPU part: parse, plan, compile for sm_80 (cubins, PTX), print one kernel's first source line,
// catch a UserError thrown inside the library by its type. GPU part (where a driver and device are):
// build the graph, run it on device tensors, compare with the CPU reference; capture it from the
// default stream and replay it on new inputs written into the bound tensors, y poisoned first.
// With a Hugging Face model directory as its argument, layerjit/model.h too: open it, generate on the
// CPU reference and (with a device) on the GPU, the same tokens from both.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "layerjit/layerjit.h"
#include "layerjit/model.h"
#include "layerjit/reference.h"

namespace {
constexpr const char* kMlp = R"(graph @mlp(%x: bf16[T, 64], %w_gate_up: param bf16[320, 64], %w_down: param bf16[64, 160])
    -> bf16[T, 64] {
  %gu = matmul(%x, %w_gate_up)
  %gate, %up = split(%gu) {axis = 1, sizes = [160, 160]}
  %g = silu(%gate)
  %act = mul(%g, %up)
  %y = matmul(%act, %w_down)
  return %y
}
)";

int fail(const char* what) {
  std::fprintf(stderr, "consumer: FAILED: %s\n", what);
  return 1;
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// A model directory through layerjit/model.h: the CPU reference, then the GPU where there is one.
int run_model(const char* dir) {
  const lj::Model model = lj::Model::open(dir);
  const lj::ModelInfo& info = model.info();
  std::printf("model %s: %s, %lld layers, hidden %lld, vocab %lld, %zu graphs\n", info.name.c_str(), info.architecture.c_str(),
              static_cast<long long>(info.layers), static_cast<long long>(info.hidden), static_cast<long long>(info.vocab),
              model.graphs().size());
  const std::vector<int32_t> prompt = {5, 17, 250, 3};
  const lj::Generation cpu = model.generate_cpu(prompt, {4, true});
  std::printf("generate_cpu: %s\n", joined(cpu.tokens).c_str());
  if (cpu.tokens.size() != 4 || cpu.logits.shape != std::vector<int64_t>{4, info.vocab}) return fail("generate_cpu's result");
  try {
    model.generate_cpu({static_cast<int32_t>(info.vocab)}, {});
    return fail("a token outside the vocabulary was accepted");
  } catch (const lj::UserError& e) {
    std::printf("caught: %s\n", e.what());
  }
  if (!lj::Device::available()) return 0;
  lj::ModelRunner runner = lj::ModelRunner::open(lj::Device::open(0), model, {64});
  const lj::Generation gpu = runner.generate(prompt, {4, false});
  std::printf("ModelRunner (%zu kernels per decode step): %s\n", runner.launches_per_decode_step(), joined(gpu.tokens).c_str());
  if (gpu.tokens != cpu.tokens) return fail("the GPU generated other tokens than the CPU reference");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return run_model(argv[1]);
  std::printf("layerjit %s\n", std::string(lj::version()).c_str());
  const lj::Module m = lj::parse_module(kMlp, "mlp.lj");
  const lj::Graph& g = m.graphs[0];
  lj::Bindings b;
  b.set("T", 7);

  const lj::PlanInfo p = lj::plan(g, {b, true});
  std::printf("plan: %zu groups\n", p.groups.size());
  if (p.groups.empty()) return fail("no groups");

  lj::CompileSettings cs;
  cs.arch = "sm_80";
  cs.sizes = b;
  const lj::CompiledKernels c = lj::compile(g, cs);
  for (const lj::KernelInfo& k : c.kernels) {
    if (k.cubin.size() < 4 || std::memcmp(k.cubin.data(), "\x7f" "ELF", 4) != 0) return fail("a kernel without a cubin");
    if (k.ptx.find(".entry " + k.name) == std::string::npos) return fail("a kernel's PTX without its entry");
  }
  std::printf("compiled %zu kernels for %s; %s starts: %s\n", c.kernels.size(), c.arch.c_str(), c.kernels[0].name.c_str(),
              c.kernels[0].source.substr(0, c.kernels[0].source.find('\n')).c_str());

  try {
    lj::parse_module("graph @f(%x: bf16[T]) -> bf16[T] {\n  %y = nope(%x)\n  return %y\n}\n", "bad.lj");
    return fail("a malformed graph parsed");
  } catch (const lj::UserError& e) {
    std::printf("caught: %s\n", e.formatted().c_str());
    if (e.loc().line != 2) return fail("the error's line");
  }

  if (!lj::Device::available()) {
    std::printf("GPU part skipped: no CUDA driver\n");
    return 0;
  }
  const lj::Device dev = lj::Device::open(0);
  std::printf("device: %s (sm_%d)\n", dev.name().c_str(), dev.compute_capability());
  lj::Executable exe = lj::Executable::build(dev, g, {b});
  std::map<std::string, lj::HostTensor> host;
  std::vector<lj::DeviceTensor> dev_tensors;
  std::vector<lj::TensorRef> refs;
  uint64_t seed = 1;
  for (lj::ValueId v : g.inputs()) {
    const lj::ValueInfo& info = g.value(v);
    lj::HostTensor t(info.type.dtype, lj::resolve(info.type.shape, b));
    lj::fill_uniform(t, seed++, -0.5, 0.5);
    dev_tensors.push_back(lj::DeviceTensor::upload(dev, t));
    refs.push_back(dev_tensors.back().ref(info.name));
    host[info.name] = std::move(t);
  }
  lj::DeviceTensor y = lj::DeviceTensor::empty(dev, lj::DType::BF16, {7, 64});
  refs.push_back(y.ref("y"));
  exe.run(refs);
  const lj::HostTensor want = lj::run_reference(g, host, b)[0];
  auto worst_diff = [&](const lj::HostTensor& got, const lj::HostTensor& ref) {
    double worst = 0;
    for (size_t i = 0; i < ref.data.size(); ++i)
      worst = std::fmax(worst, std::fabs(got.data[i] - ref.data[i]) / (std::fabs(ref.data[i]) + 0.05));
    return worst;
  };
  const double eager = worst_diff(y.download(), want);
  std::printf("GPU run against the CPU reference: worst relative difference %.4f\n", eager);
  if (!(eager < 0.05)) return fail("the GPU result differs from the CPU reference");

  // A CUDA graph captured from the default stream (the driver cannot capture that one itself), then
  // replayed with new input values written into the bound tensors and y poisoned first.
  const lj::CapturedRun graph = exe.capture(b);
  lj::HostTensor x2(lj::DType::BF16, {7, 64});
  lj::fill_uniform(x2, 99, -1.0, 1.0);
  x2.round_to_dtype();
  dev_tensors[0].write(x2);
  host["x"] = x2;
  lj::HostTensor poison(lj::DType::BF16, {7, 64});
  for (double& v : poison.data) v = 1000.0;
  y.write(poison);
  graph.replay();
  const lj::HostTensor want2 = lj::run_reference(g, host, b)[0];
  const double replayed = worst_diff(y.download(), want2);
  std::printf("replayed graph (%zu launches) on new inputs against the CPU reference: worst relative difference %.4f\n",
              graph.launches(), replayed);
  if (!(replayed < 0.05)) return fail("the replayed graph's result differs from the CPU reference");
  try {
    y.write(lj::HostTensor(lj::DType::F32, {7, 64}));
    return fail("a write of the wrong dtype was accepted");
  } catch (const lj::UserError& e) {
    std::printf("caught: %s\n", e.what());
  }
  return 0;
}
