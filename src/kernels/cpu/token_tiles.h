// Token tiling shared by the matmul kernels of every ISA: tiles of 4 tokens, then one tile of the
// 1-3 left, each handed to a kernel templated on the tile width.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mlarun {

// Calls tile(std::integral_constant<int, NT>{}, t) for the token tiles [t, t + NT) that cover
// [0, n_tokens), in order.
template <typename TileFn>
inline void ForEachTokenTile(int64_t n_tokens, TileFn&& tile) {
  int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) tile(std::integral_constant<int, 4>{}, t);
  switch (n_tokens - t) {
    case 3:
      tile(std::integral_constant<int, 3>{}, t);
      break;
    case 2:
      tile(std::integral_constant<int, 2>{}, t);
      break;
    case 1:
      tile(std::integral_constant<int, 1>{}, t);
      break;
    default:
      break;
  }
}

}  // namespace mlarun
