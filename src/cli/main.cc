// mlarun command-line entry point: dispatches to the subcommands and turns errors (bad options
// included) into one `error: ...` line and exit code 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/common.h"
#include "core/error.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"mlarun: DeepSeek-style (MLA + MoE) inference on the CPU"};
  app.require_subcommand(1);
  int exit_code = 0;
  mlarun::cli::RegisterGenerate(app, &exit_code);
  mlarun::cli::RegisterLogits(app, &exit_code);
  mlarun::cli::RegisterMakeModel(app, &exit_code);
  mlarun::cli::RegisterKvReport(app, &exit_code);
  mlarun::cli::RegisterBench(app, &exit_code);
  mlarun::cli::RegisterServe(app, &exit_code);
  mlarun::cli::RegisterTokenize(app, &exit_code);
  mlarun::cli::RegisterChat(app, &exit_code);
  mlarun::cli::RegisterPerplexity(app, &exit_code);
  mlarun::cli::RegisterQuantize(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (exit code 0) prints as CLI11 formats it; a bad option is one `error:` line and exit
    // code 1, like every other error.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 1;
  } catch (const mlarun::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (...) {  // setting up the options failed (out of memory): still one line, exit code 1
    std::fputs("error: mlarun could not start\n", stderr);
    return 1;
  }
}
