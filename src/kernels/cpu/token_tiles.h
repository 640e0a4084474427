// Token tiling shared by the matmul kernels of every ISA: tiles of kMaxTokens (<= 4) tokens, then
// one tile of the rest, each handed to a kernel templated on the tile width.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mlarun {

// Calls tile(std::integral_constant<int, NT>{}, t) for the token tiles [t, t + NT) that cover
// [0, n_tokens), in order.
template <int kMaxTokens = 4, typename TileFn>
inline void ForEachTokenTile(int64_t n_tokens, TileFn&& tile) {
  static_assert(kMaxTokens >= 1 && kMaxTokens <= 4);
  int64_t t = 0;
  for (; t + kMaxTokens <= n_tokens; t += kMaxTokens)
    tile(std::integral_constant<int, kMaxTokens>{}, t);
  const int64_t rest = n_tokens - t;
  if constexpr (kMaxTokens > 3) {
    if (rest == 3) tile(std::integral_constant<int, 3>{}, t);
  }
  if constexpr (kMaxTokens > 2) {
    if (rest == 2) tile(std::integral_constant<int, 2>{}, t);
  }
  if constexpr (kMaxTokens > 1) {
    if (rest == 1) tile(std::integral_constant<int, 1>{}, t);
  }
}

}  // namespace mlarun
