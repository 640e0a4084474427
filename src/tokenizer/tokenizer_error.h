// Declares `TokenizerError`, the one exception type the tokenizer library throws for malformed
// tokenizer files, unsupported features and invalid arguments.
#ifndef MLARUN_TOKENIZER_TOKENIZER_ERROR_H_
#define MLARUN_TOKENIZER_TOKENIZER_ERROR_H_

#include <stdexcept>
#include <string>

namespace mlarun {

// Thrown with a one-line message that names the file (or source) and the field at fault, e.g.
// "tokenizer.json: model.merges[3]: unknown token 'xy'".
class TokenizerError : public std::runtime_error {
 public:
  explicit TokenizerError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_TOKENIZER_ERROR_H_
