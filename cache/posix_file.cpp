// POSIX helpers for the cache (see posix_file.h). All paths are relative to an already-checked
// directory descriptor, so a directory swapped for a symlink after the security check is never
// followed (the *at() calls with O_NOFOLLOW close that race).
#include "cache/posix_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace lj::cache {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int open_dir_at(int dirfd, const std::string& name, UniqueFd& out) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  out.reset(fd);
  return 0;
}

int make_dir_at(int dirfd, const std::string& name) {
  if (::mkdirat(dirfd, name.c_str(), 0700) == 0 || errno == EEXIST) return 0;
  return errno;
}

int open_file_at(int dirfd, const std::string& name, UniqueFd& out) {
  // O_NONBLOCK: a FIFO planted in place of a cache file would block an open for reading until a
  // writer came; opened without waiting, it fails read_all's regular-file check like any non-file.
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno;
  out.reset(fd);
  return 0;
}

int read_all(int fd, std::string& out, uint64_t limit) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EINVAL;
  if (static_cast<uint64_t>(st.st_size) > limit) return EFBIG;
  out.clear();
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
    if (out.size() > limit) return EFBIG;
  }
  return 0;
}

int sync_fd(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

static int write_fully(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

int write_temp_file(int dirfd, std::string_view data, bool durable, std::string& temp_name) {
  temp_name = fmt::format("{}{}-{}", kTempPrefix, ::getpid(), random_token());
  int fd = ::openat(dirfd, temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  UniqueFd owned(fd);
  int err = write_fully(fd, data);
  if (err == 0 && durable) err = sync_fd(fd);
  if (err != 0) ::unlinkat(dirfd, temp_name.c_str(), 0);
  return err;
}

int replace_file(const std::string& path, std::string_view data, bool durable) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return errno;
  UniqueFd dirfd(dfd);
  std::string temp;
  if (int err = write_temp_file(dirfd.get(), data, durable, temp); err != 0) return err;
  if (::renameat(dirfd.get(), temp.c_str(), dirfd.get(), name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dirfd.get(), temp.c_str(), 0);
    return err;
  }
  if (durable) (void)sync_fd(dirfd.get());  // the rename durable; the file is whole either way
  return 0;
}

std::optional<pid_t> writer_pid_of(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = name.substr(prefix.size());
  long long pid = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  if (ec != std::errc() || ptr == rest.data() || ptr == rest.data() + rest.size() || *ptr != '-' || pid <= 0)
    return std::nullopt;
  return static_cast<pid_t>(pid);
}

bool process_is_gone(pid_t pid) {
  // EPERM means the process exists but belongs to someone else: not gone.
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

std::string random_token() {
  uint64_t value = 0;
  if (::getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) {
    // getrandom can only fail on ancient kernels; the pid, the clock and a counter still make a
    // name no other live writer uses (O_EXCL catches the rest).
    static std::atomic<uint64_t> counter{0};
    auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    value = now ^ (static_cast<uint64_t>(::getpid()) << 40) ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ULL);
  }
  return fmt::format("{:016x}", value);
}

FlockGuard::FlockGuard(int fd, int op) {
  for (;;) {
    if (::flock(fd, op) == 0) {
      fd_ = fd;
      return;
    }
    if (errno != EINTR) return;
  }
}

FlockGuard& FlockGuard::operator=(FlockGuard&& other) noexcept {
  release();
  fd_ = std::exchange(other.fd_, -1);
  return *this;
}

void FlockGuard::release() {
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  fd_ = -1;
}

std::string errno_text(int err) { return std::strerror(err); }

std::vector<std::string> list_dir(int dirfd) {
  std::vector<std::string> names;
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    ::close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(dir)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

int remove_at_depth(int dirfd, const std::string& name, int depth) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) return 0;
  if (errno != EISDIR && errno != EPERM) return errno;  // EPERM: what POSIX allows for a directory
  if (depth >= 16) return ELOOP;
  UniqueFd sub;
  if (int err = open_dir_at(dirfd, name, sub); err != 0) return err;  // O_NOFOLLOW: a symlink is never entered
  int first = 0;
  for (const std::string& n : list_dir(sub.get()))
    if (int err = remove_at_depth(sub.get(), n, depth + 1); err != 0 && first == 0) first = err;
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && first == 0) first = errno;
  return first;
}

}  // namespace

int remove_at(int dirfd, const std::string& name) { return remove_at_depth(dirfd, name, 0); }

}  // namespace lj::cache
