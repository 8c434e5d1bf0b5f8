#include "runtime/compile_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace lj::rt::wire {

namespace {

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

// Reads fields off a frame, remembering the first failure.
struct Reader {
  std::string_view in;
  bool ok = true;
  uint64_t u64() {
    if (!ok || in.size() < 8) return ok = false, 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[static_cast<size_t>(i)])) << (8 * i);
    in.remove_prefix(8);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    if (!ok || n > in.size()) return ok = false, std::string();
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
  bool magic() {
    if (in.substr(0, kMagic.size()) != kMagic) return ok = false;
    in.remove_prefix(kMagic.size());
    return true;
  }
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string encode_job(const CompileJob& job) {
  std::string out(kMagic);
  put(out, job.source);
  put(out, job.options.program_name);
  put_u64(out, job.options.extra.size());
  for (const std::string& e : job.options.extra) put(out, e);
  put_u64(out, job.options.headers.size());
  for (const auto& [name, text] : job.options.headers) put(out, name), put(out, text);
  put_u64(out, (job.options.want_ptx ? 1u : 0u) | (job.options.pch ? 2u : 0u));
  put(out, job.target.name());
  return out;
}

std::optional<CompileJob> decode_job(std::string_view frame, std::string* error) {
  Reader r{frame};
  CompileJob job;
  r.magic();
  job.source = r.str();
  job.options.program_name = r.str();
  for (uint64_t n = r.u64(); r.ok && n > 0; --n) job.options.extra.push_back(r.str());
  for (uint64_t n = r.u64(); r.ok && n > 0; --n) {
    std::string name = r.str();
    job.options.headers.emplace_back(std::move(name), r.str());
  }
  const uint64_t flags = r.u64();
  job.options.want_ptx = flags & 1u, job.options.pch = flags & 2u;
  const std::string target = r.str();
  if (!r.ok || !r.in.empty()) {
    if (error) *error = "a malformed compile job frame";
    return std::nullopt;
  }
  Result<Target> t = Target::parse(target);
  if (!t.ok()) {
    if (error) *error = t.message();
    return std::nullopt;
  }
  job.target = *t;
  return job;
}

std::string encode_result(const Result<CompiledProgram>& r) {
  std::string out(kMagic);
  put_u64(out, r.ok() ? 1 : 0);
  if (!r.ok()) {
    put(out, r.message());
    return out;
  }
  put(out, r->target.name());
  put(out, r->cubin);
  put(out, r->ptx);
  put(out, r->log);
  put(out, fmt::format("{}", r->seconds));
  put_u64(out, r->options.size());
  for (const std::string& o : r->options) put(out, o);
  return out;
}

std::optional<Result<CompiledProgram>> decode_result(std::string_view frame, std::string* error) {
  Reader r{frame};
  r.magic();
  const uint64_t ok = r.u64();
  if (r.ok && ok == 0) {
    std::string message = r.str();
    if (r.ok && r.in.empty()) return Result<CompiledProgram>(Error{std::move(message)});
  } else if (r.ok && ok == 1) {
    CompiledProgram p;
    const std::string target = r.str();
    p.cubin = r.str();
    p.ptx = r.str();
    p.log = r.str();
    const std::string seconds = r.str();
    for (uint64_t n = r.u64(); r.ok && n > 0; --n) p.options.push_back(r.str());
    Result<Target> t = Target::parse(target);
    if (r.ok && r.in.empty() && t.ok()) {
      p.target = *t;
      p.seconds = std::strtod(seconds.c_str(), nullptr);
      return Result<CompiledProgram>(std::move(p));
    }
  }
  if (error) *error = "a malformed compile result frame";
  return std::nullopt;
}

std::optional<std::string> read_frame(int fd, std::string* error, int64_t deadline_ms, bool* timed_out) {
  if (timed_out) *timed_out = false;
  const int64_t until = deadline_ms > 0 ? now_ms() + deadline_ms : 0;
  auto read_exact = [&](char* p, size_t n, bool first) -> int {  // 1 done, 0 clean end, -1 error or timeout
    size_t got = 0;
    while (got < n) {
      if (until > 0) {
        const int64_t left = until - now_ms();
        pollfd pfd{fd, POLLIN, 0};
        const int pr = left > 0 ? ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) : 0;
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) {
          if (timed_out) *timed_out = true;
          if (error) *error = "timed out";
          return -1;
        }
      }
      const ssize_t k = ::read(fd, p + got, n - got);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        if (error) *error = fmt::format("read failed: {}", std::strerror(errno));
        return -1;
      }
      if (k == 0) {
        if (first && got == 0) return 0;
        if (error) *error = "the frame was cut short";
        return -1;
      }
      got += static_cast<size_t>(k);
    }
    return 1;
  };
  char len[8];
  const int h = read_exact(len, 8, true);
  if (h <= 0) return std::nullopt;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(len[i])) << (8 * i);
  if (n > (uint64_t{1} << 32)) {
    if (error) *error = fmt::format("a frame of {} bytes", n);
    return std::nullopt;
  }
  std::string frame(n, '\0');
  if (read_exact(frame.data(), n, false) != 1) return std::nullopt;
  return frame;
}

bool write_frame(int fd, std::string_view frame) {
  std::string out;
  put_u64(out, frame.size());
  out.append(frame);
  size_t done = 0;
  bool socket = true;  // the parent's end is a socket: a dead worker gives EPIPE, never SIGPIPE
  while (done < out.size()) {
    ssize_t k = socket ? ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL) : -1;
    if (k < 0 && errno == ENOTSOCK) socket = false;
    if (!socket) k = ::write(fd, out.data() + done, out.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    done += static_cast<size_t>(k);
  }
  return true;
}

}  // namespace lj::rt::wire
