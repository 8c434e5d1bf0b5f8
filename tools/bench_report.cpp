// JSON, CSV and the roofline SVG of a bench report (see bench_report.h).
#include "tools/bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layerjit/error.h"

namespace lj::cli {

namespace {

double tflops(const BenchReport::Kernel& k) { return k.ms_alone > 0 ? k.flops / (k.ms_alone * 1e-3) / 1e12 : 0; }
double intensity(const BenchReport::Kernel& k) { return k.bytes > 0 ? k.flops / k.bytes : 0; }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// "0.01", "1", "1000": a decade's label.
std::string decade_label(int e) {
  if (e >= 0) return fmt::format("{:.0f}", std::pow(10.0, e));
  return fmt::format("{:.{}f}", std::pow(10.0, e), -e);
}

}  // namespace

double hbm_floor_fraction(const BenchReport& r, const BenchReport::Plan& p) {
  return r.hbm_bytes_per_s > 0 && p.ms > 0 ? p.bytes / r.hbm_bytes_per_s / (p.ms * 1e-3) : 0;
}

std::string bench_json(const BenchReport& r) {
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const BenchReport::Kernel& k : r.kernels)
    kernels.push_back({{"group", k.group},
                       {"kernel", k.name},
                       {"config", k.config},
                       {"ms_alone", k.ms_alone},
                       {"ms_in_order", k.ms_in_order},
                       {"flops", k.flops},
                       {"bytes", k.bytes},
                       {"intensity", intensity(k)},
                       {"tflop_per_s", tflops(k)},
                       {"gb_per_s", k.ms_alone > 0 ? k.bytes / (k.ms_alone * 1e-3) / 1e9 : 0.0},
                       {"roofline_fraction", k.roofline_fraction},
                       {"bound_by", k.compute_bound ? "compute" : "memory"}});
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (const BenchReport::Plan& p : r.plans)
    plans.push_back({{"plan", p.name}, {"kernels", p.kernels}, {"launches", p.launches}, {"bytes", p.bytes}, {"ms", p.ms}, {"vs_unfused", p.vs_unfused},
                     {"hbm_floor_fraction", hbm_floor_fraction(r, p)}});
  const nlohmann::ordered_json doc = {
      {"schema", "layerjit.bench/1"},
      {"device", r.device},
      {"graph", r.graph},
      {"sizes", r.sizes},
      {"ceilings",
       {{"hbm_bytes_per_s", r.hbm_bytes_per_s}, {"copy_ms", r.copy_ms}, {"tensor_flops_per_s", r.tensor_flops_per_s}, {"gemm_ms", r.gemm_ms},
        {"gemm_config", r.gemm_config}}},
      {"kernels", kernels},
      {"plans", plans}};
  return doc.dump(2) + "\n";
}

std::string bench_csv(const BenchReport& r) {
  std::string out =
      "section,group,name,config,ms_alone,ms_in_order,flops,bytes,tflop_per_s,gb_per_s,roofline_fraction,bound_by,kernels,launches,ms,vs_unfused,hbm_floor_fraction\n";
  for (const BenchReport::Kernel& k : r.kernels)
    out += fmt::format("kernel,{},{},{},{:.6f},{:.6f},{:.0f},{:.0f},{:.4f},{:.2f},{:.4f},{},,,,,\n", k.group, csv_field(k.name), csv_field(k.config),
                       k.ms_alone, k.ms_in_order, k.flops, k.bytes, tflops(k), k.ms_alone > 0 ? k.bytes / (k.ms_alone * 1e-3) / 1e9 : 0.0,
                       k.roofline_fraction, k.compute_bound ? "compute" : "memory");
  for (const BenchReport::Plan& p : r.plans)
    out += fmt::format("plan,,{},,,,,{:.0f},,,,,{},{},{:.6f},{:.4f},{:.4f}\n", csv_field(p.name), p.bytes, p.kernels, csv_field(p.launches), p.ms,
                      p.vs_unfused, hbm_floor_fraction(r, p));
  return out;
}

