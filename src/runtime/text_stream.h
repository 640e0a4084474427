// Streams generated tokens as text: whole UTF-8 characters only, and stop strings held back until
// they are ruled out (a stop string is never printed, not even in part).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mlarun {

class TextStream {
 public:
  // `tokenizer` must outlive the stream. Special tokens (e.g. EOS) are not printed.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Adds a token; returns the text that is now safe to emit. Sets `*stopped` once a stop string
  // appeared (the text before it is returned; nothing after it ever is).
  std::string Push(int32_t token, bool* stopped);
  // Returns everything still held back (at the end of generation, when no stop string matched).
  std::string Finish();
  // All text emitted so far.
  const std::string& emitted() const { return emitted_; }

 private:
  std::string Release(size_t n);

  StreamDecoder decoder_;
  std::vector<std::string> stop_strings_;
  std::string held_;  // decoded text not yet emitted (could start a stop string)
  std::string emitted_;
  bool stopped_ = false;
};

}  // namespace mlarun
