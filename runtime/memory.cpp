// Device buffers, pinned buffers, copies, staging and the caching arena (see memory.h).
#include "runtime/memory.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "runtime/host_values.h"

namespace lj::rt {
namespace {

/// Destructors cannot return errors: report on stderr and carry on.
void report_in_destructor(const Context* ctx, CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) std::fprintf(stderr, "layerjit: %s\n", ctx->driver().describe(r, call).c_str());
}

}  // namespace

// ---- DeviceBuffer -------------------------------------------------------------------------------

Result<DeviceBuffer> DeviceBuffer::allocate(const Context& ctx, size_t bytes) {
  DeviceBuffer b;
  b.ctx_ = &ctx;
  b.bytes_ = bytes;
  // cuMemAlloc rejects 0 bytes; an empty buffer is a valid value with a null pointer.
  if (bytes == 0) return b;
  if (CUresult r = ctx.api().cuMemAlloc_(&b.ptr_, bytes); r != CUDA_SUCCESS) {
    return Error{fmt::format("allocating {} bytes of device memory: {}", bytes,
                             ctx.driver().describe(r, "cuMemAlloc"))};
  }
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ctx_(o.ctx_), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
  if (ptr_ != 0) report_in_destructor(ctx_, ctx_->api().cuMemFree_(ptr_), "cuMemFree");
  ptr_ = 0;
  bytes_ = 0;
}

// ---- PinnedBuffer -------------------------------------------------------------------------------

Result<PinnedBuffer> PinnedBuffer::allocate(const Context& ctx, size_t bytes) {
  PinnedBuffer b;
  b.ctx_ = &ctx;
  b.bytes_ = bytes;
  if (bytes == 0) return b;
  if (CUresult r = ctx.api().cuMemAllocHost_(&b.data_, bytes); r != CUDA_SUCCESS) {
    return Error{fmt::format("allocating {} bytes of pinned host memory: {}", bytes,
                             ctx.driver().describe(r, "cuMemAllocHost"))};
  }
  return b;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : ctx_(o.ctx_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { reset(); }

void PinnedBuffer::reset() {
  if (data_ != nullptr) report_in_destructor(ctx_, ctx_->api().cuMemFreeHost_(data_), "cuMemFreeHost");
  data_ = nullptr;
  bytes_ = 0;
}

// ---- copies -------------------------------------------------------------------------------------

Status copy_to_device(Stream& stream, CUdeviceptr dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  LJ_CU(stream.context().driver(), cuMemcpyHtoDAsync, dst, src, bytes, stream.handle());
  return {};
}

Status upload_tensor(Stream& stream, CUdeviceptr dst, const HostTensor& t) {
  std::vector<unsigned char> bytes(static_cast<size_t>(storage_bytes(t.dtype, t.numel())));
  if (std::optional<size_t> bad = encode_tensor(t, bytes.data()))
    return Error{fmt::format("element {} ({}) is not exact in {}: round_to_dtype() first", *bad, t.data[*bad], dtype_name(t.dtype))};
  LJ_RT_TRY(copy_to_device(stream, dst, bytes.data(), bytes.size()));
  return stream.synchronize();  // `bytes` goes out of scope
}

Status copy_to_host(Stream& stream, void* dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return {};
  LJ_CU(stream.context().driver(), cuMemcpyDtoHAsync, dst, src, bytes, stream.handle());
  return {};
}

Status copy_on_device(Stream& stream, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (bytes == 0) return {};
  LJ_CU(stream.context().driver(), cuMemcpyDtoDAsync, dst, src, bytes, stream.handle());
  return {};
}

Status copy_rows_on_device(Stream& stream, CUdeviceptr dst, size_t dst_pitch, CUdeviceptr src, size_t src_pitch, size_t row_bytes,
                           size_t rows) {
  if (rows == 0 || row_bytes == 0) return {};
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = src_pitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = dst_pitch;
  c.WidthInBytes = row_bytes;
  c.Height = rows;
  LJ_CU(stream.context().driver(), cuMemcpy2DAsync, &c, stream.handle());
  return {};
}

// ---- HostStaging --------------------------------------------------------------------------------

Result<HostStaging> HostStaging::create(const Context& ctx, size_t chunk_bytes) {
  LJ_RT_ASSIGN(PinnedBuffer b, PinnedBuffer::allocate(ctx, std::max<size_t>(chunk_bytes, 4096)));
  return HostStaging(std::move(b));
}

Status HostStaging::upload(Stream& stream, CUdeviceptr dst, const void* src, size_t bytes) {
  const auto* in = static_cast<const unsigned char*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(pinned_.bytes(), bytes - done);
    // The previous chunk's copy must finish before the pinned buffer is overwritten.
    LJ_RT_TRY(stream.synchronize());
    std::memcpy(pinned_.data(), in + done, n);
    LJ_RT_TRY(copy_to_device(stream, dst + done, pinned_.data(), n));
    done += n;
  }
  return stream.synchronize();
}

Status HostStaging::download(Stream& stream, void* dst, CUdeviceptr src, size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(pinned_.bytes(), bytes - done);
    LJ_RT_TRY(copy_to_host(stream, pinned_.data(), src + done, n));
    LJ_RT_TRY(stream.synchronize());
    std::memcpy(out + done, pinned_.data(), n);
    done += n;
  }
  return {};
}

