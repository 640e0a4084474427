// Stop-string matching over decoded text with a hold-back window of the longest stop string.
#include "runtime/text_stream.h"

#include <algorithm>

namespace mlarun {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : decoder_(tokenizer, /*skip_special=*/true), stop_strings_(std::move(stop_strings)) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::Release(size_t n) {
  std::string out = held_.substr(0, n);
  held_.erase(0, n);
  emitted_ += out;
  return out;
}

std::string TextStream::Push(int32_t token, bool* stopped) {
  *stopped = stopped_;
  if (stopped_) return "";
  held_ += decoder_.Feed(token);
  // The earliest complete stop string ends generation.
  size_t first = std::string::npos;
  for (const std::string& stop : stop_strings_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    *stopped = true;
    std::string out = Release(first);
    held_.clear();
    return out;
  }
  // Keep back the longest suffix of `held_` that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stop_strings_) {
    for (size_t len = std::min(stop.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  return Release(held_.size() - keep);
}

std::string TextStream::Finish() {
  if (stopped_) return "";
  held_ += decoder_.Flush();
  return Release(held_.size());
}

}  // namespace mlarun
