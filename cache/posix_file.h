// Thin POSIX helpers for the cache: an owning file descriptor, directory-relative opens that never
// follow a symlink, whole-file reads, durable temp-file writes, flock guards, and the temp-file
// naming scheme that lets a later process recognise files left by a killed writer.
// Every helper returns 0 or an errno value (the POSIX idiom), so callers decide what is a miss, a
// warning or a failure; nothing here throws.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lj::cache {

/// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Opens directory `name` under `dirfd` (O_NOFOLLOW: a symlink is ELOOP/ENOTDIR, never followed).
int open_dir_at(int dirfd, const std::string& name, UniqueFd& out);
/// mkdirat with mode 0700; an existing directory is success.
int make_dir_at(int dirfd, const std::string& name);
/// Opens regular file `name` under `dirfd` read-only, without following a symlink.
int open_file_at(int dirfd, const std::string& name, UniqueFd& out);
/// Reads the whole file behind `fd` from offset 0; files larger than `limit` are EFBIG.
int read_all(int fd, std::string& out, uint64_t limit);
/// fsync, retried on EINTR.
int sync_fd(int fd);

/// Name prefix of every in-flight file: ".tmp-<pid>-<token>". The pid lets a later process tell a
/// file whose writer died (and so can never be renamed into place) from one still being written.
inline constexpr std::string_view kTempPrefix = ".tmp-";
/// Writes `data` to a fresh ".tmp-<pid>-<token>" file in `dirfd` (O_EXCL, mode 0600), fsyncs it when
/// `durable`, and returns its name in `temp_name`. The caller renames it into place.
int write_temp_file(int dirfd, std::string_view data, bool durable, std::string& temp_name);
/// Replaces the file at `path` with `data` whole: a temp file beside it (write_temp_file), renamed
/// over it, the directory fsync'd when `durable`. A reader sees the old file or the new one, never a
/// torn one; on failure nothing is left behind.
int replace_file(const std::string& path, std::string_view data, bool durable);
/// The writer pid encoded in a temp or payload file name ("<anything>-<pid>-<token>..."), if any.
std::optional<pid_t> writer_pid_of(std::string_view name, std::string_view prefix);
/// True when no process `pid` exists (kill(pid, 0) reports ESRCH).
bool process_is_gone(pid_t pid);

/// 16 random hex digits (getrandom), for temp and payload names that never collide across processes.
std::string random_token();

/// Holds an flock on a descriptor for its lifetime. flock locks belong to the open file description
/// and vanish when the holder dies, so a killed process can never leave a stale lock behind.
class FlockGuard {
 public:
  FlockGuard() = default;
  /// Takes `op` (LOCK_SH or LOCK_EX, optionally | LOCK_NB); check locked().
  FlockGuard(int fd, int op);
  FlockGuard(FlockGuard&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FlockGuard& operator=(FlockGuard&& other) noexcept;
  FlockGuard(const FlockGuard&) = delete;
  FlockGuard& operator=(const FlockGuard&) = delete;
  ~FlockGuard() { release(); }

  bool locked() const { return fd_ >= 0; }
  void release();

 private:
  int fd_ = -1;
};

/// Removes `name` in `dirfd`: a file or symlink is unlinked; a directory (never followed through a
/// symlink) is removed with everything under it, at most 16 levels deep. For what a hostile or
/// careless hand leaves in the cache's own private directories (a directory where a manifest or
/// payload belongs): `unlinkat` alone fails on it, and the entry would be "removed" on every run.
/// Returns 0 or the first errno.
int remove_at(int dirfd, const std::string& name);

/// "No such file or directory" style text for an errno value.
std::string errno_text(int err);

/// The names in a directory, sorted, without "." and ".." (read through a fresh descriptor, since
/// readdir consumes its position). Empty if the directory cannot be read.
std::vector<std::string> list_dir(int dirfd);

}  // namespace lj::cache
