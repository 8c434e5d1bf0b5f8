// Where the cache lives and whether it is safe to use. The root comes from $LAYERJIT_CACHE_DIR, else
// $XDG_CACHE_HOME/layerjit, else ~/.cache/layerjit. Cubins are executable code that layerjit loads
// onto the GPU without further checks, so a root another user could write to is refused: the
// directory must be ours, not writable by group or others, and not a symlink. A refusal turns the
// cache off with a warning; the program keeps running and compiles everything.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "cache/posix_file.h"

namespace lj::cache {

/// The default size cap of the kernel cache: 2 GiB.
inline constexpr uint64_t kDefaultMaxBytes = uint64_t{2} << 30;
/// The smallest LAYERJIT_CACHE_MAX_BYTES taken: below a few entries (a Hopper GEMM's cubin and PTX are
/// ~0.3 MiB) every store would be evicted as it is made, caching off without a word.
inline constexpr uint64_t kMinCacheBytes = uint64_t{1} << 20;

/// LAYERJIT_CACHE: what a run may do with the caches on disk (kernels and tuning records).
enum class CacheMode {
  ReadWrite,  ///< on (the default): read, store, evict
  ReadOnly,   ///< read what is there; store, touch, evict and remove nothing
  Off,        ///< neither read nor write: every kernel compiled, no tuning record applied
};

/// Everything that configures a cache; cache_options_from_env() fills it the usual way.
struct CacheOptions {
  /// LAYERJIT_CACHE=on|readonly|off.
  CacheMode mode = CacheMode::ReadWrite;
  /// The cache root; nullopt: default_cache_root().
  std::optional<std::filesystem::path> root;
  /// Size cap of the kernel entries (LAYERJIT_CACHE_MAX_BYTES).
  uint64_t max_bytes = kDefaultMaxBytes;
  /// fsync files and directories before publishing: an entry survives a power loss whole or not at
  /// all. Off only for throwaway caches.
  bool durable = true;
  /// A temp or unpublished payload file whose writer process is gone is removed once it is this old.
  /// The grace covers writers in another pid namespace, whose pid looks gone from here.
  int64_t dead_writer_grace_seconds = 60;
  /// Any temp or unpublished payload file older than this is removed, writer alive or not.
  int64_t abandoned_seconds = 3600;
  /// Receives each warning (refused root, corrupt entry). Default: "layerjit: warning: ..." on stderr.
  std::function<void(const std::string&)> warn;
};

/// Defaults plus the environment: LAYERJIT_CACHE (on, readonly, off; anything else is a UserError)
/// and LAYERJIT_CACHE_MAX_BYTES (bytes, or with a K/M/G/T suffix, binary; a malformed value or one
/// below kMinCacheBytes is a UserError).
CacheOptions cache_options_from_env();

/// LAYERJIT_CACHE's mode; a UserError naming the values it takes when it is none of them.
CacheMode cache_mode_from_env();

/// Parses "2147483648", "512M", "2G", "2GiB"; nullopt when malformed.
std::optional<uint64_t> parse_byte_size(std::string_view text);

/// The default root and which variable chose it ("LAYERJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME").
struct RootChoice {
  std::filesystem::path path;
  std::string chosen_by;
};
/// nullopt only when none of the variables is set and the password database has no home either.
std::optional<RootChoice> default_cache_root();

/// A cache root that passed the security checks, with its versioned subdirectory ("v<N>").
struct OpenedRoot {
  std::filesystem::path root;
  std::filesystem::path version_dir;
  UniqueFd root_fd;
  UniqueFd version_fd;
};

/// Creates (0700) and opens `root` and `root/v<kCacheFormatVersion>`, checking owner, mode and
/// symlinks on the opened directories themselves. On refusal returns nullopt with the reason.
std::optional<OpenedRoot> open_cache_root(const std::filesystem::path& root, std::string& refusal);

/// Checks an already-open directory: ours, a directory, not writable by group or others. Returns
/// "" when fine, else what is wrong.
std::string check_private_dir(int fd, const std::filesystem::path& shown_as);

/// Creates and opens subdirectory `name` of `parent_fd` with the same checks.
int open_private_subdir(int parent_fd, const std::string& name, UniqueFd& out, std::string& refusal,
                        const std::filesystem::path& shown_as);

/// The default warning sink.
void warn_to_stderr(const std::string& message);

}  // namespace lj::cache