std::string roofline_svg(const BenchReport& r) {
  constexpr double kW = 960, kH = 560, kX0 = 80, kX1 = 620, kY0 = 40, kY1 = 490;
  const double peak = r.tensor_flops_per_s / 1e12;  // TFLOP/s
  const double bw = r.hbm_bytes_per_s / 1e12;       // TB/s: TFLOP/s per FLOP/byte
  const double ridge = bw > 0 ? peak / bw : 1;
  // Axes in whole decades around the kernels and the ridge.
  double imin = ridge, imax = ridge, tmin = peak, tmax = peak;
  for (const BenchReport::Kernel& k : r.kernels) {
    if (intensity(k) > 0) imin = std::min(imin, intensity(k)), imax = std::max(imax, intensity(k));
    if (tflops(k) > 0) tmin = std::min(tmin, tflops(k)), tmax = std::max(tmax, tflops(k));
  }
  const int xe0 = static_cast<int>(std::floor(std::log10(std::max(imin, 1e-6)))) - 1;
  const int xe1 = static_cast<int>(std::ceil(std::log10(std::max(imax, 1e-6)))) + 1;
  const int ye0 = static_cast<int>(std::floor(std::log10(std::max(tmin, 1e-9)))) - 1;
  const int ye1 = static_cast<int>(std::ceil(std::log10(std::max(tmax * 1.5, 1e-9))));  // room above the roof
  auto X = [&](double i) { return kX0 + (std::log10(i) - xe0) / (xe1 - xe0) * (kX1 - kX0); };
  auto Y = [&](double t) { return kY1 - (std::log10(t) - ye0) / std::max(1, ye1 - ye0) * (kY1 - kY0); };
  const double ylo = std::pow(10.0, ye0), xlo = std::pow(10.0, xe0), xhi = std::pow(10.0, xe1);

  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"Helvetica, Arial, sans-serif\" "
      "font-size=\"12\">\n<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kW, kH, xml(fmt::format("layerjit bench roofline: @{} ({}) on {}", r.graph, r.sizes, r.device)));
  s += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\">@{} ({}) on {}</text>\n", kX0, xml(r.graph), xml(r.sizes), xml(r.device));
  // Grid and decade labels.
  for (int e = xe0; e <= xe1; ++e)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                     X(std::pow(10.0, e)), kY0, kY1, kY1 + 16, decade_label(e));
  for (int e = ye0; e <= ye1; ++e)
    s += fmt::format("<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                     Y(std::pow(10.0, e)), kX0, kX1, kX0 - 6, Y(std::pow(10.0, e)) + 4, decade_label(e));
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kX0, kY0, kX1 - kX0, kY1 - kY0);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte of device memory)</text>\n", (kX0 + kX1) / 2, kH - 30);
  s += fmt::format("<text x=\"20\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {0})\">TFLOP/s</text>\n", (kY0 + kY1) / 2);
  // The roof: bandwidth up to the ridge, then the tensor-core ceiling (both measured in this run).
  const double x_start = std::max(xlo, ylo / std::max(bw, 1e-12));
  s += fmt::format("<polyline class=\"roof\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
                   X(x_start), Y(x_start * bw), X(ridge), Y(peak), X(xhi), Y(peak));
  s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#c0392b\" text-anchor=\"end\">{:.0f} TFLOP/s (8192^3 GEMM)</text>\n", kX1 - 4,
                   Y(peak) - 6, peak);
  // The bandwidth label along the slope, at its middle, just above it.
  const double mx = (X(x_start) + X(ridge)) / 2, my = (Y(x_start * bw) + Y(peak)) / 2;
  s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" dy=\"-6\" fill=\"#c0392b\" text-anchor=\"middle\" transform=\"rotate({2:.1f} {0:.1f} {1:.1f})\">"
                   "{3:.2f} TB/s (device copy)</text>\n",
                   mx, my, -std::atan2(Y(x_start * bw) - Y(peak), X(ridge) - X(x_start)) * 180 / M_PI, bw);
  // The kernels, numbered by group, and the list beside the plot.
  double ly = kY0 + 4;
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">kernel: ms, of roof</text>\n", kX1 + 20, ly);
  for (const BenchReport::Kernel& k : r.kernels) {
    const bool clamped = intensity(k) <= 0 || tflops(k) <= 0;  // nothing to place on a log axis
    const double cx = X(std::clamp(intensity(k) > 0 ? intensity(k) : xlo, xlo, xhi));
    const double cy = Y(std::max(tflops(k) > 0 ? tflops(k) : ylo, ylo));
    const char* color = k.compute_bound ? "#2471a3" : "#229954";
    s += fmt::format(
        "<circle class=\"kernel\" data-group=\"{}\" data-intensity=\"{:.6g}\" data-tflops=\"{:.6g}\"{} cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" "
        "fill-opacity=\"0.8\"><title>{}</title></circle>\n",
        k.group, intensity(k), tflops(k), clamped ? " data-clamped=\"1\"" : "", cx, cy, color,
        xml(fmt::format("{} ({}): {:.4f} ms, {:.1f} TFLOP/s, {:.0f} GB/s, {:.0f} % of the roof", k.name, k.config.empty() ? "-" : k.config,
                        k.ms_alone, tflops(k), k.bytes / (k.ms_alone * 1e-3) / 1e9, 100 * k.roofline_fraction)));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">{}</text>\n", cx + 7, cy - 5, k.group);
    ly += 16;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\"><tspan fill=\"{}\">&#9679;</tspan> {} {}: {:.4f} ms, {:.0f} %</text>\n", kX1 + 20, ly,
                     color, k.group, xml(k.name), k.ms_alone, 100 * k.roofline_fraction);
  }
  ly += 24;
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\"><tspan fill=\"#229954\">&#9679;</tspan> memory-bound <tspan fill=\"#2471a3\">&#9679;</tspan> "
                   "compute-bound</text>\n",
                   kX1 + 20, ly);
  for (const BenchReport::Plan& p : r.plans) {
    ly += 16;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}: {:.4f} ms ({:.2f}x)</text>\n", kX1 + 20, ly, xml(p.name), p.ms, p.vs_unfused);
  }
  return s + "</svg>\n";
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  const std::filesystem::path tmp = p.parent_path() / fmt::format(".{}.{}.tmp", p.filename().string(), ::getpid());
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      throw UserError(fmt::format("cannot write {}", path));
    }
  }
  std::filesystem::rename(tmp, p, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw UserError(fmt::format("cannot write {}: {}", path, ec.message()));
  }
}

}  // namespace lj::cli
