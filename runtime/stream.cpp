// Streams, owned or borrowed (see stream.h).
#include "runtime/stream.h"

#include <cstdio>
#include <utility>

namespace lj::rt {

Result<Stream> Stream::create(const Context& ctx) {
  CUstream s = nullptr;
  LJ_CU(ctx.driver(), cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  return Stream(&ctx, s, true);
}

Stream Stream::wrap(const Context& ctx, CUstream s) { return Stream(&ctx, s, false); }

Stream::Stream(Stream&& other) noexcept
    : ctx_(other.ctx_), stream_(std::exchange(other.stream_, nullptr)), owned_(other.owned_), capture_log_(other.capture_log_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    this->~Stream();
    ctx_ = other.ctx_;
    stream_ = std::exchange(other.stream_, nullptr);
    owned_ = other.owned_;
    capture_log_ = other.capture_log_;
  }
  return *this;
}

Stream::~Stream() {
  if (stream_ == nullptr || !owned_) return;
  // A destructor cannot return an error; a failure here means the context is already broken,
  // which the next checked call reports.
  if (CUresult r = ctx_->api().cuStreamDestroy_(stream_); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "layerjit: %s\n", ctx_->driver().describe(r, "cuStreamDestroy").c_str());
  }
  stream_ = nullptr;
}

Status Stream::synchronize() const {
  LJ_CU(ctx_->driver(), cuStreamSynchronize, stream_);
  return {};
}

Result<bool> Stream::capturing() const {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  LJ_CU(ctx_->driver(), cuStreamIsCapturing, stream_, &status);
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace lj::rt
