// bf16 and f16 weights in Layout16::kPacked16 (packed_bf16.h) against float32 activations, for
// tables without bf16 dot products (V::kPackedBf16MatMul). Included by simd_impl.h inside a
// translation unit compiled for the ISA, after F, kW, LoadBf16Pairs and LoadF16.
//
// Symbols: g a group of 16 rows (kPackedParts vectors of kW rows, lane i = row 16 g + p kW + i),
// kk a column pair, t a token. A bf16 word vector of group g at pair kk holds W[row, 2 kk] in its
// low halves and W[row, 2 kk + 1] in its high halves; LoadBf16Pairs widens it exactly with one
// integer op per kW values. An f16 group holds the pair's two columns one after the other, each
// widened by one F16C conversion per kW values (WidenPair). Each output y[t, r] is one FMA chain
// over the columns in order,
//   acc = fma(W[r, 2 kk], x[t, 2 kk], acc);  acc = fma(W[r, 2 kk + 1], x[t, 2 kk + 1], acc),
// so it does not depend on the tile shape, the batch or the row range. A group's weights are one
// contiguous stream (16 rows x cols x 2 bytes), where a row-major tile of 4 rows reads 4 streams
// 2 cols bytes apart.

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/scratch_vector.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun::SIMD_NAMESPACE {

constexpr int kPackedParts = static_cast<int>(kBf16GroupRows) / kW;
// Widened weights (AVX2: products of more than V::kPackedDirectMaxTokens tokens):
// kPackedWideGroups groups' pairs [kk0, kk0 + kPackedWidePairs) widened once into float32, per
// group [pairs][even rows 16 | odd rows 16] (64 KB per group, in L2 while the token tiles pass),
// so that the tiles' inner loop has loads and FMAs only (BM_MatMul avx2_bf16packed, 512 tokens,
// one core: 29.9 -> 36.5 GFLOP/s).
constexpr int64_t kPackedDirectMaxTokens = V::kPackedDirectMaxTokens;
constexpr int64_t kPackedWideGroups = V::kPackedWideGroups;
constexpr int64_t kPackedWidePairs = 512;
// Tiles (per ISA, V::kPacked*): words widened in registers, V::kPackedTileGroups groups x
// kPackedTileTokens tokens; widened weights, kPackedWideTileGroups groups x kPackedWideTileTokens
// tokens (the weights as the FMAs' memory operands).
constexpr int kPackedTileTokens = V::kPackedTileTokens;
constexpr int kPackedWideTileGroups = V::kPackedWideTileGroups;
constexpr int kPackedWideTileTokens = V::kPackedWideTileTokens;

// Where a tile's outputs go: row j of group g, token t at out[t * token_stride +
// g * group_stride + j].
struct GroupOutput {
  float* out;
  int64_t token_stride;
  int64_t group_stride;
  float* At(int64_t g, int64_t t) const { return out + t * token_stride + g * group_stride; }
};

// Bytes of one group's column pair: 16 words (bf16 pairs), or the pair's two columns of 16 f16.
constexpr int64_t kPackedPairBytes = kBf16GroupRows * 4;

// Packed words to bring into L2 while a tile runs: at its pair kk < count, the 64-byte line
// begin + kk * kPackedPairBytes.
struct L2Prefetch {
  const char* begin = nullptr;
  int64_t count = 0;
};

// A word of a packed f16 matrix (packed_bf16.h, PackedF16Index): the 16 words of a group's pair
// hold its two columns of 16 rows one after the other. A type of its own so that the kernels
// below widen it with F16C, where uint32_t words are bf16 pairs.
struct F16PairWord {
  uint32_t bits;
};

// The even and odd columns of pair kk of a group, rows [p kW, (p + 1) kW), as float32 (exact).
inline void WidenPair(const uint32_t* group, int64_t kk, int64_t p, F* even, F* odd) {
  V::LoadBf16Pairs(reinterpret_cast<const uint16_t*>(group + kk * kBf16GroupRows + p * kW), even,
                   odd);
}
inline void WidenPair(const F16PairWord* group, int64_t kk, int64_t p, F* even, F* odd) {
  const auto* halves = reinterpret_cast<const uint16_t*>(group + kk * kBf16GroupRows);
  *even = V::LoadF16(halves + p * kW);
  *odd = V::LoadF16(halves + kBf16GroupRows + p * kW);
}

// Output (g, t) (+)= rows of group g . x[t] over `pairs` pairs, for g < MG and t < NT (x: token
// t at x + t * ldx); kAccumulate: the chains continue from the output's values. Src uint32_t or
// F16PairWord: groups[g] are packed bf16 or f16 words, widened here; float: widened weights.
// kPrefetch: each group's stream V::kPackedBf16PrefetchBytes ahead (one token). `next`: lines of
// the next groups (packed words only).
template <int MG, int NT, bool kPrefetch, bool kAccumulate, typename Src>
inline void PackedBf16Tile(const Src* const* groups, int64_t pairs, const float* x, int64_t ldx,
                           const GroupOutput& out, const L2Prefetch& next = {}) {
  F acc[MG][kPackedParts][NT];
  Unrolled<MG>([&](auto g) {
    Unrolled<kPackedParts>([&](auto p) {
      Unrolled<NT>([&](auto t) {
        if constexpr (kAccumulate) {
          acc[g][p][t] = V::Load(out.At(g, t) + p * kW);
        } else {
          acc[g][p][t] = V::Zero();
        }
      });
    });
  });
  for (int64_t kk = 0; kk < pairs; ++kk) {
    if constexpr (!kPrefetch && !std::is_same_v<Src, float>) {  // only these tiles get `next`
      if (kk < next.count) _mm_prefetch(next.begin + kk * kPackedPairBytes, _MM_HINT_T1);
    }
    // The tile's weights at kk first, then each token's two broadcasts: registers for 2 MG
    // kPackedParts weight vectors, the accumulators and two broadcasts.
    F even[MG][kPackedParts];
    F odd[MG][kPackedParts];
    Unrolled<MG>([&](auto g) {
      if constexpr (std::is_same_v<Src, float>) {
        const float* wide = groups[g] + kk * 2 * kBf16GroupRows;
        Unrolled<kPackedParts>([&](auto p) {
          even[g][p] = V::Load(wide + p * kW);
          odd[g][p] = V::Load(wide + kBf16GroupRows + p * kW);
        });
      } else {
        if constexpr (kPrefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(groups[g] + kk * kBf16GroupRows) +
                           V::kPackedBf16PrefetchBytes,
                       _MM_HINT_T0);
        }
        Unrolled<kPackedParts>(
            [&](auto p) { WidenPair(groups[g], kk, p, &even[g][p], &odd[g][p]); });
      }
    });
    // The broadcast as the FMAs' first operand: with the weights first GCC computed into the
    // broadcast register and copied it back (prefill 12% slower).
    Unrolled<NT>([&](auto t) {
      const F x_even = V::Set1(x[t * ldx + 2 * kk]);
      const F x_odd = V::Set1(x[t * ldx + 2 * kk + 1]);
      Unrolled<MG>([&](auto g) {
        Unrolled<kPackedParts>([&](auto p) {
          acc[g][p][t] = V::Fma(x_even, even[g][p], acc[g][p][t]);
          acc[g][p][t] = V::Fma(x_odd, odd[g][p], acc[g][p][t]);
        });
      });
    });
  }
  Unrolled<MG>([&](auto g) {
    Unrolled<kPackedParts>([&](auto p) {
      Unrolled<NT>([&](auto t) { V::Store(out.At(g, t) + p * kW, acc[g][p][t]); });
    });
  });
}

