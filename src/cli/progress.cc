// Progress bar drawing: "label [#####.....] 512/4096 12.3/s", redrawn at most 10 times a second.
#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mlarun::cli {

ProgressBar::ProgressBar(std::string label, int64_t total, bool force)
    : label_(std::move(label)),
      total_(total),
      enabled_(force || isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int64_t done) {
  if (!enabled_ || total_ <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %.1f/s ", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_),
               seconds > 0 ? static_cast<double>(done) / seconds : 0.0);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace mlarun::cli
