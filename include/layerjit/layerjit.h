// layerjit's public API: the whole path from a graph to a run on the caller's stream, with no
// internal header and no cuda.h. Graphs come from layerjit/text.h (parse_module, parse_file),
// layerjit/builder.h (GraphBuilder) or layerjit/llama.h (the built-in decoder layer); this header
// plans them, compiles them for a target (no GPU needed), shows every kernel's source and PTX, and
// on a device builds an Executable, binds weights (device pointers or a safetensors file), runs it
// on a stream the caller owns and captures it as a CUDA graph.
//
// Errors are exceptions, never a value to check: lj::UserError where the input is at fault (a
// malformed graph, a tensor of the wrong shape, an arch NVRTC does not know; `formatted()` gives
// "file:line:col: error: ..." when there is a location), lj::RuntimeError where the machine is (no
// CUDA driver, out of device memory, a generated kernel that does not compile: the message names
// the fusion group and shows its lines), lj::InternalError for a layerjit bug. Nothing is left half
// done on disk either way (the kernel cache writes whole files only).
//
// Streams are opaque handles: a CUstream or cudaStream_t cast to StreamHandle (nullptr: the legacy
// default stream). The stream must belong to the device's primary context, which is the one the
// CUDA runtime and PyTorch use, so PyTorch's current stream works as is.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "layerjit/graph.h"
#include "layerjit/host_tensor.h"
#include "layerjit/llama.h"
#include "layerjit/text.h"
#include "layerjit/types.h"

namespace lj {

/// The library's version, "0.2.0" (CMake's project version).
std::string_view version();

/// The machine failed, not the input: no driver, no device, out of memory, a compile failure.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& msg) : std::runtime_error(msg) {}
};

using StreamHandle = void*;
using DevicePtr = uint64_t;

// ---- Plans: what each fusion group (one kernel) holds, no code generated -------------------------

struct PlanSettings {
  /// Symbol values the plan is made for (T=4096): they pick GEMV or GEMM, one-row prologues, and
  /// give the byte and FLOP counts; unbound symbols decide nothing and count as unknown.
  Bindings sizes;
  bool fuse = true;  ///< false: one group per op (the unfused baseline)
};

struct PlannedGroup {
  int id = 0;
  std::string kind;                 ///< "matmul", "attention", "row_reduce", ...
  std::vector<std::string> nodes;   ///< the statements it absorbs, as the text IR prints them
  std::vector<std::string> inputs;  ///< values read from device memory (names without %)
  std::vector<std::string> outputs; ///< values written to device memory
  std::vector<std::string> reasons; ///< the planner's decisions that formed it
  bool prepare = false;             ///< weight preparation, run once when the weights are bound
  double flops = 0, bytes = 0;      ///< at `sizes`; 0 when a symbol they need is unbound
};

struct PlanInfo {
  std::string graph;                ///< the graph's name
  std::vector<PlannedGroup> groups; ///< in execution order
  std::vector<std::string> notes;   ///< graph-level decisions (norm folding)
  std::string report;               ///< what `layerjit plan` prints
};

PlanInfo plan(const Graph& g, const PlanSettings& settings = {});

// ---- Compiling for a target: no GPU needed ------------------------------------------------------

struct CompileSettings {
  std::string arch = "sm_90a";  ///< an NVRTC target: sm_80, sm_89, sm_90a, ...
  Bindings sizes;               ///< the compile hint (PlanSettings::sizes)
  bool fuse = true;
  bool want_ptx = true;
  /// Through the kernel cache (LAYERJIT_CACHE_DIR, else ~/.cache/layerjit); false: always NVRTC.
  bool use_cache = true;
};

struct KernelInfo {
  int group = 0;                   ///< the fusion group it runs
  std::string name;                ///< the kernel's entry point
  std::string config;              ///< its tile config ("" for kernels without one)
  std::string config_source;       ///< "default", "tuned (...)", "(bundle)", ...
  std::string source;              ///< the generated CUDA C++
  std::string ptx;                 ///< empty unless asked for
  std::vector<unsigned char> cubin;///< empty in Executable::kernels()
  bool cache_hit = false;          ///< no NVRTC call was made for it
};

struct CompiledKernels {
  std::string arch;
  std::vector<KernelInfo> kernels;  ///< in plan order
  double seconds = 0;               ///< wall time of the compiles
  int cache_hits = 0;
};

CompiledKernels compile(const Graph& g, const CompileSettings& settings = {});

// ---- Tensors handed to a run --------------------------------------------------------------------

/// A dense row-major tensor in device memory of the executable's device.
struct TensorRef {
  std::string name;  ///< the graph input or output it is (without %)
  DevicePtr data = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

/// Checks `tensors` against `g`'s inputs and outputs (each name known, each dtype and rank as
/// declared, each constant dimension equal) and returns the symbol values their shapes give, the
/// same symbol agreeing everywhere. Every symbol of an input must be given by some tensor. No device
/// is touched: this is what Executable::run(tensors) checks first.
Bindings sizes_of(const Graph& g, const std::vector<TensorRef>& tensors);

/// The graph input whose memory output `output` is (kv_cache_write's result is its cache, updated
/// in place), or "" when the output has memory of its own. An aliasing output binds as its input.
std::string aliased_input(const Graph& g, std::string_view output);

// ---- Devices and executables --------------------------------------------------------------------

class Device {
 public:
  /// Device `ordinal` with its primary context made current on this thread. RuntimeError without a
  /// driver ("no CUDA driver") or without such a device.
  static Device open(int ordinal = 0);
  /// Whether a CUDA driver and at least one device are there (never throws).
  static bool available();
  int ordinal() const { return ordinal_; }
  std::string name() const;
  int compute_capability() const;  ///< 90 for sm_90
  int sm_count() const;
  /// Waits for all work on the device.
  void synchronize() const;

