// layerjit-compile-worker: compiles the jobs it reads on stdin (compile_wire.h frames) with NVRTC
// and writes each result to stdout, until its input ends. Spawned by runtime/compile_workers.cpp, one
// job at a time, so a crash or hang in NVRTC ends this process, not the caller.
//
// Test hooks (tests/jit/test_compile_workers.cpp): LAYERJIT_TEST_WORKER_CRASH=TEXT raises SIGSEGV,
// LAYERJIT_TEST_WORKER_HANG=TEXT sleeps forever, instead of compiling a program whose name contains
// TEXT: what a crash or hang inside NVRTC looks like to the caller.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/compile_wire.h"

namespace {

bool named(const char* var, const std::string& program) {
  const char* text = std::getenv(var);
  return text && *text && program.find(text) != std::string::npos;
}

}  // namespace

int main(int argc, char**) {
  using namespace lj::rt;
  if (argc != 1 || ::isatty(0)) {
    std::fprintf(stderr, "layerjit-compile-worker: spawned by layerjit's compile path (LAYERJIT_COMPILE_WORKER); not for use by hand\n");
    return 2;
  }
  // Results go to the socket on a descriptor of its own; stdout becomes stderr, so nothing a library
  // prints can corrupt a frame.
  const int out = ::dup(1);
  if (out < 0 || ::dup2(2, 1) < 0) return 5;
  for (;;) {
    std::string error;
    std::optional<std::string> frame = wire::read_frame(0, &error);
    if (!frame) {
      if (error.empty()) return 0;  // the caller closed the socket: done
      std::fprintf(stderr, "layerjit-compile-worker: %s\n", error.c_str());
      return 3;
    }
    std::optional<CompileJob> job = wire::decode_job(*frame, &error);
    Result<CompiledProgram> r = Error{"layerjit-compile-worker: " + error};
    if (job) {
      if (named("LAYERJIT_TEST_WORKER_CRASH", job->options.program_name)) {
        const rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);  // a test's crash leaves no core file
        ::signal(SIGSEGV, SIG_DFL);          // not a sanitizer's report-and-exit: a crash, as NVRTC's would be
        ::raise(SIGSEGV);
      }
      if (named("LAYERJIT_TEST_WORKER_HANG", job->options.program_name))
        for (;;) ::pause();
      r = compile(job->source, job->options, job->target);
    }
    if (!wire::write_frame(out, wire::encode_result(r))) return 4;
  }
}
