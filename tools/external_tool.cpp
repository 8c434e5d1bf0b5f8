// Finding and running external programs (see external_tool.h).
#include "tools/external_tool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "layerjit/check.h"

namespace lj::cli {

namespace {
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

std::vector<std::string> cuda_bin_dirs() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  return dirs;
}

std::optional<std::string> find_tool(const std::string& name, const std::vector<std::string>& extra_dirs) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    const std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      const size_t end = p.find(':', start);
      dirs.push_back(p.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  for (const std::string& d : dirs) {
    const std::string f = d + "/" + name;
    if (!d.empty() && access(f.c_str(), X_OK) == 0) return f;
  }
  return std::nullopt;
}

ToolRun run_tool_on(const std::string& tool, const std::vector<std::string>& args, const std::string& input) {
  char in_path[] = "/tmp/layerjit-tool-in-XXXXXX";
  char err_path[] = "/tmp/layerjit-tool-err-XXXXXX";
  const int in_fd = mkstemp(in_path);
  LJ_CHECK(in_fd >= 0, SourceLoc{}, "cannot create a temporary file for {}", tool);
  close(in_fd);
  const int err_fd = mkstemp(err_path);
  if (err_fd < 0) unlink(in_path);
  LJ_CHECK(err_fd >= 0, SourceLoc{}, "cannot create a temporary file for {}", tool);
  close(err_fd);
  {
    std::ofstream out(in_path, std::ios::binary);
    out.write(input.data(), static_cast<std::streamsize>(input.size()));
    if (!out.good()) unlink(in_path), unlink(err_path);
    LJ_CHECK(out.good(), SourceLoc{}, "cannot write the temporary file {} for {}", in_path, tool);
  }
  std::string cmd = shell_quote(tool);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " " + shell_quote(in_path) + " 2>" + shell_quote(err_path);
  ToolRun r;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ifstream err(err_path, std::ios::binary);
  r.errors.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  unlink(in_path);
  unlink(err_path);
  return r;
}

}  // namespace lj::cli