// Copies the rows of groups [g0, g0 + n_groups) inside [row_begin, row_end) of a tile's output
// (out [n_tokens, n_groups * 16]) to y[(t0 + t) * ldy + (r - row_begin)].
inline void StoreGroupRows(const float* out, int64_t g0, int64_t n_groups, int64_t n_tokens,
                           int64_t row_begin, int64_t row_end, int64_t t0, float* y, int64_t ldy) {
  const int64_t first = std::max(row_begin, g0 * kBf16GroupRows);
  const int64_t last = std::min(row_end, (g0 + n_groups) * kBf16GroupRows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* src = out + t * n_groups * kBf16GroupRows - g0 * kBf16GroupRows;
    std::copy(src + first, src + last, y + (t0 + t) * ldy + (first - row_begin));
  }
}

// Src: uint32_t (bf16) or F16PairWord (f16), as in PackedBf16Tile.
template <typename Src>
inline const Src* PackedGroup(const WeightMatrix& w, int64_t g) {
  return static_cast<const Src*>(w.data) + PackedBf16GroupWords(g, w.cols);
}

// Groups [g0, g0 + MG) against tokens [t0, t0 + NT), reading the packed words in place.
template <int MG, int NT, bool kPrefetch, typename Src>
inline void PackedBf16Groups(const WeightMatrix& w, int64_t g0, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t t0, float* y, int64_t ldy,
                             const L2Prefetch& next = {}) {
  const Src* groups[MG];
  for (int g = 0; g < MG; ++g) groups[g] = PackedGroup<Src>(w, g0 + g);
  alignas(64) float out[kBf16GroupRows * NT * MG];
  PackedBf16Tile<MG, NT, kPrefetch, false>(groups, w.cols / 2, x + t0 * w.cols, w.cols,
                                           {out, MG * kBf16GroupRows, kBf16GroupRows}, next);
  StoreGroupRows(out, g0, MG, NT, row_begin, row_end, t0, y, ldy);
}

