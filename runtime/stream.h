// A CUDA stream, owned or borrowed. Every asynchronous runtime operation (copies, fills, launches, graph
// replays, timing) is ordered on one.
#pragma once

#include <vector>

#include "runtime/context.h"

namespace lj::rt {

struct CapturedLaunch;

class Stream {
 public:
  /// A new non-blocking stream (it does not synchronise with the legacy default stream).
  static Result<Stream> create(const Context& ctx);
  /// A stream the caller owns (PyTorch's current stream, a cudaStream_t of `ctx`'s primary
  /// context; nullptr is the legacy default stream): used, never destroyed.
  static Stream wrap(const Context& ctx, CUstream s);
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  CUstream handle() const { return stream_; }
  const Context& context() const { return *ctx_; }
  Status synchronize() const;
  /// Whether a graph capture is in progress on this stream.
  Result<bool> capturing() const;
  /// Non-null while Graph::capture records this stream: launch() appends the node each launch became.
  std::vector<CapturedLaunch>* capture_log() const { return capture_log_; }

 private:
  friend class Graph;
  Stream(const Context* ctx, CUstream s, bool owned) : ctx_(ctx), stream_(s), owned_(owned) {}

  const Context* ctx_ = nullptr;
  CUstream stream_ = nullptr;
  bool owned_ = true;  // destroyed with this object (false: wrap())
  /// Set by Graph::capture while it records: each launch appends the node it became.
  std::vector<CapturedLaunch>* capture_log_ = nullptr;
};

}  // namespace lj::rt
