// Device memory: RAII buffers, pinned host buffers, copies, host staging through pinned memory, and a
// caching arena for the intermediates of a layer (allocating from the driver on every call would cost
// a device synchronisation each time).
#pragma once

#include <cstddef>
#include <map>
#include <span>

#include "layerjit/host_tensor.h"
#include "runtime/stream.h"
#include "layerjit/check.h"

namespace lj::rt {

/// Owned device memory (cuMemAlloc / cuMemFree).
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(const Context& ctx, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  const Context* ctx_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

/// Owned page-locked host memory (cuMemAllocHost): the only host memory the copy engines read and
/// write asynchronously.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> allocate(const Context& ctx, size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset();
  const Context* ctx_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// Asynchronous copies on `stream`. Host memory must stay valid until the stream reaches the copy;
/// with pageable host memory the driver copies synchronously, so prefer pinned memory or HostStaging.
Status copy_to_device(Stream& stream, CUdeviceptr dst, const void* src, size_t bytes);
Status copy_to_host(Stream& stream, void* dst, CUdeviceptr src, size_t bytes);
Status copy_on_device(Stream& stream, CUdeviceptr dst, CUdeviceptr src, size_t bytes);
/// `t` in its device encoding (storage_bytes(t.dtype, t.numel()) bytes) to `dst`, then synchronizes
/// `stream` (the encoded bytes are this call's own). An error names the first element its dtype
/// cannot hold exactly: round first (HostTensor::round_to_dtype).
Status upload_tensor(Stream& stream, CUdeviceptr dst, const HostTensor& t);
/// `rows` runs of `row_bytes` each, from `src` at a pitch of `src_pitch` bytes to `dst` at `dst_pitch`
/// (a strided view into a dense buffer, or back).
Status copy_rows_on_device(Stream& stream, CUdeviceptr dst, size_t dst_pitch, CUdeviceptr src, size_t src_pitch, size_t row_bytes,
                           size_t rows);

/// Moves pageable host data to and from the device through one pinned buffer, in chunks: the copy
/// engine runs at full speed and the caller's memory needs no pinning.
class HostStaging {
 public:
  static Result<HostStaging> create(const Context& ctx, size_t chunk_bytes = size_t{8} << 20);
  /// Returns once `src` may be reused; the device copy is ordered on `stream`.
  Status upload(Stream& stream, CUdeviceptr dst, const void* src, size_t bytes);
  /// Returns once `dst` holds the data (synchronises `stream`).
  Status download(Stream& stream, void* dst, CUdeviceptr src, size_t bytes);

  template <class T>
  Status upload(Stream& stream, const DeviceBuffer& dst, std::span<const T> src) {
    LJ_ASSERT(src.size_bytes() <= dst.bytes(), "upload of {} bytes into a {}-byte buffer", src.size_bytes(),
              dst.bytes());
    return upload(stream, dst.ptr(), src.data(), src.size_bytes());
  }
  template <class T>
  Status download(Stream& stream, std::span<T> dst, const DeviceBuffer& src) {
    LJ_ASSERT(dst.size_bytes() <= src.bytes(), "download of {} bytes from a {}-byte buffer", dst.size_bytes(),
              src.bytes());
    return download(stream, dst.data(), src.ptr(), dst.size_bytes());
  }

 private:
  explicit HostStaging(PinnedBuffer b) : pinned_(std::move(b)) {}
  PinnedBuffer pinned_;
};

class Arena;

/// A block on loan from an Arena; returns to the arena's cache when destroyed.
class ArenaBlock {
 public:
  ArenaBlock() = default;
  ArenaBlock(ArenaBlock&& other) noexcept;
  ArenaBlock& operator=(ArenaBlock&& other) noexcept;
  ArenaBlock(const ArenaBlock&) = delete;
  ArenaBlock& operator=(const ArenaBlock&) = delete;
  ~ArenaBlock();

  CUdeviceptr ptr() const { return ptr_; }
  /// The usable size (the request rounded up to the arena's granularity).
  size_t bytes() const { return bytes_; }

 private:
  friend class Arena;
  ArenaBlock(Arena* a, CUdeviceptr p, size_t n) : arena_(a), ptr_(p), bytes_(n) {}
  void release();
  Arena* arena_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

/// A caching allocator for intermediates. Released blocks stay allocated and are handed out again for
/// requests of a similar size (at most twice smaller), so a layer run repeatedly allocates from the
/// driver only on its first run. Reuse is stream-ordered: use one arena per stream, so work that read
/// a released block is ordered before work that writes its next owner. Not thread-safe.
/// The arena must outlive its blocks.
class Arena {
 public:
  explicit Arena(const Context& ctx) : ctx_(&ctx) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  Result<ArenaBlock> acquire(size_t bytes);
  /// Frees every cached (not on loan) block back to the driver.
  Status trim();

  struct Stats {
    size_t driver_allocations = 0;  ///< cuMemAlloc calls so far
    size_t reuses = 0;              ///< requests served from the cache
    size_t bytes_on_loan = 0;
    size_t bytes_cached = 0;
  };
  const Stats& stats() const { return stats_; }
  /// Requests are rounded up to this many bytes (256 below 1 MiB, 2 MiB above) to make reuse likely.
  static size_t round_up(size_t bytes);

 private:
  friend class ArenaBlock;
  void give_back(CUdeviceptr ptr, size_t bytes);

  const Context* ctx_;
  std::multimap<size_t, CUdeviceptr> free_;  // size -> block, for best-fit lookup
  Stats stats_;
};

}  // namespace lj::rt
