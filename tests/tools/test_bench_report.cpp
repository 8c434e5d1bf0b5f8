// bench_report.h: JSON, CSV and the roofline SVG of a report with kernels on both sides of the ridge.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "layerjit/error.h"
#include "tools/bench_report.h"

namespace {

using lj::cli::BenchReport;

// An H200-like device: 4 TB/s, 800 TFLOP/s (ridge at 200 FLOP/byte); a GEMV far left of the ridge,
// an attention kernel near it, a GEMM right of it, and a copy that does no arithmetic.
BenchReport report() {
  BenchReport r;
  r.device = "Test GPU";
  r.graph = "layer";
  r.sizes = "T=7";
  r.hbm_bytes_per_s = 4e12;
  r.copy_ms = 0.5;
  r.tensor_flops_per_s = 800e12;
  r.gemm_ms = 1.4;
  r.gemm_config = "wgmma bm=128";
  r.kernels = {{0, "lj_layer_g0_matmul", "gemv mt=2", 0.02, 0.021, 1.0e8, 5.0e7, 0.62, false},
               {2, "lj_layer_g2_attention", "", 0.05, 0.05, 4.0e9, 2.0e7, 0.5, true},
               {3, "lj_layer_g3_matmul", "mma bm=128, bn=128", 1.0, 1.1, 6.0e11, 1.0e9, 0.75, true},
               {4, "lj_layer_g4_copy", "", 0.01, 0.01, 0, 4.0e7, 0.9, false}};
  r.plans = {{"unfused", 9, "9", 3e9, 1.5, 1.0}, {"fused", 4, "4", 1.1e9, 1.1, 1.36}, {"fused, one CUDA graph", 4, "1 graph", 1.1e9, 1.08, 1.39}};
  return r;
}

}  // namespace

TEST_CASE("bench JSON holds every row, the ceilings and derived rates", "[bench_report]") {
  const nlohmann::json j = nlohmann::json::parse(lj::cli::bench_json(report()));
  CHECK(j["schema"] == "layerjit.bench/1");
  CHECK(j["device"] == "Test GPU");
  CHECK(j["ceilings"]["hbm_bytes_per_s"] == 4e12);
  REQUIRE(j["kernels"].size() == 4);
  CHECK(j["kernels"][2]["group"] == 3);
  CHECK(j["kernels"][2]["config"] == "mma bm=128, bn=128");
  CHECK(j["kernels"][2]["tflop_per_s"].get<double>() == Approx(600.0));  // 6e11 FLOP in 1 ms
  CHECK(j["kernels"][2]["intensity"].get<double>() == Approx(600.0));
  CHECK(j["kernels"][0]["gb_per_s"].get<double>() == Approx(2500.0));    // 5e7 bytes in 0.02 ms
  CHECK(j["kernels"][0]["bound_by"] == "memory");
  REQUIRE(j["plans"].size() == 3);
  CHECK(j["plans"][2]["launches"] == "1 graph");
  CHECK(j["plans"][1]["vs_unfused"].get<double>() == Approx(1.36));
  // 1.1e9 bytes at 4 TB/s take 0.275 ms; the graph ran 1.08 ms.
  CHECK(j["plans"][2]["hbm_floor_fraction"].get<double>() == Approx(0.275 / 1.08));
}

TEST_CASE("bench CSV: a header, a row per kernel and per plan, fields with commas quoted", "[bench_report]") {
  std::istringstream in(lj::cli::bench_csv(report()));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 1 + 4 + 3);
  auto fields = [](const std::string& line) {  // CSV with quoted fields
    std::vector<std::string> out(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) out.emplace_back();
      else out.back() += c;
    }
    return out;
  };
  const size_t columns = fields(lines[0]).size();
  for (const std::string& l : lines) CHECK(fields(l).size() == columns);
  CHECK(fields(lines[3])[3] == "mma bm=128, bn=128");
  CHECK(fields(lines[1])[0] == "kernel");
  CHECK(fields(lines[7])[0] == "plan");
  CHECK(fields(lines[7])[13] == "1 graph");
  CHECK(fields(lines[0]).back() == "hbm_floor_fraction");
  CHECK(std::stod(fields(lines[5]).back()) == Approx(0.5));  // the unfused plan: 3e9 bytes at 4 TB/s in 1.5 ms
}

TEST_CASE("roofline SVG: one point per kernel where its intensity and rate put it, under the roof", "[bench_report]") {
  const std::string svg = lj::cli::roofline_svg(report());
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("class=\"roof\"") != std::string::npos);
  const std::regex point(R"re(<circle class="kernel" data-group="(\d+)" data-intensity="([^"]+)" data-tflops="([^"]+)"( data-clamped="1")? cx="([\d.]+)" cy="([\d.]+)")re");
  struct P {
    int group;
    double intensity, tflops, x, y;
    bool clamped;
  };
  std::vector<P> ps;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), point); it != std::sregex_iterator(); ++it)
    ps.push_back({std::stoi((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[5]), std::stod((*it)[6]), (*it)[4].matched});
  REQUIRE(ps.size() == 4);
  CHECK(ps[0].group == 0);
  CHECK(ps[2].intensity == Approx(600));
  CHECK(ps[2].tflops == Approx(600));
  // More intensity is further right; more TFLOP/s is higher (smaller y).
  CHECK(ps[0].x < ps[1].x);
  CHECK(ps[1].x < ps[2].x);
  CHECK(ps[2].y < ps[1].y);
  CHECK(ps[1].y < ps[0].y);
  // The copy does no arithmetic: drawn at the bottom edge, marked.
  CHECK(ps[3].clamped);
  CHECK_FALSE(ps[0].clamped);
  // Inside the plot area.
  for (const P& p : ps) {
    CHECK(p.x >= 80);
    CHECK(p.x <= 620);
    CHECK(p.y >= 40);
    CHECK(p.y <= 490);
  }
  // Names are escaped.
  BenchReport r = report();
  r.kernels[0].name = "a<b&c";
  CHECK(lj::cli::roofline_svg(r).find("a&lt;b&amp;c") != std::string::npos);
}

TEST_CASE("report files are written whole, and a path that cannot be written is a clear error", "[bench_report]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("lj-bench-report-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  lj::cli::write_file_atomically(path, "{}\n");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "{}\n");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left
  CHECK_THROWS_WITH(lj::cli::write_file_atomically((dir / "no" / "such" / "r.json").string(), "x"), Catch::Contains("cannot write"));
  std::filesystem::remove_all(dir);
}