// Groups [g0, g0 + MG) against all n_tokens tokens in tiles of kPackedTileTokens, the words
// widened in registers (read from memory by the first tile, from L2 by the others). The last
// kPrefetchTiles tiles bring the next MG groups' words (below g_limit; they follow these in
// memory) into L2 so that the next block's first tile does not wait for memory; a single tile
// prefetches along its own streams instead. BM_MatMul avx512_bf16packed, weights from DRAM, one
// core: 16 tokens 93-96 -> 130-132 GFLOP/s, 48 tokens 123-124 -> 143, 8 tokens 70 -> 92-94.
template <int MG, typename Src>
void PackedBf16GroupsAllTokens(const WeightMatrix& w, int64_t g0, int64_t g_limit,
                               int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                               float* y, int64_t ldy) {
  constexpr int64_t kPrefetchTiles = 8;
  const int64_t pairs = w.cols / 2;
  const int64_t n_tiles = (n_tokens + kPackedTileTokens - 1) / kPackedTileTokens;
  const int64_t prefetch_tiles = std::min(n_tiles, kPrefetchTiles);
  // Lines of the next block: one per pair and group.
  const int64_t next_lines = std::clamp<int64_t>(g_limit - (g0 + MG), 0, MG) * pairs;
  const auto* next_words =
      reinterpret_cast<const char*>(PackedGroup<Src>(w, std::min(g0 + MG, g_limit - 1)));
  if (n_tiles == 1) {  // one pass: prefetch along the groups' streams, as for one token
    ForEachTokenTile<kPackedTileTokens>(n_tokens, [&](auto nt, int64_t t) {
      PackedBf16Groups<MG, decltype(nt)::value, true, Src>(w, g0, row_begin, row_end, x, t, y, ldy);
    });
    return;
  }
  int64_t tile = 0;
  ForEachTokenTile<kPackedTileTokens>(n_tokens, [&](auto nt, int64_t t) {
    L2Prefetch next;
    const int64_t j = tile++ - (n_tiles - prefetch_tiles);
    if (j >= 0 && prefetch_tiles > 1) {
      const int64_t first = j * next_lines / prefetch_tiles;
      next = {next_words + first * kPackedPairBytes, (j + 1) * next_lines / prefetch_tiles - first};
    }
    PackedBf16Groups<MG, decltype(nt)::value, false, Src>(w, g0, row_begin, row_end, x, t, y, ldy,
                                                          next);
  });
}

