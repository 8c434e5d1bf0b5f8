// Cache root resolution and the security checks (see location.h). The checks run on the opened
// descriptors (fstat), not on path names, and every later access goes through those descriptors,
// so swapping a directory for a symlink after the check gains an attacker nothing.
#include "cache/location.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cache/format.h"
#include "layerjit/error.h"

namespace lj::cache {

void warn_to_stderr(const std::string& message) { std::fprintf(stderr, "layerjit: warning: %s\n", message.c_str()); }

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  std::string_view suffix(ptr, static_cast<size_t>(text.data() + text.size() - ptr));
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: return std::nullopt;
    }
    std::string_view rest = suffix.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "iB")) return std::nullopt;
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

CacheMode cache_mode_from_env() {
  const char* env = std::getenv("LAYERJIT_CACHE");
  const std::string_view v = env ? env : "";
  if (v.empty() || v == "on" || v == "1") return CacheMode::ReadWrite;
  if (v == "readonly") return CacheMode::ReadOnly;
  if (v == "off" || v == "0") return CacheMode::Off;
  throw UserError(fmt::format("LAYERJIT_CACHE={}: expected on (the default), readonly (read the caches, write nothing) "
                              "or off (compile every kernel, apply no tuning record)", v));
}

CacheOptions cache_options_from_env() {
  CacheOptions o;
  o.mode = cache_mode_from_env();
  if (const char* cap = std::getenv("LAYERJIT_CACHE_MAX_BYTES")) {
    const std::optional<uint64_t> bytes = parse_byte_size(cap);
    if (!bytes)
      throw UserError(fmt::format("LAYERJIT_CACHE_MAX_BYTES={}: expected a byte count such as 2147483648 or 2G", cap));
    // A cap below a few entries evicts each one as it is stored: caching off, silently. That is
    // LAYERJIT_CACHE=off's job, said as such.
    if (*bytes < kMinCacheBytes)
      throw UserError(fmt::format("LAYERJIT_CACHE_MAX_BYTES={}: below the {} MiB a cache needs to keep its entries "
                                  "(LAYERJIT_CACHE=off turns the cache off)",
                                  cap, kMinCacheBytes >> 20));
    o.max_bytes = *bytes;
  }
  return o;
}

std::optional<RootChoice> default_cache_root() {
  auto nonempty = [](const char* v) { return v != nullptr && v[0] != '\0'; };
  if (const char* dir = std::getenv("LAYERJIT_CACHE_DIR"); nonempty(dir)) return RootChoice{dir, "LAYERJIT_CACHE_DIR"};
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); nonempty(xdg))
    return RootChoice{std::filesystem::path(xdg) / "layerjit", "XDG_CACHE_HOME"};
  if (const char* home = std::getenv("HOME"); nonempty(home))
    return RootChoice{std::filesystem::path(home) / ".cache" / "layerjit", "HOME"};
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && nonempty(pw->pw_dir))
    return RootChoice{std::filesystem::path(pw->pw_dir) / ".cache" / "layerjit", "the password database"};
  return std::nullopt;
}

std::string check_private_dir(int fd, const std::filesystem::path& shown_as) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fmt::format("cannot stat {}: {}", shown_as.string(), errno_text(errno));
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", shown_as.string());
  if (st.st_uid != ::geteuid())
    return fmt::format("{} is owned by uid {}, not by this user (uid {}): another user could plant kernels in it",
                       shown_as.string(), st.st_uid, ::geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fmt::format("{} is writable by {} (mode {:04o}): another user could plant kernels in it; "
                       "run `chmod go-w {}` to use it",
                       shown_as.string(), (st.st_mode & S_IWOTH) ? "others" : "its group", st.st_mode & 07777,
                       shown_as.string());
  return "";
}

// Creates the missing components of `path` with mode 0700 (existing ones are left as they are: they
// may be shared parents such as $HOME).
static int make_dirs(const std::filesystem::path& path) {
  std::filesystem::path prefix;
  for (const auto& part : path) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  }
  return 0;
}

int open_private_subdir(int parent_fd, const std::string& name, UniqueFd& out, std::string& refusal,
                        const std::filesystem::path& shown_as) {
  int err = make_dir_at(parent_fd, name);
  if (err == 0) err = open_dir_at(parent_fd, name, out);
  if (err == ELOOP || err == ENOTDIR) {
    refusal = fmt::format("{} is a symlink or not a directory: refusing to follow it", shown_as.string());
    return err;
  }
  if (err != 0) {
    refusal = fmt::format("cannot open {}: {}", shown_as.string(), errno_text(err));
    return err;
  }
  refusal = check_private_dir(out.get(), shown_as);
  return refusal.empty() ? 0 : EPERM;
}

// The path without trailing "/" and "/." (kept: a lone "/"): with them, open() and lstat() resolve
// the last component before looking at it, so "link/" followed the symlink "link" is refused for.
static std::filesystem::path without_trailing_separators(const std::filesystem::path& p) {
  std::string s = p.string();
  for (;;) {
    if (s.size() > 1 && s.back() == '/') s.pop_back();
    else if (s.size() > 2 && s.compare(s.size() - 2, 2, "/.") == 0) s.resize(s.size() - 2);
    else break;
  }
  return s;
}

std::optional<OpenedRoot> open_cache_root(const std::filesystem::path& given, std::string& refusal) {
  OpenedRoot r;
  const std::filesystem::path root = without_trailing_separators(given);
  r.root = root;
  if (root.empty()) {
    refusal = "the cache directory is an empty path";
    return std::nullopt;
  }
  // The root itself must not be a symlink (O_NOFOLLOW on the last component). Its parents may be:
  // $HOME is a link on some systems, and the owner and mode checks below are what keep other users
  // out, whatever path led here.
  struct stat lst {};
  if (::lstat(root.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    refusal = fmt::format("{} is a symlink: refusing to follow it (point LAYERJIT_CACHE_DIR at the real directory)",
                          root.string());
    return std::nullopt;
  }
  if (int err = make_dirs(root); err != 0) {
    refusal = fmt::format("cannot create {}: {}", root.string(), errno_text(err));
    return std::nullopt;
  }
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    refusal = err == ELOOP || err == ENOTDIR
                  ? fmt::format("{} is a symlink or not a directory: refusing to follow it", root.string())
                  : fmt::format("cannot open {}: {}", root.string(), errno_text(err));
    return std::nullopt;
  }
  r.root_fd.reset(fd);
  refusal = check_private_dir(r.root_fd.get(), root);
  if (!refusal.empty()) return std::nullopt;
  std::string version = fmt::format("v{}", kCacheFormatVersion);
  r.version_dir = root / version;
  if (open_private_subdir(r.root_fd.get(), version, r.version_fd, refusal, r.version_dir) != 0) return std::nullopt;
  return r;
}

}  // namespace lj::cache
