// Kernel launch: typed argument packing, launch geometry, cuLaunchKernelEx with large dynamic shared
// memory, and the debug-mode check after every launch.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/module.h"
#include "runtime/stream.h"
#include "layerjit/check.h"

namespace lj::rt {

/// Kernel arguments packed by value, each at its type's alignment, in the order of the kernel's
/// parameters. launch() checks the count and each size against the kernel's parameter list.
class KernelArgs {
 public:
  KernelArgs() = default;
  template <class... Ts>
  static KernelArgs of(const Ts&... values) {
    KernelArgs a;
    (a.add(values), ...);
    return a;
  }

  /// Appends one argument. Device pointers are passed as CUdeviceptr (the same 8 bytes as `T*`).
  template <class T>
  KernelArgs& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied byte for byte");
    static_assert(alignof(T) <= alignof(std::max_align_t), "over-aligned kernel argument");
    const size_t offset = (storage_.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    storage_.resize(offset + sizeof(T));
    std::memcpy(storage_.data() + offset, &value, sizeof(T));
    offsets_.push_back(offset);
    sizes_.push_back(sizeof(T));
    return *this;
  }
  /// Replaces argument `index` with a value of the same size (e.g. a new symbol value).
  template <class T>
  KernelArgs& set(size_t index, const T& value) {
    LJ_ASSERT(index < sizes_.size() && sizes_[index] == sizeof(T), "argument {} has size {}, not {}", index,
              index < sizes_.size() ? sizes_[index] : 0, sizeof(T));
    std::memcpy(storage_.data() + offsets_[index], &value, sizeof(T));
    return *this;
  }

  size_t count() const { return sizes_.size(); }
  const std::vector<size_t>& sizes() const { return sizes_; }
  /// The pointer array cuLaunchKernelEx reads; valid until the next add().
  void** pointers();

 private:
  std::vector<unsigned char> storage_;
  std::vector<size_t> offsets_;
  std::vector<size_t> sizes_;
  std::vector<void*> pointers_;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned dynamic_smem = 0;
  /// Programmatic dependent launch (sm_90+): the kernel may start before the previous kernel in the
  /// stream completes; it must wait for it (`griddepcontrol.wait`: generated kernels begin with
  /// lj_pdl_begin) before touching memory that kernel reads or writes.
  bool programmatic = false;

  /// A 1-D launch of `blocks` blocks of `threads` threads.
  static LaunchConfig linear(unsigned blocks, unsigned threads, unsigned dynamic_smem = 0) {
    return LaunchConfig{{blocks, 1, 1}, {threads, 1, 1}, dynamic_smem, false};
  }
  /// Enough `threads`-wide blocks to cover n items.
  static LaunchConfig cover(size_t n, unsigned threads, unsigned dynamic_smem = 0) {
    return linear(static_cast<unsigned>((n + threads - 1) / threads), threads, dynamic_smem);
  }
};

/// Launches `kernel` on `stream`. Raises the kernel's dynamic shared memory limit when the launch
/// needs more than 48 KB. With debug checks on, waits for the kernel and reports its error by name
/// (not while the stream is being captured into a graph, where waiting is not allowed).
Status launch(Stream& stream, Kernel& kernel, const LaunchConfig& config, KernelArgs& args);

/// Debug checks: on when built without NDEBUG or when LAYERJIT_SYNC_LAUNCHES=1; tests set them.
bool debug_launch_checks();
void set_debug_launch_checks(bool on);

/// Checks an argument list against a kernel's parameters (count and sizes).
Status check_kernel_args(const Kernel& kernel, const KernelArgs& args);

}  // namespace lj::rt
