// The safetensors reader and writer: round trips of every dtype on odd shapes, a file laid out as
// other writers lay it out (no padding, __metadata__), and a clear error for each kind of damage.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "exec/safetensors.h"
#include "layerjit/text.h"
#include "tests/unit/error_of.h"

using namespace lj;
using lj_test::error_of;

namespace {

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / fmt::format("lj-st-{}-{}.safetensors", ::getpid(), stem)).string();
}

// A file from a raw header text and data section.
std::string raw_file(const std::string& stem, const std::string& header, const std::string& data, int64_t claimed = -1) {
  const std::string path = temp_path(stem);
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = claimed >= 0 ? static_cast<uint64_t>(claimed) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(len >> (8 * i)));
  out << header << data;
  return path;
}

}  // namespace

TEST_CASE("safetensors round trip: every dtype, odd shapes, exact values", "[exec][safetensors]") {
  std::vector<std::pair<std::string, HostTensor>> ts;
  uint64_t seed = 1;
  for (DType d : {DType::BF16, DType::F16, DType::F32, DType::F8E4M3, DType::F8E5M2, DType::I8, DType::I32}) {
    HostTensor t(d, {3, 7, 5});
    fill_uniform(t, ++seed, d == DType::I8 || d == DType::I32 ? -100.0 : -2.0, d == DType::I8 || d == DType::I32 ? 100.0 : 2.0);
    ts.emplace_back(fmt::format("layer.{}", dtype_name(d)), t);
  }
  ts.emplace_back("empty", HostTensor(DType::BF16, {0, 4}));
  ts.emplace_back("scalar_like", HostTensor(DType::F32, {1}));
  const std::string path = temp_path("roundtrip");
  exec::write_safetensors(path, ts);
  const exec::SafetensorsFile f = exec::SafetensorsFile::open(path);
  REQUIRE(f.tensors().size() == ts.size());
  for (const auto& [name, want] : ts) {
    INFO(name);
    const exec::SafeTensor* t = f.find(name);
    REQUIRE(t != nullptr);
    CHECK(t->dtype == want.dtype);
    CHECK(t->shape == want.shape);
    const HostTensor got = f.read(*t);
    CHECK(got.data == want.data);
  }
  CHECK(f.tensors().front().offset % 8 == 0);  // the data section starts 8-byte aligned
  CHECK(f.find("missing") == nullptr);
  std::filesystem::remove(path);
}

TEST_CASE("safetensors as other writers lay them out: unpadded header, __metadata__, any key order", "[exec][safetensors]") {
  // Two bf16 values (1.0, -2.0) and one f32 (0.5), the f32 first in the data section.
  const std::string data = std::string("\x00\x00\x00\x3f", 4) + std::string("\x80\x3f\x00\xc0", 4);
  const std::string path = raw_file("foreign",
                                    R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},"__metadata__":{"format":"pt"},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                    data);
  const exec::SafetensorsFile f = exec::SafetensorsFile::open(path);
  REQUIRE(f.tensors().size() == 2);
  CHECK(f.tensors()[0].name == "b");  // file order
  CHECK(f.read(*f.find("w")).data == std::vector<double>{1.0, -2.0});
  CHECK(f.read(*f.find("b")).data == std::vector<double>{0.5});
  std::filesystem::remove(path);
}

