// A minimal SVG line chart with logarithmic axes (for `kv-report --plot`).
#pragma once

#include <string>
#include <vector>

namespace mlarun::cli {

struct PlotSeries {
  std::string label;
  std::vector<double> x;  // > 0
  std::vector<double> y;  // > 0
};

struct PlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
};

// Returns an SVG document plotting every series on log10 x and y axes with a legend.
std::string RenderLogLogSvg(const std::vector<PlotSeries>& series, const PlotOptions& options);

}  // namespace mlarun::cli
