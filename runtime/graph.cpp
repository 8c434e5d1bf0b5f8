// CUDA graph capture, replay and argument update (see graph.h).
#include "runtime/graph.h"

#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace lj::rt {

Result<Graph> Graph::capture(Stream& stream, const std::function<Status()>& body) {
  const Driver& drv = stream.context().driver();
  Graph g;
  g.ctx_ = &stream.context();
  // Thread-local mode: other threads' unrelated CUDA calls neither break nor join this capture.
  LJ_CU(drv, cuStreamBeginCapture, stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  stream.capture_log_ = &g.launches_;
  Status body_status = body();
  stream.capture_log_ = nullptr;
  // Capture must be ended even when the body failed, or the stream stays unusable.
  CUgraph graph = nullptr;
  CUresult end = drv.api().cuStreamEndCapture_(stream.handle(), &graph);
  g.graph_ = graph;
  if (!body_status.ok()) return Error{"while capturing a CUDA graph: " + body_status.message()};
  LJ_RT_TRY(drv.check(end, "cuStreamEndCapture"));
  LJ_CU(drv, cuGraphInstantiateWithFlags, &g.exec_, g.graph_, 0);
  return g;
}

Graph::Graph(Graph&& o) noexcept
    : ctx_(o.ctx_),
      graph_(std::exchange(o.graph_, nullptr)),
      exec_(std::exchange(o.exec_, nullptr)),
      launches_(std::move(o.launches_)) {}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    destroy();
    ctx_ = o.ctx_;
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    launches_ = std::move(o.launches_);
  }
  return *this;
}

Graph::~Graph() { destroy(); }

void Graph::destroy() {
  if (exec_ != nullptr) {
    if (CUresult r = ctx_->api().cuGraphExecDestroy_(exec_); r != CUDA_SUCCESS)
      std::fprintf(stderr, "layerjit: %s\n", ctx_->driver().describe(r, "cuGraphExecDestroy").c_str());
  }
  if (graph_ != nullptr) {
    if (CUresult r = ctx_->api().cuGraphDestroy_(graph_); r != CUDA_SUCCESS)
      std::fprintf(stderr, "layerjit: %s\n", ctx_->driver().describe(r, "cuGraphDestroy").c_str());
  }
  exec_ = nullptr;
  graph_ = nullptr;
}

Status Graph::replay(Stream& stream) const {
  LJ_CU(ctx_->driver(), cuGraphLaunch, exec_, stream.handle());
  return {};
}

Status Graph::update_args(size_t index, KernelArgs& args) {
  if (index >= launches_.size()) {
    return Error{fmt::format("graph has {} captured launch(es); there is no launch {}", launches_.size(), index)};
  }
  const CapturedLaunch& l = launches_[index];
  if (l.param_sizes_known && l.param_sizes != args.sizes()) {
    return Error{fmt::format("new arguments for captured launch {} (`{}`) do not match its parameter list",
                             index, l.kernel)};
  }
  const Driver& drv = ctx_->driver();
  CUDA_KERNEL_NODE_PARAMS_v2 params{};
  LJ_CU(drv, cuGraphKernelNodeGetParams, l.node, &params);
  // The driver copies the argument values here, so `args` need not outlive the call.
  params.kernelParams = args.pointers();
  params.extra = nullptr;
  LJ_CU(drv, cuGraphExecKernelNodeSetParams, exec_, l.node, &params);
  return {};
}

}  // namespace lj::rt
