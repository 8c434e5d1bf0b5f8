// The byte format compile workers speak over their pipes: one CompileJob in, one compile result out,
// each a frame of length-prefixed fields (little-endian u64 lengths and counts), so any byte of a
// source, header or cubin passes through. Used by both ends only: compile_workers.cpp and the
// layerjit-compile-worker executable (tools/compile_worker_main.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/nvrtc.h"

namespace lj::rt::wire {

/// "LJW1": a frame of another version is refused, never misread.
inline constexpr std::string_view kMagic = "LJW1";

std::string encode_job(const CompileJob& job);
/// nullopt (and `error`) for a truncated or malformed frame.
std::optional<CompileJob> decode_job(std::string_view frame, std::string* error);

std::string encode_result(const Result<CompiledProgram>& r);
std::optional<Result<CompiledProgram>> decode_result(std::string_view frame, std::string* error);

/// Reads one frame (u64 length, then that many bytes) from `fd`, retrying short reads. nullopt at a
/// clean end of input (no byte of a new frame); `error` is set for a frame cut short. `deadline_ms`
/// > 0 bounds the wait (poll); `timed_out` is then set when it passes.
std::optional<std::string> read_frame(int fd, std::string* error, int64_t deadline_ms = 0, bool* timed_out = nullptr);
/// Writes one frame; false (errno set) if the pipe closed.
bool write_frame(int fd, std::string_view frame);

}  // namespace lj::rt::wire
