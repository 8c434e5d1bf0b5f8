#include "runtime/compile_workers.h"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "runtime/compile_pool.h"
#include "runtime/compile_wire.h"

extern char** environ;

namespace lj::rt {

namespace {

constexpr const char* kWorkerName = "layerjit-compile-worker";

// "SIGSEGV" for 11: what a reader of the error looks for.
std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGTERM: return "SIGTERM";
    default: return fmt::format("signal {}", sig);
  }
}

// One worker process and the parent's end of its socket.
class Worker {
 public:
  explicit Worker(const std::string& path) : path_(path) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() { stop(); }

  Result<CompiledProgram> compile(const CompileJob& job, double timeout_s) {
    if (pid_ <= 0) {
      if (Status s = start(); !s.ok()) return s.error();
    }
    if (!wire::write_frame(fd_, wire::encode_job(job))) return died("while taking the job");
    add_worker_compiles(1);
    std::string error;
    bool timed_out = false;
    const int64_t deadline = static_cast<int64_t>(std::ceil(timeout_s * 1000));
    std::optional<std::string> frame = wire::read_frame(fd_, &error, deadline, &timed_out);
    if (timed_out) {
      kill_now();
      return Error{fmt::format("NVRTC did not finish within {} s (LAYERJIT_COMPILE_TIMEOUT); its worker was killed", timeout_s)};
    }
    if (!frame) return died("while compiling");
    std::optional<Result<CompiledProgram>> r = wire::decode_result(*frame, &error);
    if (!r) {
      kill_now();
      return Error{fmt::format("the compile worker answered with {}", error)};
    }
    return std::move(*r);
  }

  // Closing the socket ends the worker's loop; it exits and is reaped.
  void stop() {
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
    if (pid_ > 0) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
  }

 private:
  Status start() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return Error{fmt::format("cannot start the compile worker: socketpair: {}", std::strerror(errno))};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);  // dup2 clears close-on-exec on 0 and 1
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    char* argv[] = {const_cast<char*>(path_.c_str()), nullptr};
    pid_t pid = -1;
    const int err = ::posix_spawn(&pid, path_.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    if (err != 0) {
      ::close(sv[0]);
      return Error{fmt::format("cannot start the compile worker {}: {} (LAYERJIT_COMPILE_WORKER names it; 'off' compiles in-process)",
                               path_, std::strerror(err))};
    }
    pid_ = pid, fd_ = sv[0];
    return {};
  }

  void kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    stop();
  }

  // The worker's end closed: reap it and say how it ended.
  Error died(const char* when) {
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (r > 0 && WIFSIGNALED(status))
      return Error{fmt::format("the compile worker was killed by {} {} (a crash in NVRTC, or out of memory)", signal_name(WTERMSIG(status)), when)};
    if (r > 0 && WIFEXITED(status)) return Error{fmt::format("the compile worker exited with status {} {}", WEXITSTATUS(status), when)};
    return Error{fmt::format("the compile worker was lost {}", when)};
  }

  std::string path_;
  pid_t pid_ = -1;
  int fd_ = -1;
};

std::optional<std::string> beside_executable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const std::filesystem::path p = self.parent_path() / kWorkerName;
  if (::access(p.c_str(), X_OK) == 0) return p.string();
  return std::nullopt;
}

// Installed, the library sits in <prefix>/lib and the worker in <prefix>/bin: a program that links
// liblayerjit.so (or the Python module) finds it there, wherever the program itself is.
std::optional<std::string> beside_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&beside_library), &info) == 0 || info.dli_fname == nullptr) return std::nullopt;
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return std::nullopt;
  for (const std::filesystem::path& p : {lib.parent_path() / kWorkerName, lib.parent_path().parent_path() / "bin" / kWorkerName})
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  return std::nullopt;
}

}  // namespace

WorkerSettings worker_settings_from_env(std::string* error) {
  WorkerSettings s;
  auto bad = [&](const std::string& why) {
    if (error && error->empty()) *error = why;
  };
  if (const char* w = std::getenv("LAYERJIT_COMPILE_WORKER"); w && *w) {
    if (std::string_view(w) != "off") s.path = w;
  } else if (std::optional<std::string> p = beside_executable()) {
    s.path = *p;
  } else if (std::optional<std::string> q = beside_library()) {
    s.path = *q;
  }
  if (const char* j = std::getenv("LAYERJIT_COMPILE_JOBS"); j && *j) {
    char* end = nullptr;
    const long n = std::strtol(j, &end, 10);
    if (*end != '\0' || n < 1 || n > 1024)
      bad(fmt::format("LAYERJIT_COMPILE_JOBS='{}': expected a number of workers from 1 to 1024", j));
    else
      s.jobs = static_cast<int>(n);
  }
  if (const char* t = std::getenv("LAYERJIT_COMPILE_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (*end != '\0' || !(v > 0) || !std::isfinite(v))
      bad(fmt::format("LAYERJIT_COMPILE_TIMEOUT='{}': expected positive seconds", t));
    else
      s.timeout_s = v;
  }
  return s;
}

std::vector<Result<CompiledProgram>> compile_in_workers(std::span<const CompileJob> jobs, const WorkerSettings& s, const CompileDone& done) {
  const int n = s.jobs > 0 ? s.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A thread per worker: it feeds its worker one job at a time and replaces it when it dies.
  return run_compile_pool(jobs, n, done, [&] {
    return [w = std::make_shared<Worker>(s.path), timeout = s.timeout_s](const CompileJob& job) { return w->compile(job, timeout); };
  });
}

}  // namespace lj::rt
