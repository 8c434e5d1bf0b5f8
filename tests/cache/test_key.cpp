// Cache keys: every component matters, the encoding is unambiguous, and a key is the same in every
// process and every build (a golden value is committed below; changing it is a format change).
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include <catch2/catch.hpp>

#include "cache/env_registry.h"
#include "cache/key.h"
#include "cache_test_util.h"
#include "layerjit/error.h"

using namespace lj::cache;
using lj::cache::test::sample_components;

namespace {

// A fixed input whose key is committed: if this changes, every user's cache is silently invalidated
// (or worse, old entries are misread), so it may only change together with kCacheFormatVersion.
KeyComponents golden_components() {
  KeyComponents c;
  c.source = "extern \"C\" __global__ void golden(float* y) { y[threadIdx.x] = 1.0f; }\n";
  c.options = {"-std=c++17", "-default-device", "-lineinfo", "--gpu-architecture=sm_90a"};
  c.arch = "sm_90a";
  c.nvrtc_version = "13.0";
  c.device_headers_hash = "00112233445566778899aabbccddeeff";
  c.env = {{"LAYERJIT_EXAMPLE", std::string("1")}};
  c.format_version = 1;
  return c;
}
constexpr const char* kGoldenKey = "3d7a0bbe46a4e8729570a949d7d59d53";

}  // namespace

TEST_CASE("key: changing any one component changes the key", "[cache][key]") {
  const KeyComponents base = sample_components(1);
  std::vector<KeyComponents> variants;
  auto with = [&](auto change) {
    KeyComponents c = base;
    change(c);
    variants.push_back(c);
  };
  with([](KeyComponents&) {});
  with([](KeyComponents& c) { c.source += " "; });
  with([](KeyComponents& c) { c.options.push_back("-G"); });
  with([](KeyComponents& c) { std::swap(c.options[0], c.options[1]); });  // order matters to NVRTC
  with([](KeyComponents& c) { c.options.pop_back(); });
  with([](KeyComponents& c) { c.arch = "sm_90"; });                       // the `a` suffix
  with([](KeyComponents& c) { c.arch = "sm_80"; });
  with([](KeyComponents& c) { c.nvrtc_version = "12.8"; });
  with([](KeyComponents& c) { c.device_headers_hash = "fedcba9876543210fedcba9876543210"; });
  with([](KeyComponents& c) { c.env = {{"LAYERJIT_X", std::nullopt}}; });
  with([](KeyComponents& c) { c.env = {{"LAYERJIT_X", std::string()}}; });  // set-but-empty != unset
  with([](KeyComponents& c) { c.env = {{"LAYERJIT_X", std::string("1")}}; });
  with([](KeyComponents& c) { c.env = {{"LAYERJIT_Y", std::string("1")}}; });
  with([](KeyComponents& c) { c.format_version += 1; });
  std::set<CacheKey> keys;
  for (const KeyComponents& c : variants) keys.insert(compute_key(c));
  CHECK(keys.size() == variants.size());
  CHECK(compute_key(base) == compute_key(sample_components(1)));
}

TEST_CASE("key: fields are length-prefixed, so moving bytes across a boundary changes the key", "[cache][key]") {
  KeyComponents a = sample_components(0), b = sample_components(0);
  a.options = {"ab", "c"};
  b.options = {"a", "bc"};
  CHECK(compute_key(a) != compute_key(b));
  a = b = sample_components(0);
  a.arch = "sm_9";
  a.nvrtc_version = "0a13.0";
  b.arch = "sm_90a";
  b.nvrtc_version = "13.0";
  CHECK(compute_key(a) != compute_key(b));
  a = b = sample_components(0);
  a.options = {};
  b.options = {""};
  CHECK(compute_key(a) != compute_key(b));
  a = b = sample_components(0);
  a.env = {{"A", std::string("B")}};
  b.env = {{"AB", std::nullopt}};
  CHECK(compute_key(a) != compute_key(b));
}

TEST_CASE("key: golden value, identical in another process", "[cache][key]") {
  const std::string key = compute_key(golden_components()).hex();
  CHECK(key == kGoldenKey);
  CHECK(key.size() == 32);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string child = compute_key(golden_components()).hex();
    ssize_t n = ::write(fds[1], child.data(), child.size());
    ::_exit(n == static_cast<ssize_t>(child.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  char buf[64] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(n == 32);
  CHECK(std::string(buf, 32) == key);
}

TEST_CASE("key: hex round trip and rejection of malformed text", "[cache][key]") {
  CacheKey k = compute_key(sample_components(3));
  CHECK(CacheKey::from_hex(k.hex()) == k);
  std::string upper = k.hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(CacheKey::from_hex(upper) == k);
  CHECK_FALSE(CacheKey::from_hex(k.hex().substr(1)));
  CHECK_FALSE(CacheKey::from_hex(k.hex() + "0"));
  CHECK_FALSE(CacheKey::from_hex(std::string(31, '0') + "g"));
  CHECK(CacheKey{1, 2}.hex() == "00000000000000010000000000000002");
}

TEST_CASE("key: device header hash covers names, texts and order", "[cache][key]") {
  using H = std::pair<std::string_view, std::string_view>;
  std::vector<H> base = {{"layerjit/a.cuh", "int a;"}, {"layerjit/b.cuh", "int b;"}};
  std::set<std::string> hashes;
  hashes.insert(hash_device_headers(base));
  hashes.insert(hash_device_headers(std::vector<H>{{"layerjit/a.cuh", "int a; "}, base[1]}));
  hashes.insert(hash_device_headers(std::vector<H>{{"layerjit/c.cuh", "int a;"}, base[1]}));
  hashes.insert(hash_device_headers(std::vector<H>{base[1], base[0]}));
  hashes.insert(hash_device_headers(std::vector<H>{base[0]}));
  hashes.insert(hash_device_headers(std::vector<H>{{"layerjit/a.cuh", "int a;l"}, {"ayerjit/b.cuh", "int b;"}}));
  CHECK(hashes.size() == 6);
  CHECK(hash_device_headers(base) == hash_device_headers(base));
}

TEST_CASE("env registry: sorted, captured in order, unregistered reads refused", "[cache][key]") {
  auto vars = code_env_vars();
  for (size_t i = 1; i < vars.size(); ++i) CHECK(vars[i - 1].name < vars[i].name);
  for (const CodeEnvVar& v : vars) CHECK_FALSE(v.why.empty());
  auto captured = capture_code_env();
  REQUIRE(captured.size() == vars.size());
  for (size_t i = 0; i < vars.size(); ++i) CHECK(captured[i].name == vars[i].name);
  // A variable that is not registered would change code without changing the key.
  CHECK_THROWS_AS(code_env("LAYERJIT_NOT_REGISTERED"), lj::InternalError);
}
