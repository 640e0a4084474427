// Compile-time unrolled loops for register tiles of vectors.
#pragma once

#include <type_traits>
#include <utility>

namespace mlarun {

// Calls f(std::integral_constant<int, I>{}) for I = 0 .. N - 1, unrolled at compile time. Arrays
// of vectors indexed this way have constant indices from the start, so GCC keeps them in
// registers: with plain loops (unrolled only after its scalar replacement pass), GCC 12 left the
// accumulators of the attention score tiles in stack arrays, zeroed by `rep stos` on every call
// and stored and reloaded around the reductions (docs/performance.md, fifth session).
template <int N, typename Fn>
__attribute__((always_inline)) inline void Unrolled(Fn&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

}  // namespace mlarun