TEST_CASE("damaged safetensors files are clear errors naming the file and the tensor", "[exec][safetensors]") {
  const std::string four(4, '\0');
  struct Case {
    std::string stem, header, data;
    int64_t claimed;
    std::string want;
  };
  const Case cases[] = {
      {"short", "", "", -2, "shorter than the 8-byte header length"},
      {"longlen", "{}", "", 1000, "the header claims 1000 bytes but the file has 2 after the length"},
      {"json", "{\"w\": [", "", -1, "the JSON header does not parse"},
      {"notobj", "[1, 2]", "", -1, "the JSON header is not an object"},
      {"fields", R"({"w":{"dtype":"F32"}})", four, -1, "tensor 'w': needs dtype, shape and data_offsets"},
      {"dtype", R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", four + four, -1,
       "tensor 'w': dtype 'F64' is not one layerjit reads"},
      {"size", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four, -1,
       "tensor 'w': 4 bytes for shape [2] of F32, which needs 8"},
      {"range", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", four, -1,
       "tensor 'w': bytes [4, 8) are outside the 4-byte data section"},
      {"shape", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four, -1,
       "tensor 'w': shape entries must be non-negative integers"},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       four + four, -1, "tensors 'a' and 'b' overlap"},
      // A key given twice: the JSON parser would keep the last one silently.
      {"twice", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four,
       -1, "the header names 'a' twice"},
      {"twice_inner", R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", four, -1,
       "the header names 'dtype' twice"},
  };
  for (const Case& c : cases) {
    INFO(c.stem);
    std::string path;
    if (c.claimed == -2) {
      path = temp_path(c.stem);
      std::ofstream(path, std::ios::binary) << "abc";
    } else {
      path = raw_file(c.stem, c.header, c.data, c.claimed);
    }
    const std::string err = error_of([&] { exec::SafetensorsFile::open(path); });
    CHECK(err.find(path + ": not a valid safetensors file: ") == 0);
    CHECK(err.find(c.want) != std::string::npos);
    std::filesystem::remove(path);
  }
  CHECK(error_of([] { exec::SafetensorsFile::open("/nonexistent/w.safetensors"); }) ==
        "cannot read safetensors file '/nonexistent/w.safetensors': no such file or not readable");
  // A directory (which an ifstream opens, reporting a size of 2^63 - 1) is named as one.
  const std::string dir = temp_path("a_dir");
  std::filesystem::create_directories(dir);
  CHECK(error_of([&] { exec::SafetensorsFile::open(dir); }) ==
        "'" + dir + "' is a directory, not a safetensors file (a model directory goes where a .lj file does, not to --weights)");
  std::filesystem::remove(dir);
  const std::string fifo = temp_path("a_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { exec::SafetensorsFile::open(fifo); }) == "'" + fifo + "' is not a regular file: safetensors weights are read from files");
  std::filesystem::remove(fifo);
  // Nested objects of distinct tensors may repeat keys (each has its own dtype).
  const std::string ok = raw_file("distinct", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  four + four, -1);
  CHECK(error_of([&] { exec::SafetensorsFile::open(ok); }) == "(no error)");
  std::filesystem::remove(ok);
}

TEST_CASE("writing a value its dtype cannot hold is an error", "[exec][safetensors]") {
  HostTensor t(DType::BF16, {1});
  t.data[0] = 1.0 + 1.0 / 1024;  // between two bf16 values
  const std::string path = temp_path("inexact");
  CHECK(error_of([&] { exec::write_safetensors(path, {{"w", t}}); }).find("tensor 'w' element 0") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("weights are matched to a graph's params by name, dtype and shape", "[exec][safetensors]") {
  Module m = parse_module("graph @mlp(%x: bf16[T, 8], %w: param bf16[16, 8], %g: param bf16[8]) {\n"
                          "  %n = rms_norm(%x, %g) {eps = 1e-5}\n  %y = matmul(%n, %w)\n  return %y\n}\n",
                          "<test>");
  const Graph& g = m.graphs[0];
  auto file = [&](const std::string& stem, std::vector<std::pair<std::string, HostTensor>> ts) {
    const std::string path = temp_path(stem);
    exec::write_safetensors(path, ts);
    return path;
  };
  const std::string good = file("good", {{"w", HostTensor(DType::BF16, {16, 8})}, {"g", HostTensor(DType::BF16, {8})},
                                          {"other_layer.w", HostTensor(DType::F32, {2})}});
  const exec::SafetensorsFile f = exec::SafetensorsFile::open(good);
  std::vector<std::string> unused;
  const std::vector<exec::WeightMatch> ms = exec::match_weights(g, f, &unused);
  REQUIRE(ms.size() == 2);
  CHECK(g.value(ms[0].param).name == "w");
  CHECK(ms[0].tensor->shape == std::vector<int64_t>{16, 8});
  CHECK(g.value(ms[1].param).name == "g");
  CHECK(unused == std::vector<std::string>{"other_layer.w"});

  const std::string missing = file("missing", {{"w", HostTensor(DType::BF16, {16, 8})}});
  CHECK(error_of([&] { exec::match_weights(g, exec::SafetensorsFile::open(missing)); }) ==
        missing + ": no tensor 'g' for the weight %g: bf16[8] of @mlp");
  const std::string shape = file("shape", {{"w", HostTensor(DType::BF16, {8, 16})}, {"g", HostTensor(DType::BF16, {8})}});
  CHECK(error_of([&] { exec::match_weights(g, exec::SafetensorsFile::open(shape)); }) ==
        shape + ": tensor 'w' is bf16[8, 16] but the weight %w of @mlp is bf16[16, 8]");
  const std::string dtype = file("dtype", {{"w", HostTensor(DType::F16, {16, 8})}, {"g", HostTensor(DType::BF16, {8})}});
  CHECK(error_of([&] { exec::match_weights(g, exec::SafetensorsFile::open(dtype)); }) ==
        dtype + ": tensor 'w' is f16[16, 8] but the weight %w of @mlp is bf16[16, 8]");
  for (const std::string& p : {good, missing, shape, dtype}) std::filesystem::remove(p);
}
