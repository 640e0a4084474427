// Internal invariant checks: a failed MLARUN_CHECK is a bug in mlarun (not bad input), so it
// prints the condition and aborts in every build type.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MLARUN_CHECK(condition)                                                                   \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "%s:%d: internal check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (false)
