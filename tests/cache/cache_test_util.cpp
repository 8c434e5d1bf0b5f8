// Helpers for the cache tests (see cache_test_util.h).
#include "cache_test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "cache/manifest.h"

namespace lj::cache::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string templ = (fs::temp_directory_path() / "layerjit-cache-test-XXXXXX").string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  // Tests chown and chmod things; give everything back to us before removing it.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (::lchown(it->path().c_str(), ::geteuid(), ::getegid()) != 0) continue;
    if (!it->is_symlink()) ::chmod(it->path().c_str(), 0700);
  }
  fs::remove_all(path_, ec);
}

CacheOptions options_at(const fs::path& root, Warnings warnings) {
  CacheOptions o;
  o.root = root;
  o.warn = [warnings](const std::string& message) {
    if (warnings) warnings->push_back(message);
  };
  return o;
}

KeyComponents sample_components(int i) {
  KeyComponents c;
  c.source = fmt::format("// sample kernel {0}\nextern \"C\" __global__ void sample_{0}(float* y) {{ y[0] = {0}; }}\n", i);
  c.options = {"-std=c++17", "-default-device", "-lineinfo", "--gpu-architecture=sm_90a"};
  c.arch = "sm_90a";
  c.nvrtc_version = "13.0";
  c.device_headers_hash = "0123456789abcdef0123456789abcdef";
  return c;
}

std::string sample_cubin(int i, size_t bytes) {
  std::string s = fmt::format("CUBIN sample {} ", i);
  uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(i + 1);
  while (s.size() < bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s.push_back(static_cast<char>(x & 0xff));
  }
  s.resize(bytes);
  return s;
}

std::vector<int> run_children(int n, const std::function<int(int)>& body) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int code = 99;
      try {
        code = body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: exception: %s\n", i, e.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    statuses.push_back(status);
  }
  return statuses;
}

bool all_succeeded(const std::vector<int>& statuses) {
  for (int s : statuses)
    if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) return false;
  return true;
}

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) out.push_back(it->path());
  return out;
}

uint64_t bytes_under(const fs::path& dir) {
  uint64_t total = 0;
  for (const fs::path& p : files_under(dir)) {
    std::error_code ec;
    auto size = fs::file_size(p, ec);
    if (!ec) total += size;
  }
  return total;
}

EntryFiles entry_files(const DiskCache& cache, const CacheKey& key) {
  fs::path shard = cache.version_dir() / "kernels" / key.hex().substr(0, 2);
  EntryFiles f;
  f.manifest = shard / manifest_name(key);
  std::ifstream in(f.manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string error;
  auto m = manifest_from_json(text, error);
  if (!m) throw std::runtime_error("entry_files: unreadable manifest: " + error);
  f.cubin = shard / m->cubin.file;
  f.source = shard / m->source.file;
  return f;
}

void flip_bit(const fs::path& file, long offset) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(0, std::ios::end);
  long size = static_cast<long>(io.tellg());
  long at = offset >= 0 ? offset : size + offset;
  io.seekg(at);
  char c = 0;
  io.get(c);
  c = static_cast<char>(c ^ 0x10);
  io.seekp(at);
  io.put(c);
}

}  // namespace lj::cache::test