// ---- Arena --------------------------------------------------------------------------------------

size_t Arena::round_up(size_t bytes) {
  const size_t granule = bytes < (size_t{1} << 20) ? 256 : (size_t{2} << 20);
  return std::max<size_t>(granule, (bytes + granule - 1) / granule * granule);
}

Result<ArenaBlock> Arena::acquire(size_t bytes) {
  const size_t want = round_up(bytes);
  // Best fit, but never hand out a block more than twice the request: that memory would sit idle.
  if (auto it = free_.lower_bound(want); it != free_.end() && it->first <= 2 * want) {
    ArenaBlock block(this, it->second, it->first);
    stats_.bytes_cached -= it->first;
    stats_.bytes_on_loan += it->first;
    stats_.reuses++;
    free_.erase(it);
    return block;
  }
  CUdeviceptr p = 0;
  if (CUresult r = ctx_->api().cuMemAlloc_(&p, want); r != CUDA_SUCCESS) {
    // Out of memory with blocks cached: free them and try once more.
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !free_.empty()) {
      LJ_RT_TRY(trim());
      return acquire(bytes);
    }
    return Error{fmt::format("arena: allocating {} bytes: {}", want, ctx_->driver().describe(r, "cuMemAlloc"))};
  }
  stats_.driver_allocations++;
  stats_.bytes_on_loan += want;
  return ArenaBlock(this, p, want);
}

void Arena::give_back(CUdeviceptr ptr, size_t bytes) {
  stats_.bytes_on_loan -= bytes;
  stats_.bytes_cached += bytes;
  free_.emplace(bytes, ptr);
}

Status Arena::trim() {
  Status first_error;
  for (const auto& [bytes, ptr] : free_) {
    Status s = ctx_->driver().check(ctx_->api().cuMemFree_(ptr), "cuMemFree");
    if (!s.ok() && first_error.ok()) first_error = s;
    stats_.bytes_cached -= bytes;
  }
  free_.clear();
  return first_error;
}

Arena::~Arena() {
  if (stats_.bytes_on_loan != 0) {
    std::fprintf(stderr, "layerjit: internal error: arena destroyed with %zu bytes still on loan\n",
                 stats_.bytes_on_loan);
  }
  Status s = trim();
  if (!s.ok()) std::fprintf(stderr, "layerjit: %s\n", s.message().c_str());
}

ArenaBlock::ArenaBlock(ArenaBlock&& o) noexcept
    : arena_(std::exchange(o.arena_, nullptr)), ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

ArenaBlock& ArenaBlock::operator=(ArenaBlock&& o) noexcept {
  if (this != &o) {
    release();
    arena_ = std::exchange(o.arena_, nullptr);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

ArenaBlock::~ArenaBlock() { release(); }

void ArenaBlock::release() {
  if (arena_ != nullptr) arena_->give_back(ptr_, bytes_);
  arena_ = nullptr;
  ptr_ = 0;
  bytes_ = 0;
}

}  // namespace lj::rt
