// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mlarun::cli {

class ProgressBar {
 public:
  // `total` units; draws nothing unless stderr is a TTY (or `force` is set).
  ProgressBar(std::string label, int64_t total, bool force = false);
  ~ProgressBar();
  void Update(int64_t done);
  // Clears the bar's line.
  void Finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mlarun::cli
