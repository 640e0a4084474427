// Error type for user-facing failures (bad files, bad options, bad requests). Messages are one line
// and name the file, tensor, field or option at fault.
#pragma once

#include <stdexcept>
#include <string>

namespace mlarun {

// Thrown for every recoverable, user-caused failure; the CLI prints `error: <what()>` and exits 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mlarun
