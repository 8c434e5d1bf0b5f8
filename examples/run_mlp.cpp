// Example program: the C++ path from a graph to results on the GPU. Parses a SwiGLU MLP block, builds
// an executable (fusion plan, kernels compiled with NVRTC through the kernel cache), binds device
// buffers to its inputs, runs it for T = 5 tokens and prints the first outputs. Without a GPU it says
// so and exits 77 (the project's "skipped").
#include <cstdio>
#include <vector>

#include "exec/executable.h"
#include "layerjit/text.h"
#include "runtime/fill.h"

using namespace lj;

int main() {
  const Module m = parse_module(R"(
graph @mlp(%x: bf16[T, 64], %w_gate_up: param bf16[256, 64], %w_down: param bf16[64, 128]) {
  %gate_up = matmul(%x, %w_gate_up)
  %gate, %up = split(%gate_up) {axis = 1, sizes = [128, 128]}
  %g = silu(%gate)
  %act = mul(%g, %up)
  %y = matmul(%act, %w_down)
  return %y
})", "run_mlp");
  const Graph& g = m.graphs[0];
  auto ctx = rt::Context::get(0);
  if (!ctx.ok()) {
    std::printf("skipped: no CUDA driver (%s)\n", ctx.message().c_str());
    return 77;
  }
  auto stream = rt::Stream::create(**ctx);
  Bindings b;
  b.set("T", 5);
  exec::BuildOptions opts;
  opts.hint = b;  // the sizes the kernels are chosen for (any T runs)
  auto e = exec::Executable::build(**ctx, g, opts);
  if (!stream.ok() || !e.ok()) {
    std::fprintf(stderr, "run_mlp: %s\n", (!stream.ok() ? stream.message() : e.message()).c_str());
    return 1;
  }
  std::vector<rt::DeviceBuffer> inputs;  // random values in [-0.1, 0.1), one buffer per graph input
  for (ValueId v : g.inputs()) {
    const size_t n = static_cast<size_t>(numel(resolve(g.value(v).type.shape, b)));
    auto buf = rt::DeviceBuffer::allocate(**ctx, n * 2);
    if (!buf.ok() || !rt::fill_random_bf16(*stream, buf->ptr(), n, 7 + static_cast<uint64_t>(v), -0.1f, 0.1f).ok() ||
        !e->bind(v, buf->ptr()).ok())
      return 1;
    inputs.push_back(std::move(*buf));
  }
  if (rt::Status s = e->run(*stream, b); !s.ok()) {
    std::fprintf(stderr, "run_mlp: %s\n", s.message().c_str());
    return 1;
  }
  auto y = e->download(*stream, g.outputs()[0], b);  // synchronizes
  if (!y.ok()) return 1;
  std::printf("@mlp: %zu kernels; y[0, 0:4] = %.5f %.5f %.5f %.5f\n", e->kernels().size(), y->data[0], y->data[1], y->data[2], y->data[3]);
  return 0;
}
