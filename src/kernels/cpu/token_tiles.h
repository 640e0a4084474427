// Token tiling shared by the matmul kernels of every ISA: tiles of kMaxTokens tokens, then one
// tile of the rest, each handed to a kernel templated on the tile width.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mlarun {

namespace detail {

// Calls tile(std::integral_constant<int, NT>{}, t) for NT = rest, which is in [1, kWidth].
template <int kWidth, typename TileFn>
inline void TokenTileOfWidth(int64_t rest, int64_t t, TileFn&& tile) {
  if (rest == kWidth) {
    tile(std::integral_constant<int, kWidth>{}, t);
  } else if constexpr (kWidth > 1) {
    TokenTileOfWidth<kWidth - 1>(rest, t, tile);
  }
}

}  // namespace detail

// Calls tile(std::integral_constant<int, NT>{}, t, i) for tiles i = 0, 1, ... of near-equal
// widths NT <= kMaxTokens (the fewest tiles that can) covering [0, n_tokens) in order, tile i
// starting at token t.
template <int kMaxTokens, typename TileFn>
inline void ForEachEvenTokenTile(int64_t n_tokens, TileFn&& tile) {
  const int64_t n_tiles = (n_tokens + kMaxTokens - 1) / kMaxTokens;
  for (int64_t i = 0, t = 0; i < n_tiles; ++i) {
    const int64_t width = (n_tokens - t) / (n_tiles - i);
    detail::TokenTileOfWidth<kMaxTokens>(width, t, [&](auto nt, int64_t t0) { tile(nt, t0, i); });
    t += width;
  }
}

// Calls tile(std::integral_constant<int, NT>{}, t) for the token tiles [t, t + NT) that cover
// [0, n_tokens), in order.
template <int kMaxTokens = 4, typename TileFn>
inline void ForEachTokenTile(int64_t n_tokens, TileFn&& tile) {
  static_assert(kMaxTokens >= 1 && kMaxTokens <= 16);
  int64_t t = 0;
  for (; t + kMaxTokens <= n_tokens; t += kMaxTokens)
    tile(std::integral_constant<int, kMaxTokens>{}, t);
  if constexpr (kMaxTokens > 1) {
    if (t < n_tokens) detail::TokenTileOfWidth<kMaxTokens - 1>(n_tokens - t, t, tile);
  }
}

}  // namespace mlarun