// Groups [g0, g1) (at most kPackedWideGroups) against all n_tokens tokens through widened
// weights, kPackedWidePairs pairs at a time: per chunk the groups are widened, then each token
// tile passes all of them (x read once per 64 rows, as the row-major kernels do); partial
// [groups, n_tokens, 16] holds the chains between chunks.
template <typename Src>
void PackedBf16BlockWidened(const WeightMatrix& w, int64_t g0, int64_t g1, int64_t row_begin,
                            int64_t row_end, const float* x, int64_t n_tokens, float* y,
                            int64_t ldy) {
  thread_local std::vector<float> wide;
  thread_local std::vector<float> partial;
  const int64_t pairs = w.cols / 2;
  const int64_t chunk = std::min(pairs, kPackedWidePairs);
  const int64_t group_wide = chunk * 2 * kBf16GroupRows;  // floats per group and chunk
  const int64_t group_partial = n_tokens * kBf16GroupRows;
  ResizeScratch(&wide, static_cast<size_t>((g1 - g0) * group_wide));
  ResizeScratch(&partial, static_cast<size_t>((g1 - g0) * group_partial));
  for (int64_t kk0 = 0; kk0 < pairs; kk0 += kPackedWidePairs) {
    const int64_t n_pairs = std::min(kPackedWidePairs, pairs - kk0);
    for (int64_t g = g0; g < g1; ++g) {
      const Src* words = PackedGroup<Src>(w, g) + kk0 * kBf16GroupRows;
      float* dst = wide.data() + (g - g0) * group_wide;
      for (int64_t kk = 0; kk < n_pairs; ++kk) {
        for (int64_t p = 0; p < kPackedParts; ++p) {
          F even;
          F odd;
          WidenPair(words, kk, p, &even, &odd);
          V::Store(dst + kk * 2 * kBf16GroupRows + p * kW, even);
          V::Store(dst + kk * 2 * kBf16GroupRows + kBf16GroupRows + p * kW, odd);
        }
      }
    }
    ForEachTokenTile<kPackedWideTileTokens>(n_tokens, [&](auto nt, int64_t t) {
      const float* x_tile = x + t * w.cols + 2 * kk0;
      auto tile = [&](auto mg, int64_t g) {
        constexpr int kMG = decltype(mg)::value;
        const float* src[kMG];
        for (int i = 0; i < kMG; ++i) src[i] = wide.data() + (g + i - g0) * group_wide;
        const GroupOutput out{partial.data() + (g - g0) * group_partial + t * kBf16GroupRows,
                              kBf16GroupRows, group_partial};
        if (kk0 == 0) {
          PackedBf16Tile<kMG, decltype(nt)::value, false, false>(src, n_pairs, x_tile, w.cols, out);
        } else {
          PackedBf16Tile<kMG, decltype(nt)::value, false, true>(src, n_pairs, x_tile, w.cols, out);
        }
      };
      int64_t g = g0;
      for (; g + kPackedWideTileGroups <= g1; g += kPackedWideTileGroups)
        tile(std::integral_constant<int, kPackedWideTileGroups>{}, g);
      for (; g < g1; ++g) tile(std::integral_constant<int, 1>{}, g);
    });
  }
  for (int64_t g = g0; g < g1; ++g) {
    StoreGroupRows(partial.data() + (g - g0) * group_partial, g, 1, n_tokens, row_begin, row_end, 0,
                   y, ldy);
  }
}

// Rows [row_begin, row_end) of a packed bf16 (Src uint32_t) or f16 (F16PairWord) matrix against
// x [n_tokens, w.cols]: one token in tiles of V::kPackedBf16Groups groups with prefetch, up to
// kPackedDirectMaxTokens in tiles of V::kPackedTileGroups groups x kPackedTileTokens tokens
// (words widened in registers), more per block of groups through widened weights. Every output
// is the same chain in each case.
template <typename Src>
void MatMulRowsPacked16(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                        int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t g_begin = row_begin / kBf16GroupRows;
  const int64_t g_end = (row_end + kBf16GroupRows - 1) / kBf16GroupRows;
  if (n_tokens == 1) {
    constexpr int kMG = V::kPackedBf16Groups;
    int64_t g = g_begin;
    for (; g + kMG <= g_end; g += kMG)
      PackedBf16Groups<kMG, 1, true, Src>(w, g, row_begin, row_end, x, 0, y, ldy);
    for (; g < g_end; ++g)
      PackedBf16Groups<1, 1, true, Src>(w, g, row_begin, row_end, x, 0, y, ldy);
    return;
  }
  if constexpr (kPackedDirectMaxTokens < INT64_MAX) {  // tables without widened weights skip it
    if (n_tokens > kPackedDirectMaxTokens) {
      for (int64_t g = g_begin; g < g_end; g += kPackedWideGroups) {
        PackedBf16BlockWidened<Src>(w, g, std::min(g_end, g + kPackedWideGroups), row_begin,
                                    row_end, x, n_tokens, y, ldy);
      }
      return;
    }
  }
  constexpr int kMG = V::kPackedTileGroups;
  int64_t g = g_begin;
  for (; g + kMG <= g_end; g += kMG)
    PackedBf16GroupsAllTokens<kMG, Src>(w, g, g_end, row_begin, row_end, x, n_tokens, y, ldy);
  for (; g < g_end; ++g)
    PackedBf16GroupsAllTokens<1, Src>(w, g, g_end, row_begin, row_end, x, n_tokens, y, ldy);
}

}  // namespace mlarun::SIMD_NAMESPACE