 private:
  friend class Executable;
  friend class DeviceTensor;
  friend class ModelRunner;
  void* ctx_ = nullptr;  // rt::Context
  int ordinal_ = 0;
};

/// Device memory holding one dense tensor, for programs that have no CUDA runtime of their own
/// (PyTorch users pass their tensors instead). Freed with the object.
class DeviceTensor {
 public:
  /// `t`'s values in its dtype's device encoding (they must be exact in it: HostTensor::round_to_dtype).
  static DeviceTensor upload(const Device& device, const HostTensor& t);
  /// Uninitialised memory for a tensor of `dtype` and `shape`.
  static DeviceTensor empty(const Device& device, DType dtype, std::vector<int64_t> shape);
  DeviceTensor(DeviceTensor&&) noexcept;
  DeviceTensor& operator=(DeviceTensor&&) noexcept;
  ~DeviceTensor();

  DevicePtr data() const;
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  /// This tensor as the run argument `name`.
  TensorRef ref(std::string name) const { return {std::move(name), data(), dtype_, shape_}; }
  /// Its values (waits for all work on the device first).
  HostTensor download() const;
  /// Overwrites its values with `t` (same dtype and shape; exact in the dtype), after all work on
  /// the device: how a program without a CUDA runtime feeds a bound input new values.
  void write(const HostTensor& t);

 private:
  struct Impl;
  DeviceTensor(std::unique_ptr<Impl> impl, DType dtype, std::vector<int64_t> shape);
  std::unique_ptr<Impl> impl_;
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
};

struct ExecutableSettings {
  /// Symbol values the kernels are chosen for; any value runs correctly.
  Bindings hint;
  bool fuse = true;
  /// `layerjit tune`'s stored winners for the hint's bucket on this device.
  bool use_tuned = true;
  /// A bundle written by `layerjit bundle`: every kernel from it, no NVRTC ("" for none).
  std::string bundle;
};

class CapturedRun;

class Executable {
 public:
  /// Plans, generates, compiles (cached) and loads every kernel of `g` for `device`. `g` is copied.
  static Executable build(const Device& device, const Graph& g, const ExecutableSettings& settings = {});
  Executable(Executable&&) noexcept;
  Executable& operator=(Executable&&) noexcept;
  ~Executable();

  /// The graph as planned (after norm folding; every name of the caller's graph is there).
  const Graph& graph() const;
  /// Kernels a run launches (weight preparation excluded).
  size_t launches_per_run() const;
  /// Every kernel with its source (no cubin, no PTX).
  std::vector<KernelInfo> kernels() const;
  /// Names of inputs the graph writes in place (KV caches).
  std::vector<std::string> written_inputs() const;

  /// Binds a graph input or output by name to device memory the caller owns (at least its size at
  /// every run's sizes). An output aliasing an input (a KV cache updated in place) binds the input.
  void bind(std::string_view name, DevicePtr ptr);
  /// Reads every param of the graph from a safetensors file (names as the graph's params; dtypes and
  /// shapes checked), uploads them into buffers the executable owns and binds them. Returns the
  /// names of the file's tensors the graph does not use.
  std::vector<std::string> load_weights(const std::string& path);

  /// Runs on `stream` (asynchronously) at symbol values `sizes`; every input must be bound.
  void run(const Bindings& sizes, StreamHandle stream = nullptr);
  /// Binds `tensors` (sizes_of checks them and gives the symbol values), then runs.
  Bindings run(const std::vector<TensorRef>& tensors, StreamHandle stream = nullptr);
  /// Records one run at `sizes` as a CUDA graph. Runs once eagerly first, so every buffer exists
  /// (outputs and written inputs such as KV caches are written by that run). A default stream
  /// (null, legacy, per-thread), which the driver cannot capture, is synchronized and a private
  /// stream records instead; the graph replays on any stream.
  CapturedRun capture(const Bindings& sizes, StreamHandle stream = nullptr);
  /// An output's (or any input's) value after a run at `sizes`; synchronizes `stream`.
  HostTensor download(std::string_view name, const Bindings& sizes, StreamHandle stream = nullptr) const;

 private:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class CapturedRun {
 public:
  CapturedRun(CapturedRun&&) noexcept;
  CapturedRun& operator=(CapturedRun&&) noexcept;
  ~CapturedRun();
  /// Launches the whole captured run on `stream` (the bound buffers' current contents).
  void replay(StreamHandle stream = nullptr) const;
  size_t launches() const;

 private:
  friend class Executable;
  struct Impl;
  explicit CapturedRun(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lj
