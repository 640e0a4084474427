// The ISA-independent driver of KernelTable::matmul_rows_blocks (blocks_simd.h), written once and
// compiled per ISA: the group step (a group's four units decoded once for a tile of tokens), the
// row tiles, the token tiling and passes over the rows, and the dispatch on the block format.
// blocks_avx2.cc and blocks_avx512.cc (whose comments describe the method) include this file once,
// after `#define SIMD_NAMESPACE avx2` / `avx512` and after defining, in the anonymous namespace of
// mlarun::SIMD_NAMESPACE, what it is written over:
//   VecI, VecF: the integer and float vector types;
//   kGroupBlocks: blocks per group; kTokenGroupBytes: a token's prepared activations per group;
//   Load(p) (unaligned VecI), Level1(a, b) and Level2(a, b) (the two levels of unpack-and-add),
//   ZeroF() and HorizontalSum(v) (the float sum of a VecF's lanes);
//   PrepareToken<Fmt>(x, t, n_groups, out): token t's prepared activations of all groups;
//   Accumulate<Fmt>(s, i, tg, acc): acc plus a group's float part for one token (i its I_b);
//   the formats SmallFormat<kBB, kQs, kQh, kHasMin, kShiftBits> (Q4_0, Q4_1, Q5_0, Q5_1),
//   KFormat<kSB, kQs, kQh> (Q4_K, Q5_K), Q8_0 and Q6_K, each with kGroupBytes, kMaxTile (the
//   widest token tile), Scales, LoadScales(g), Decode<J>(g, &f, &gv) (unit J < 4 of the group at
//   g, a pair of blocks with AVX2 and a quad with AVX-512, as its F and G vectors) and
//   Dot<J>(s, f, g, af, ag) (the unit's sums against the activations' af, ag).
// All of it but MatMulRowsBlocks is in that anonymous namespace: no weak symbols that baseline
// code could bind to (tests/kernels/isa_symbols_test.sh).
// Include only from a translation unit compiled for the matching target.

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "kernels/block_formats.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun::SIMD_NAMESPACE {
namespace {

// The prepared activations of a pass over the rows: on the stack up to kPrepStackBytes, else
// (passes of kMinPassTokens or more wide tokens) on the heap.
constexpr int64_t kPrepStackBytes = 64 * 1024;
constexpr int64_t kMinPassTokens = 16;
// The first token tile over a row prefetches the weights this far ahead into L1 (the rows stream
// from memory once per pass; later tiles find them in cache). AVX-512, Q4_K 4096 x 2048, one
// token, one thread (this project's Intel Xeon VM, busy): 7.8-8.2 GB/s without, 9.3-10.9 with
// 1,536 bytes (2,048: 9.1-11.3, 768: 8.7-9.2), with a read probe at 12-13 GB/s.
constexpr int64_t kPrefetchBytes = 1536;
// A unit's prepared activations: its F and G vectors.
constexpr int64_t kVecBytes = sizeof(VecI);

// Block layouts (block_formats.h).
using Q4_0 = SmallFormat<18, 2, -1, false, 4>;
using Q4_1 = SmallFormat<20, 4, -1, true, 0>;
using Q5_0 = SmallFormat<22, 6, 2, false, 3>;
using Q5_1 = SmallFormat<24, 8, 4, true, 0>;
using Q4_K = KFormat<144, 16, -1>;
using Q5_K = KFormat<176, 48, 16>;

// Units J and J + 1 of a group (decoded in w) against one token's prepared activations `a` (the
// group's): Level1 of their sums.
template <class Fmt, int J>
[[gnu::always_inline]] inline VecI UnitPair(const typename Fmt::Scales& s, const VecI (&w)[4],
                                            const uint8_t* a) {
  const uint8_t* a0 = a + 2 * kVecBytes * J;
  const uint8_t* a1 = a0 + 2 * kVecBytes;
  return Level1(Fmt::template Dot<J>(s, w[0], w[1], Load(a0), Load(a0 + kVecBytes)),
                Fmt::template Dot<J + 1>(s, w[2], w[3], Load(a1), Load(a1 + kVecBytes)));
}

// One group of a row (at g) against NT tokens' prepared activations of the group (tg + t *
// token_bytes), added to acc: units 0 and 1 decoded, then every token's sums of them; units 2
// and 3 likewise, then every token's float part (the registers live across tokens: the
// accumulators, the first pair's sums and the 4 decoded vectors).
template <class Fmt, int NT>
[[gnu::always_inline]] inline void GroupStep(const uint8_t* g, const uint8_t* tg, bool prefetch,
                                             int64_t token_bytes, VecF (&acc)[NT]) {
  if (prefetch) {
    for (int64_t b = 0; b < Fmt::kGroupBytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(g + kPrefetchBytes + b), _MM_HINT_T0);
  }
  const typename Fmt::Scales s = Fmt::LoadScales(g);
  VecI w[4], s01[NT];
  Fmt::template Decode<0>(g, &w[0], &w[1]);
  Fmt::template Decode<1>(g, &w[2], &w[3]);
  for (int t = 0; t < NT; ++t) s01[t] = UnitPair<Fmt, 0>(s, w, tg + t * token_bytes);
  Fmt::template Decode<2>(g, &w[0], &w[1]);
  Fmt::template Decode<3>(g, &w[2], &w[3]);
  for (int t = 0; t < NT; ++t) {
    const uint8_t* a = tg + t * token_bytes;
    acc[t] = Accumulate<Fmt>(s, Level2(s01[t], UnitPair<Fmt, 2>(s, w, a)), a, acc[t]);
  }
}

// One row against NT tokens (their prepared activations at tok + t * token_bytes): y[t * ldy].
template <class Fmt, int NT>
void RowTile(const uint8_t* row, int64_t full_groups, const uint8_t* tail, bool prefetch,
             const uint8_t* tok, int64_t token_bytes, float* y, int64_t ldy) {
  VecF acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = ZeroF();
  for (int64_t g = 0; g < full_groups; ++g)
    GroupStep<Fmt, NT>(row + g * Fmt::kGroupBytes, tok + g * kTokenGroupBytes, prefetch,
                       token_bytes, acc);
  if (tail != nullptr) {
    GroupStep<Fmt, NT>(tail, tok + full_groups * kTokenGroupBytes, prefetch, token_bytes, acc);
  }
  for (int t = 0; t < NT; ++t) y[t * ldy] = HorizontalSum(acc[t]);
}

// RowTile<Fmt, width> for width in [1, N].
template <class Fmt, int N>
inline void TileOfWidth(int64_t width, const uint8_t* row, int64_t full_groups, const uint8_t* tail,
                        bool prefetch, const uint8_t* tok, int64_t token_bytes, float* y,
                        int64_t ldy) {
  if (width == N) {
    RowTile<Fmt, N>(row, full_groups, tail, prefetch, tok, token_bytes, y, ldy);
  } else if constexpr (N > 1) {
    TileOfWidth<Fmt, N - 1>(width, row, full_groups, tail, prefetch, tok, token_bytes, y, ldy);
  }
}

// Scratch for passes whose prepared tokens do not fit the stack buffer.
struct HeapBytes {
  explicit HeapBytes(int64_t n) : p(n > 0 ? new uint8_t[static_cast<size_t>(n)] : nullptr) {}
  ~HeapBytes() { delete[] p; }
  HeapBytes(const HeapBytes&) = delete;
  HeapBytes& operator=(const HeapBytes&) = delete;
  uint8_t* p;
};

template <class Fmt>
void MatMulBlocks(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const Q8Activations& x,
                  float* y, int64_t ldy) {
  const int64_t n_blocks = w.cols / kQ8Block;
  const int64_t n_groups = (n_blocks + kGroupBlocks - 1) / kGroupBlocks;
  const int64_t full_groups = n_blocks / kGroupBlocks;
  // (BlockFormat::Bytes by hand: an inline member not inlined at -O1 would be a weak symbol here.)
  const int64_t row_bytes = w.cols / w.blocks->block_values * w.blocks->block_bytes;
  const int64_t tail_bytes = row_bytes - full_groups * Fmt::kGroupBytes;
  const int64_t token_bytes = n_groups * kTokenGroupBytes;
  const int64_t stack_tokens = kPrepStackBytes / token_bytes;
  const int64_t per_pass =
      std::min(x.n_tokens, std::max(stack_tokens, std::min<int64_t>(kMinPassTokens, x.n_tokens)));
  alignas(64) uint8_t stack[kPrepStackBytes];
  HeapBytes heap(per_pass > stack_tokens ? per_pass * token_bytes : 0);
  uint8_t* const prep = heap.p != nullptr ? heap.p : stack;
  const uint8_t* data = static_cast<const uint8_t*>(w.data);
  alignas(64) uint8_t tail[Fmt::kGroupBytes];
  for (int64_t t0 = 0; t0 < x.n_tokens; t0 += per_pass) {
    const int64_t nt = std::min(per_pass, x.n_tokens - t0);
    for (int64_t t = 0; t < nt; ++t) PrepareToken<Fmt>(x, t0 + t, n_groups, prep + t * token_bytes);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* row = data + r * row_bytes;
      const uint8_t* tail_group = nullptr;
      if (tail_bytes > 0) {
        std::memset(tail, 0, sizeof(tail));
        std::memcpy(tail, row + full_groups * Fmt::kGroupBytes, static_cast<size_t>(tail_bytes));
        tail_group = tail;
      }
      float* out = y + t0 * ldy + (r - row_begin);
      // Tiles of near-equal widths (17 tokens, tiles of up to 8: 6 6 5), each token alone in its
      // tile's math.
      const int64_t n_tiles = (nt + Fmt::kMaxTile - 1) / Fmt::kMaxTile;
      for (int64_t i = 0, t = 0; i < n_tiles; ++i) {
        const int64_t width = (nt - t) / (n_tiles - i);
        TileOfWidth<Fmt, Fmt::kMaxTile>(width, row, full_groups, tail_group, i == 0,
                                        prep + t * token_bytes, token_bytes, out + t * ldy, ldy);
        t += width;
      }
    }
  }
}

}  // namespace

void MatMulRowsBlocks(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                      const Q8Activations& x, float* y, int64_t ldy) {
  MLARUN_CHECK(w.blocks != nullptr && x.cols == w.cols && w.cols % w.blocks->block_values == 0);
  switch (w.blocks->ggml_type) {
    case kGgmlQ4_0:
      return MatMulBlocks<Q4_0>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ4_1:
      return MatMulBlocks<Q4_1>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ5_0:
      return MatMulBlocks<Q5_0>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ5_1:
      return MatMulBlocks<Q5_1>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ8_0:
      return MatMulBlocks<Q8_0>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ4_K:
      return MatMulBlocks<Q4_K>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ5_K:
      return MatMulBlocks<Q5_K>(w, row_begin, row_end, x, y, ldy);
    case kGgmlQ6_K:
      return MatMulBlocks<Q6_K>(w, row_begin, row_end, x, y, ldy);
    default:
      return MatMulRowsBlocksScalar(w, row_begin, row_end, x, y, ldy);
  }
}

}  // namespace mlarun::SIMD_NAMESPACE
