// Hand-written SVG: axes with decade ticks, one polyline per series, legend on the right.
#include "cli/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mlarun::cli {

namespace {

constexpr double kWidth = 1000, kHeight = 520, kLeft = 90, kRight = 330, kTop = 50, kBottom = 60;
constexpr const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e"};

std::string Format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), fmt, a, b, c, d);
  return buffer;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') {
      out += "&lt;";
    } else if (ch == '>') {
      out += "&gt;";
    } else if (ch == '&') {
      out += "&amp;";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string DecadeLabel(int exponent, bool bytes) {
  if (!bytes) {
    const char* names[] = {"1", "10", "100", "1K", "10K", "100K", "1M", "10M"};
    return exponent >= 0 && exponent < 8 ? names[exponent] : Format("1e%g", exponent);
  }
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  const int unit = std::clamp(exponent / 3, 0, 4);
  const int mantissa = static_cast<int>(std::pow(10, exponent - 3 * unit));
  return std::to_string(mantissa) + " " + units[unit];
}

}  // namespace

std::string RenderLogLogSvg(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  double x_min = 1e300, x_max = 0, y_min = 1e300, y_max = 0;
  for (const PlotSeries& s : series) {
    for (double v : s.x) x_min = std::min(x_min, v), x_max = std::max(x_max, v);
    for (double v : s.y) y_min = std::min(y_min, v), y_max = std::max(y_max, v);
  }
  const double lx0 = std::floor(std::log10(x_min)), lx1 = std::ceil(std::log10(x_max));
  const double ly0 = std::floor(std::log10(y_min)), ly1 = std::ceil(std::log10(y_max));
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) {
    return kLeft + (std::log10(x) - lx0) / std::max(1.0, lx1 - lx0) * plot_w;
  };
  auto py = [&](double y) {
    return kTop + plot_h - (std::log10(y) - ly0) / std::max(1.0, ly1 - ly0) * plot_h;
  };

  std::string svg = Format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, kHeight);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += Format("<text x=\"%g\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">",
                kLeft + plot_w / 2) +
         Escape(options.title) + "</text>\n";
  for (double e = lx0; e <= lx1; ++e) {
    const double x = px(std::pow(10, e));
    svg += Format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", x, kTop, x,
                  kTop + plot_h);
    svg += Format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", x, kTop + plot_h + 18) +
           DecadeLabel(static_cast<int>(e), false) + "</text>\n";
  }
  for (double e = ly0; e <= ly1; ++e) {
    const double y = py(std::pow(10, e));
    svg += Format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", kLeft, y,
                  kLeft + plot_w, y);
    svg += Format("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">", kLeft - 6, y + 4) +
           DecadeLabel(static_cast<int>(e), true) + "</text>\n";
  }
  svg += Format(
      "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"black\"/>\n",
      kLeft, kTop, plot_w, plot_h);
  svg +=
      Format("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">", kLeft + plot_w / 2, kHeight - 15) +
      Escape(options.x_label) + "</text>\n";
  svg += Format("<text transform=\"translate(20 %g) rotate(-90)\" text-anchor=\"middle\">",
                kTop + plot_h / 2) +
         Escape(options.y_label) + "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string points;
    for (size_t j = 0; j < s.x.size(); ++j) points += Format("%.1f,%.1f ", px(s.x[j]), py(s.y[j]));
    svg += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) +
           "\" points=\"" + points + "\"/>\n";
    const double ly = kTop + 10 + 20 * static_cast<double>(i);
    svg += Format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke-width=\"3\" ",
                  kWidth - kRight + 15, ly, kWidth - kRight + 40, ly) +
           "stroke=\"" + color + "\"/>\n";
    svg += Format("<text x=\"%g\" y=\"%g\">", kWidth - kRight + 46, ly + 4) + Escape(s.label) +
           "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mlarun::cli
