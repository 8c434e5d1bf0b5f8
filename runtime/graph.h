// CUDA graphs: a sequence of launches captured once from a stream and replayed with one launch call,
// which removes the per-kernel CPU launch cost (what a decode step of a small layer is made of).
// Arguments of a captured kernel can be replaced in the instantiated graph (a symbol such as the
// context length changed) without capturing again.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/launch.h"

namespace lj::rt {

/// One kernel launch recorded during capture.
struct CapturedLaunch {
  CUgraphNode node = nullptr;
  std::string kernel;
  std::vector<size_t> param_sizes;
  bool param_sizes_known = false;
};

class Graph {
 public:
  /// Runs `body` with `stream` in capture mode (nothing executes), then instantiates the graph.
  /// Every launch() on `stream` inside `body` is recorded, in order, for update_args().
  static Result<Graph> capture(Stream& stream, const std::function<Status()>& body);
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  /// Launches the whole graph on `stream`.
  Status replay(Stream& stream) const;
  /// Number of kernel launches captured.
  size_t launch_count() const { return launches_.size(); }
  /// Replaces the arguments of the `index`-th captured launch in the instantiated graph; later
  /// replays use them. Geometry and kernel stay as captured.
  Status update_args(size_t index, KernelArgs& args);

 private:
  Graph() = default;
  void destroy();
  const Context* ctx_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::vector<CapturedLaunch> launches_;
};

}  // namespace lj::rt
