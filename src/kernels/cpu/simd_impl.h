// Kernels written once over a vector-traits type `V` and compiled per ISA (kernels_avx2.cc,
// kernels_avx512.cc include this file with their own traits and target flags).
//
// MatMul tiles: an MR x NT tile keeps one V-wide accumulator per (row, token) pair; columns are
// consumed in steps of V::kWidth, the tail with zero-filled masked loads, and each accumulator is
// reduced with V::Reduce. The per-pair order never depends on the tile shape, so results are
// identical for any batch size or row split (batching invariance).
// Packed Q8 tiles (PackedTileQ8) and the GEMM of prefill attention (Gemm) instead keep one lane
// per output row or column: no horizontal reductions (see their comments).
// The packed bf16, packed Q8 and attention kernels are in simd_packed_bf16_impl.h,
// simd_packed_q8_impl.h and simd_attention_impl.h, included below.
// Include only from a translation unit compiled for the matching target.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/scratch_vector.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun::SIMD_NAMESPACE {

using F = V::F;
constexpr int kW = V::kWidth;
// Values per pair-form step: one vector load of bf16 pairs, widened to two float vectors.
constexpr int64_t kPairStep = int64_t{2} * kW;

// An IEEE binary16 weight (kF16), a type of its own so that Tile widens it with F16C
// (uint16_t weights are bf16).
struct F16Weight {
  uint16_t bits;
};

// A row of FP8 E4M3 weights (kF8E4M3) with its block scales (TileF8), where row + c is the
// cursor at column c (LoadWTail). Weight c is F8E4M3ToF32(values[c]) * the scale of its column
// block; scales256[c >> block_shift] holds that scale times 256, since V::LoadF8Div256 gives
// value / 256 (a float16, widened exactly): the product is the scalar's value * scale, rounded
// once.
// Vectors start at multiples of kW within one block (block columns a power of two >= kW).
struct F8Cursor {
  const uint8_t* values;
  const float* scale256;
};
struct F8Row {
  const uint8_t* values;
  const float* scales256;
  int block_shift;
  F8Cursor operator+(int64_t c) const { return {values + c, scales256 + (c >> block_shift)}; }
};

inline F LoadW(const float* p) { return V::Load(p); }
inline F LoadW(const uint16_t* p) { return V::LoadBf16(p); }
inline F LoadW(const F16Weight* p) { return V::LoadF16(&p->bits); }
inline F LoadWTail(const float* p, int n) { return V::LoadTail(p, n); }
inline F LoadWTail(const uint16_t* p, int n) { return V::LoadBf16Tail(p, n); }
inline F LoadWTail(const F16Weight* p, int n) {
  alignas(64) uint16_t tmp[kW] = {};
  for (int i = 0; i < n; ++i) tmp[i] = p[i].bits;
  return V::LoadF16(tmp);
}
// Lanes past n are +0, as LoadTail's of a converted row (not 0 * a negative scale).
inline F LoadWTail(F8Cursor p, int n) {
  alignas(64) float tmp[kW] = {};
  for (int i = 0; i < n; ++i) tmp[i] = F8E4M3ToF32(p.values[i]) * (*p.scale256 / 256.0f);
  return V::Load(tmp);
}

// acc[r][t] += rows[r] . x[t] over the columns [c, cols), fewer than kW (a tile's tail).
template <int MR, int NT, typename Row>
__attribute__((always_inline)) inline void AddTail(const Row* rows, const float* x, int64_t ldx,
                                                   int64_t c, int64_t cols, F (&acc)[MR][NT]) {
  if (c >= cols) return;
  const int tail = static_cast<int>(cols - c);
  F xv[NT];
  Unrolled<NT>([&](auto t) { xv[t] = V::LoadTail(x + t * ldx + c, tail); });
  Unrolled<MR>([&](auto r) {
    const F wv = LoadWTail(rows[r] + c, tail);
    Unrolled<NT>([&](auto t) { acc[r][t] = V::Fma(wv, xv[t], acc[r][t]); });
  });
}

// y[t * ldy + r] = rows[r] . x[t] for r < MR, t < NT; Row is a pointer to the row's weights
// (float, bf16 as uint16_t, F16Weight; FP8 rows go to TileF8). kPairX (bf16 rows): x is in pair
// form (Bf16PairForm) and each step of 2 kW columns widens a row with LoadBf16Pairs, one integer op
// per kW values instead of two: the FMAs of lane l take columns 2l, then 2l + 1, as a float tile
// over rows converted in pair order (Bf16ToF32PairOrder) does with the same x.
template <int MR, int NT, typename Row, bool kPairX = false>
inline void Tile(const Row* rows, const float* x, int64_t ldx, int64_t cols, float* y,
                 int64_t ldy) {
  F acc[MR][NT];  // constant indices only (unrolled.h), so that acc stays in registers
  Unrolled<MR>([&](auto r) { Unrolled<NT>([&](auto t) { acc[r][t] = V::Zero(); }); });
  int64_t c = 0;
  if constexpr (kPairX) {
    static_assert(std::is_same_v<Row, const uint16_t*>);
    for (; c + kPairStep <= cols; c += kPairStep) {
      F x_even[NT];
      F x_odd[NT];
      Unrolled<NT>([&](auto t) {
        x_even[t] = V::Load(x + t * ldx + c);
        x_odd[t] = V::Load(x + t * ldx + c + kW);
      });
      Unrolled<MR>([&](auto r) {
        // One token (decode): each row 512 B ahead, as the hardware prefetchers ramp up too
        // slowly on 4 KB rows (bench-v2-lite bf16 decode, AVX2 EPYC VM, 4 alternating runs:
        // 16.2-18.1 -> 17.0-18.7 tok/s; 1 KB ahead was no better).
        if constexpr (NT == 1) {
          _mm_prefetch(reinterpret_cast<const char*>(rows[r] + c + 256), _MM_HINT_T0);
        }
        F even;
        F odd;
        V::LoadBf16Pairs(rows[r] + c, &even, &odd);
        Unrolled<NT>([&](auto t) {
          acc[r][t] = V::Fma(even, x_even[t], acc[r][t]);
          acc[r][t] = V::Fma(odd, x_odd[t], acc[r][t]);
        });
      });
    }
  }
  for (; c + kW <= cols; c += kW) {
    F xv[NT];
    Unrolled<NT>([&](auto t) { xv[t] = V::Load(x + t * ldx + c); });
    Unrolled<MR>([&](auto r) {
      const F wv = LoadW(rows[r] + c);
      Unrolled<NT>([&](auto t) { acc[r][t] = V::Fma(wv, xv[t], acc[r][t]); });
    });
  }
  AddTail<MR, NT>(rows, x, ldx, c, cols, acc);
  Unrolled<MR>(
      [&](auto r) { Unrolled<NT>([&](auto t) { y[t * ldy + r] = V::Reduce(acc[r][t]); }); });
}

// Tile for FP8 rows: the same products in the same order (each row's accumulator takes its
// columns kW at a time, then the tail), but a block of scale columns at a time, so each row's
// scale is broadcast once per block instead of being located and loaded for every vector, and
// with LoadF8Div256NotNan: the vectors' bytes are checked for NaN once per row afterwards (from
// L1), a row holding one gives NaN for every token as its products would. A single token also
// prefetches the next row tile alongside (the 2 KB rows are too short for the hardware
// prefetchers). BM_MatMul 262,144 x 2,048 FP8 weights, one token, 3 alternating runs (AMD EPYC
// Zen 5 VM, 2026-12-06), GB/s: avx512 2 threads 18.9-22.4 -> 31.8-34.7 (1 thread 11.0-11.4 ->
// 15.2-17.9), avx2 2 threads 11.8-14.1 -> 19.3-19.9; the prefetch alone 26.1-26.7 -> 33-37.
template <int MR, int NT>
inline void TileF8(const F8Row* rows, const float* x, int64_t ldx, int64_t cols, float* y,
                   int64_t ldy) {
  F acc[MR][NT];
  Unrolled<MR>([&](auto r) { Unrolled<NT>([&](auto t) { acc[r][t] = V::Zero(); }); });
  const int shift = rows[0].block_shift;
  const int64_t vector_end = cols / kW * kW;
  for (int64_t b0 = 0; b0 < vector_end; b0 += int64_t{1} << shift) {
    const int64_t end = std::min(vector_end, b0 + (int64_t{1} << shift));
    F scale[MR];
    Unrolled<MR>([&](auto r) { scale[r] = V::Set1(rows[r].scales256[b0 >> shift]); });
    for (int64_t c = b0; c < end; c += kW) {
      F xv[NT];
      Unrolled<NT>([&](auto t) { xv[t] = V::Load(x + t * ldx + c); });
      Unrolled<MR>([&](auto r) {
        if constexpr (NT == 1) {  // the next row tile's line at this column (rows are adjacent)
          if ((c & 63) == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(rows[r].values + MR * cols + c),
                         _MM_HINT_T0);
          }
        }
        const F wv = V::Mul(V::LoadF8Div256NotNan(rows[r].values + c), scale[r]);
        Unrolled<NT>([&](auto t) { acc[r][t] = V::Fma(wv, xv[t], acc[r][t]); });
      });
    }
  }
  AddTail<MR, NT>(rows, x, ldx, vector_end, cols, acc);
  Unrolled<MR>([&](auto r) {
    const bool nan = V::AnyF8Nan(rows[r].values, vector_end);
    Unrolled<NT>([&](auto t) {
      y[t * ldy + r] = nan ? std::numeric_limits<float>::quiet_NaN() : V::Reduce(acc[r][t]);
    });
  });
}

// NT tokens against all `n_rows` rows, in row tiles of V::kMatRows.
template <int NT, bool kPairX, typename Row>
inline void TokenTile(const Row* rows, int64_t n_rows, const float* x, int64_t cols, float* y,
                      int64_t ldy) {
  int64_t r = 0;
  if constexpr (std::is_same_v<Row, F8Row>) {
    for (; r + V::kMatRows <= n_rows; r += V::kMatRows)
      TileF8<V::kMatRows, NT>(rows + r, x, cols, cols, y + r, ldy);
    for (; r < n_rows; ++r) TileF8<1, NT>(rows + r, x, cols, cols, y + r, ldy);
  } else {
    for (; r + V::kMatRows <= n_rows; r += V::kMatRows)
      Tile<V::kMatRows, NT, Row, kPairX>(rows + r, x, cols, cols, y + r, ldy);
    for (; r < n_rows; ++r) Tile<1, NT, Row, kPairX>(rows + r, x, cols, cols, y + r, ldy);
  }
}

// Rows per block of the row range (and per decoded block when the weights must be converted to
// f32 first: fp8, or f16 / bf16 with many tokens, where converting once beats converting in
// registers for every token tile). 64 f32 rows of 2048 columns (512 KB) stay in L2.
constexpr int64_t kDecodeRows = 64;

// Columns [c0, c1) of Tile<MR, NT> over float rows: the accumulators start from `saved` (zero
// where c0 == 0) and go back there, except after the last block of vectors (c1 = cols rounded
// down to kW), which adds the tail and writes y as Tile does. Tile's operations, so the same
// outputs bitwise.
template <int MR, int NT>
inline void FloatTileColumns(const float* const* rows, const float* x, int64_t ldx, int64_t c0,
                             int64_t c1, int64_t cols, F* saved, float* y, int64_t ldy) {
  F acc[MR][NT];
  Unrolled<MR>([&](auto r) {
    Unrolled<NT>([&](auto t) { acc[r][t] = c0 == 0 ? V::Zero() : saved[r * NT + t]; });
  });
  int64_t c = c0;
  for (; c + kW <= c1; c += kW) {
    F wv[MR];
    Unrolled<MR>([&](auto r) { wv[r] = V::Load(rows[r] + c); });
    Unrolled<NT>([&](auto t) {
      const F xv = V::Load(x + t * ldx + c);
      Unrolled<MR>([&](auto r) { acc[r][t] = V::Fma(wv[r], xv, acc[r][t]); });
    });
  }
  if (c1 < cols / kW * kW) {
    Unrolled<MR>([&](auto r) { Unrolled<NT>([&](auto t) { saved[r * NT + t] = acc[r][t]; }); });
    return;
  }
  AddTail<MR, NT>(rows, x, ldx, c, cols, acc);
  Unrolled<MR>(
      [&](auto r) { Unrolled<NT>([&](auto t) { y[t * ldy + r] = V::Reduce(acc[r][t]); }); });
}

// Float rows (at most kDecodeRows) against more than one token tile (f32 weights, and the rows
// that f16, bf16 and FP8 weights are converted to for more than kFusedMaxTokens tokens): tiles of
// kRows rows x kTokens tokens (V::kFloatTile*, wider than Tile's) over blocks of
// kFloatColumnBlock columns, all row tiles per block, so that the token tile's block of x stays
// in L1 while the row tiles pass (before, each tile streamed 4 rows of 8 KB past 32 KB of x).
// BM_MatMul 2,048 rows, 3 alternating runs (AMD EPYC Zen 5 VM, 2026-12-06), GFLOP/s:
// avx512_f32 48 tokens one core 110-118 -> 144-152, 512 tokens 134-140 -> 148-154, two cores
// 223-272 -> 271-303; avx512_fp8 512 tokens two cores 235-251 -> 258-268.
constexpr int64_t kFloatColumnBlock = 512;
template <int kRows, int kTokens>
void FloatRowsInColumnBlocks(const float* const* rows, int64_t n_rows, const float* x,
                             int64_t n_tokens, int64_t cols, float* y, int64_t ldy) {
  F saved[kDecodeRows * kTokens];
  const int64_t vector_end = cols / kW * kW;
  ForEachTokenTile<kTokens>(n_tokens, [&](auto nt, int64_t t) {
    constexpr int kTileTokens = decltype(nt)::value;
    const float* xt = x + t * cols;
    float* yt = y + t * ldy;
    int64_t c0 = 0;
    do {
      const int64_t c1 = std::min(vector_end, c0 + kFloatColumnBlock);
      int64_t r = 0;
      for (; r + kRows <= n_rows; r += kRows) {
        FloatTileColumns<kRows, kTileTokens>(rows + r, xt, cols, c0, c1, cols,
                                             saved + r * kTileTokens, yt + r, ldy);
      }
      for (; r < n_rows; ++r) {
        FloatTileColumns<1, kTileTokens>(rows + r, xt, cols, c0, c1, cols, saved + r * kTileTokens,
                                         yt + r, ldy);
      }
      c0 = c1;
    } while (c0 < vector_end);
  });
}

// All tokens against `n_rows` rows. Token tiles (of up to V::kMatTokens) are the outer loop, so a
// tile of activations stays in L1 while the rows (already in L2) stream past it; x is read once
// per call. Float rows against several token tiles go in column blocks.
template <bool kPairX = false, typename Row>
void RowsOfType(const Row* rows, int64_t n_rows, const float* x, int64_t n_tokens, int64_t cols,
                float* y, int64_t ldy) {
  if constexpr (std::is_same_v<Row, const float*> && !kPairX && V::kFloatTileTokens > 0) {
    if (n_tokens > V::kMatTokens && n_rows <= kDecodeRows) {
      FloatRowsInColumnBlocks<V::kFloatTileRows, V::kFloatTileTokens>(rows, n_rows, x, n_tokens,
                                                                      cols, y, ldy);
      return;
    }
  }
  ForEachTokenTile<V::kMatTokens>(n_tokens, [&](auto nt, int64_t t) {
    TokenTile<decltype(nt)::value, kPairX>(rows, n_rows, x + t * cols, cols, y + t * ldy, ldy);
  });
}

void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(out + i, V::LoadBf16(in + i));
  for (; i < n; ++i) out[i] = BF16ToF32(in[i]);
}

// float16 values widened to float32 exactly (the scalar F16ToF32 for the tail).
void F16ToF32Row(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(out + i, V::LoadF16(in + i));
  for (; i < n; ++i) out[i] = F16ToF32(in[i]);
}

// A bf16 row widened to float32 in pair order: per step of 2 kW values the kW even-indexed ones,
// then the kW odd-indexed ones (as LoadBf16Pairs splits them); a shorter tail as is.
void Bf16ToF32PairOrder(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kPairStep <= n; i += kPairStep) {
    F even;
    F odd;
    V::LoadBf16Pairs(in + i, &even, &odd);
    V::Store(out + i, even);
    V::Store(out + i + kW, odd);
  }
  for (; i < n; ++i) out[i] = BF16ToF32(in[i]);
}

}  // namespace mlarun::SIMD_NAMESPACE

#include "kernels/cpu/simd_packed_bf16_impl.h"

namespace mlarun::SIMD_NAMESPACE {

constexpr int64_t kFusedMaxTokens = 8;

// Whether FP8 rows can be read as F8Rows: every vector within one block of scales.
inline bool F8RowsFit(const WeightMatrix& w) {
  return std::has_single_bit(static_cast<unsigned>(w.block_cols)) && w.block_cols % kW == 0;
}

// Rows [r0, r0 + n) of FP8 weights as F8Rows; `scales256` holds their row blocks' scales * 256.
inline void F8Rows(const WeightMatrix& w, int64_t r0, int64_t n, std::vector<float>& scales256,
                   F8Row* rows) {
  const int64_t col_blocks = (w.cols + w.block_cols - 1) / w.block_cols;
  const int64_t rb0 = r0 / w.block_rows;
  const int64_t rb1 = (r0 + n - 1) / w.block_rows;
  ResizeScratch(&scales256, static_cast<size_t>((rb1 - rb0 + 1) * col_blocks));
  for (int64_t i = 0; i < (rb1 - rb0 + 1) * col_blocks; ++i)
    scales256[static_cast<size_t>(i)] = w.block_scale[rb0 * col_blocks + i] * 256.0f;
  const int shift = std::countr_zero(static_cast<unsigned>(w.block_cols));
  for (int64_t r = 0; r < n; ++r) {
    rows[r] = {static_cast<const uint8_t*>(w.data) + (r0 + r) * w.cols,
               scales256.data() + ((r0 + r) / w.block_rows - rb0) * col_blocks, shift};
  }
}

// Row r of FP8 weights as float32, bitwise WeightMatrix::DecodeRow (vectors as F8Row gives them).
void F8ToF32Row(const WeightMatrix& w, int64_t r, float* out) {
  const auto* src = static_cast<const uint8_t*>(w.data) + r * w.cols;
  const float* scales =
      w.block_scale + (r / w.block_rows) * ((w.cols + w.block_cols - 1) / w.block_cols);
  for (int64_t b0 = 0; b0 < w.cols; b0 += w.block_cols) {
    const float scale = scales[b0 / w.block_cols];
    const F scale256 = V::Set1(scale * 256.0f);
    const int64_t end = std::min(w.cols, b0 + w.block_cols);
    int64_t c = b0;
    for (; c + kW <= end; c += kW) V::Store(out + c, V::Mul(V::LoadF8Div256(src + c), scale256));
    for (; c < end; ++c) out[c] = F8E4M3ToF32(src[c]) * scale;
  }
}

// decode_row: row-major bf16, f16 and FP8 rows widened in vectors; f32 rows (a copy) and packed
// layouts by DecodeRow.
void DecodeRowV(const WeightMatrix& w, int64_t r, float* out) {
  const bool row_major = w.layout16 == Layout16::kRowMajor && w.row_stride == 0;
  const int64_t cols = w.cols;
  if (w.dtype == DType::kF8E4M3 && row_major) {
    F8ToF32Row(w, r, out);
  } else if (w.dtype == DType::kBF16 && row_major) {
    Bf16ToF32(static_cast<const uint16_t*>(w.data) + r * cols, out, cols);
  } else if (w.dtype == DType::kF16 && row_major) {
    F16ToF32Row(static_cast<const uint16_t*>(w.data) + r * cols, out, cols);
  } else {
    w.DecodeRow(r, out);
  }
}

// kPairX (KernelTable::matmul_rows_pair_x, bf16 row-major weights only): x is in pair form; up
// to kFusedMaxTokens tokens widen the rows in registers (Tile with kPairX), more convert each
// block of rows once, in pair order, into float32; both give each output the same FMA sequence.
template <bool kPairX>
void MatMulRowsWith(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                    int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  if constexpr (V::kPackedBf16MatMul) {
    if (w.dtype == DType::kBF16 && w.layout16 == Layout16::kPacked16) {
      MatMulRowsPacked16<uint32_t>(w, row_begin, row_end, x, n_tokens, y, ldy);
      return;
    }
    if (w.dtype == DType::kF16 && w.layout16 == Layout16::kPacked16) {
      MatMulRowsPacked16<F16PairWord>(w, row_begin, row_end, x, n_tokens, y, ldy);
      return;
    }
  }
  const bool bf16_row_major = w.dtype == DType::kBF16 && w.layout16 == Layout16::kRowMajor;
  // Packed FP8 (the AVX512-BF16 kernel's layout) is decoded row by row below, by DecodeRow.
  const bool fp8_row_major = w.dtype == DType::kF8E4M3 && w.layout16 == Layout16::kRowMajor;
  const bool fused = n_tokens <= kFusedMaxTokens;
  const bool fp8_fused = fp8_row_major && F8RowsFit(w) && fused;
  if (w.dtype == DType::kF32 || ((bf16_row_major || w.dtype == DType::kF16) && fused) ||
      fp8_fused) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kDecodeRows) {
      const int64_t n = std::min(kDecodeRows, row_end - r0);
      if (w.dtype == DType::kF32) {
        const float* rows[kDecodeRows];
        for (int64_t r = 0; r < n; ++r) {
          rows[r] = static_cast<const float*>(w.data) +
                    (r0 + r) * (w.row_stride > 0 ? w.row_stride : cols);
        }
        RowsOfType(rows, n, x, n_tokens, cols, y + (r0 - row_begin), ldy);
      } else if (w.dtype == DType::kF16) {
        // Widened in registers by F16C: the FMAs see the values F16ToF32Row gives the
        // converted path below, in the same order.
        const F16Weight* rows[kDecodeRows];
        for (int64_t r = 0; r < n; ++r)
          rows[r] = static_cast<const F16Weight*>(w.data) + (r0 + r) * cols;
        RowsOfType(rows, n, x, n_tokens, cols, y + (r0 - row_begin), ldy);
      } else if (w.dtype == DType::kF8E4M3) {
        // Widened and scaled in registers: the values F8ToF32Row gives the converted path.
        thread_local std::vector<float> scales256;
        F8Row rows[kDecodeRows];
        F8Rows(w, r0, n, scales256, rows);
        RowsOfType(rows, n, x, n_tokens, cols, y + (r0 - row_begin), ldy);
      } else {
        const uint16_t* rows[kDecodeRows];
        for (int64_t r = 0; r < n; ++r)
          rows[r] = static_cast<const uint16_t*>(w.data) + (r0 + r) * cols;
        RowsOfType<kPairX>(rows, n, x, n_tokens, cols, y + (r0 - row_begin), ldy);
      }
    }
    return;
  }
  thread_local std::vector<float> buffer;
  ResizeScratch(&buffer, static_cast<size_t>(kDecodeRows * cols));
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kDecodeRows) {
    const int64_t n = std::min(kDecodeRows, row_end - r0);
    const float* rows[kDecodeRows];
    for (int64_t r = 0; r < n; ++r) {
      float* dst = buffer.data() + r * cols;
      if (bf16_row_major) {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + (r0 + r) * cols;
        if constexpr (kPairX) {
          Bf16ToF32PairOrder(src, dst, cols);
        } else {
          Bf16ToF32(src, dst, cols);
        }
      } else if (w.dtype == DType::kF16) {
        F16ToF32Row(static_cast<const uint16_t*>(w.data) + (r0 + r) * cols, dst, cols);
      } else if (fp8_row_major) {
        F8ToF32Row(w, r0 + r, dst);
      } else {
        w.DecodeRow(r0 + r, dst);
      }
      rows[r] = dst;
    }
    RowsOfType(rows, n, x, n_tokens, cols, y + (r0 - row_begin), ldy);
  }
}

void MatMulRows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                int64_t n_tokens, float* y, int64_t ldy) {
  MatMulRowsWith<false>(w, row_begin, row_end, x, n_tokens, y, ldy);
}

void MatMulRowsPairX(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                     int64_t n_tokens, float* y, int64_t ldy) {
  MatMulRowsWith<true>(w, row_begin, row_end, x, n_tokens, y, ldy);
}

}  // namespace mlarun::SIMD_NAMESPACE

#include "kernels/cpu/simd_packed_q8_impl.h"

namespace mlarun::SIMD_NAMESPACE {

// GEMM C = A B, B row-major [k, n] ("outer product" form: a broadcast element of A times a
// vector of a row of B), for the tiled attention of prefill. A tile of MR rows x NV vectors keeps
// its accumulators in registers over all of k; each C element is one FMA chain over k in order,
// as in the scalar reference (bitwise equal). No horizontal reductions, unlike the row-dot
// MatMul kernels, which suit weight matrices stored [out, in] instead.
template <int MR, int NV, bool kTail>
inline void GemmTile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                     int64_t ldc, bool accumulate, int last_lanes) {
  F acc[MR][NV];
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) {
      const bool tail = kTail && v == NV - 1;
      acc[i][v] = !accumulate ? V::Zero()
                  : tail      ? V::LoadTail(c + i * ldc + static_cast<int64_t>(v) * kW, last_lanes)
                              : V::Load(c + i * ldc + static_cast<int64_t>(v) * kW);
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* b_row = b + kk * ldb;
    F bv[NV];
    for (int v = 0; v < NV; ++v) {
      if (kTail && v == NV - 1) {
        bv[v] = V::LoadTail(b_row + static_cast<int64_t>(v) * kW, last_lanes);
      } else {
        bv[v] = V::Load(b_row + static_cast<int64_t>(v) * kW);
      }
    }
    for (int i = 0; i < MR; ++i) {
      const F av = V::Set1(a[i * lda + kk]);
      for (int v = 0; v < NV; ++v) acc[i][v] = V::Fma(av, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int v = 0; v < NV; ++v) {
      if (kTail && v == NV - 1) {
        V::StoreTail(c + i * ldc + static_cast<int64_t>(v) * kW, acc[i][v], last_lanes);
      } else {
        V::Store(c + i * ldc + static_cast<int64_t>(v) * kW, acc[i][v]);
      }
    }
  }
}

// Rows [0, m) of one column tile in row tiles of kGemmRows, then 4, 2, 1.
template <int NV, bool kTail>
inline void GemmColumnTile(int64_t m, int64_t k, const float* a, int64_t lda, const float* b,
                           int64_t ldb, float* c, int64_t ldc, bool accumulate, int last_lanes) {
  constexpr int kMR = V::kGemmRows;
  int64_t i = 0;
  for (; i + kMR <= m; i += kMR) {
    GemmTile<kMR, NV, kTail>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate, last_lanes);
  }
  if constexpr (kMR > 4) {
    for (; i + 4 <= m; i += 4) {
      GemmTile<4, NV, kTail>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate, last_lanes);
    }
  }
  for (; i + 2 <= m; i += 2)
    GemmTile<2, NV, kTail>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate, last_lanes);
  for (; i < m; ++i)
    GemmTile<1, NV, kTail>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, accumulate, last_lanes);
}

// The k dimension runs in chunks whose rows of B (up to 512 floats each) stay in L2; between
// chunks a tile's accumulators go through C unchanged, so every element is still one FMA chain.
// Each column tile of B (k chunk x 2 vectors) is first copied to a contiguous panel: rows of B a
// multiple of 1 KB apart (4,608 cached positions: 18 KB) map to a handful of L1 sets, and the
// panel, reused by every row tile, was evicted between k steps (measured: 108 -> 128 GFLOP/s
// for 128 queries x 4,608 positions). With few row tiles the copy does not pay off.
void Gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  constexpr int64_t kChunk = 512;
  constexpr int64_t kPanel = int64_t{2} * kW;
  const bool pack = m >= int64_t{4} * V::kGemmRows;
  thread_local std::vector<float> panel;
  if (pack) ResizeScratch(&panel, static_cast<size_t>(kChunk * kPanel));
  for (int64_t k0 = 0; k0 < k || k0 == 0; k0 += kChunk) {
    const int64_t kc = std::min(kChunk, k - k0);
    const bool accumulate = k0 > 0;
    const float* a_chunk = a + k0;
    for (int64_t j = 0; j < n; j += kPanel) {
      const int64_t width = std::min(kPanel, n - j);
      const float* tile_b = b + k0 * ldb + j;
      int64_t tile_ldb = ldb;
      if (pack) {
        for (int64_t kk = 0; kk < kc; ++kk)
          std::copy_n(tile_b + kk * ldb, width, panel.data() + kk * kPanel);
        tile_b = panel.data();
        tile_ldb = kPanel;
      }
      if (width == kPanel) {
        GemmColumnTile<2, false>(m, kc, a_chunk, lda, tile_b, tile_ldb, c + j, ldc, accumulate, kW);
      } else if (width > kW) {
        GemmColumnTile<2, true>(m, kc, a_chunk, lda, tile_b, tile_ldb, c + j, ldc, accumulate,
                                static_cast<int>(width - kW));
      } else if (width == kW) {
        GemmColumnTile<1, false>(m, kc, a_chunk, lda, tile_b, tile_ldb, c + j, ldc, accumulate, kW);
      } else {
        GemmColumnTile<1, true>(m, kc, a_chunk, lda, tile_b, tile_ldb, c + j, ldc, accumulate,
                                static_cast<int>(width));
      }
    }
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  F acc = V::Zero();
  int64_t i = 0;
  for (; i + kW <= n; i += kW) acc = V::Fma(V::Load(a + i), V::Load(b + i), acc);
  if (i < n) {
    acc = V::Fma(V::LoadTail(a + i, static_cast<int>(n - i)),
                 V::LoadTail(b + i, static_cast<int>(n - i)), acc);
  }
  return V::Reduce(acc);
}

float StreamSum(const float* x, int64_t n) {
  // Four independent accumulators, so loads are not serialised behind one add chain.
  F s0 = V::Zero(), s1 = V::Zero(), s2 = V::Zero(), s3 = V::Zero();
  const F one = V::Set1(1.0f);
  constexpr int64_t kLanes = kW;
  int64_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    s0 = V::Fma(V::Load(x + i), one, s0);
    s1 = V::Fma(V::Load(x + i + kLanes), one, s1);
    s2 = V::Fma(V::Load(x + i + 2 * kLanes), one, s2);
    s3 = V::Fma(V::Load(x + i + 3 * kLanes), one, s3);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i];
  return V::Reduce(s0) + V::Reduce(s1) + V::Reduce(s2) + V::Reduce(s3) + tail;
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const F av = V::Set1(a);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(y + i, V::Fma(av, V::Load(x + i), V::Load(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

// exp(x) = 2^n e^f with n = round(x log2(e)) and f = x - n ln2 in [-ln2/2, ln2/2], the
// reduction done with ln2 split into a short high part and a low part (Cody & Waite 1980) so f
// keeps full precision; e^f by its degree-7 Taylor polynomial (error < 2e-7 relative). Inputs are
// clamped to [-87, 88]; NaN stays NaN (the x86 min / max return their second operand when either
// is NaN, so x goes second: a NaN score or gate shows in the output instead of becoming e^-87).
inline F ExpV(F x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187e-06f;
  x = V::Min(V::Set1(88.0f), V::Max(V::Set1(-87.0f), x));
  const F n = V::Round(V::Mul(x, V::Set1(kLog2e)));
  F f = V::Fma(n, V::Set1(-kLn2Hi), x);
  f = V::Fma(n, V::Set1(-kLn2Lo), f);
  F p = V::Set1(1.0f / 5040.0f);
  p = V::Fma(p, f, V::Set1(1.0f / 720.0f));
  p = V::Fma(p, f, V::Set1(1.0f / 120.0f));
  p = V::Fma(p, f, V::Set1(1.0f / 24.0f));
  p = V::Fma(p, f, V::Set1(1.0f / 6.0f));
  p = V::Fma(p, f, V::Set1(0.5f));
  p = V::Fma(p, f, V::Set1(1.0f));
  p = V::Fma(p, f, V::Set1(1.0f));
  return V::Pow2Times(p, n);
}

void Exp(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(x + i, ExpV(V::Load(x + i)));
  if (i < n) {
    alignas(64) float tail[kW] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = x[j];
    V::Store(tail, ExpV(V::Load(tail)));
    for (int64_t j = i; j < n; ++j) x[j] = tail[j - i];
  }
}

// silu(g) u = g / (1 + exp(-g)) u, lane-wise.
inline F SiluTimes(F g, F u) {
  return V::Mul(V::Div(g, V::Add(V::Set1(1.0f), ExpV(V::Sub(V::Zero(), g)))), u);
}

void SiluMulV(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(gate + i, SiluTimes(V::Load(gate + i), V::Load(up + i)));
  if (i < n) {
    const int tail = static_cast<int>(n - i);
    V::StoreTail(gate + i, SiluTimes(V::LoadTail(gate + i, tail), V::LoadTail(up + i, tail)), tail);
  }
}

float ScaleBiasMax(float* s, float scale, const float* bias, int64_t n) {
  const F sv = V::Set1(scale);
  F m = V::Set1(-INFINITY);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const F v = V::Add(V::Mul(V::Load(s + i), sv), V::Load(bias + i));
    V::Store(s + i, v);
    m = V::Max(m, v);
  }
  alignas(64) float lanes[kW];
  V::Store(lanes, m);
  float max_value = -INFINITY;
  for (float l : lanes) max_value = std::max(max_value, l);
  for (; i < n; ++i) {
    s[i] = s[i] * scale + bias[i];
    max_value = std::max(max_value, s[i]);
  }
  return max_value;
}

float ExpShiftSum(float* x, float shift, int64_t n) {
  const F shift_v = V::Set1(shift);
  F sum = V::Zero();
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const F v = ExpV(V::Sub(V::Load(x + i), shift_v));
    V::Store(x + i, v);
    sum = V::Add(sum, v);
  }
  float total = V::Reduce(sum);
  if (i < n) {
    alignas(64) float tail[kW] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = x[j] - shift;
    V::Store(tail, ExpV(V::Load(tail)));
    for (int64_t j = i; j < n; ++j) {
      x[j] = tail[j - i];
      total += x[j];
    }
  }
  return total;
}

}  // namespace mlarun::SIMD_NAMESPACE

#include "kernels/cpu/simd_attention_impl.h"

namespace mlarun::SIMD_NAMESPACE {

void Scale(float a, float* x, int64_t n) {
  const F av = V::Set1(a);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) V::Store(x + i, V::Mul(av, V::Load(x + i)));
  for (; i < n; ++i) x[i] *= a;
}

}  // namespace mlarun::SIMD_NAMESPACE

#include "kernels/cpu/simd_rowops_impl.h"

namespace mlarun::SIMD_NAMESPACE {

void QuantizeActivationRowQ8V(const float* x, int64_t cols, int8_t* q, float* scales,
                              int32_t* offsets) {
  V::QuantizeBlocksQ8(
      x, cols, q, [&](int64_t b, float scale) { return scales[b] = scale; }, offsets);
}

// QuantizeWeightRowQ8 (quant.h): float16 scales, values quantised with the rounded scale. Per
// chunk of kW blocks: their maxima, then all kW scales rounded to float16 and back at once
// (V::RoundToF16, to nearest even like F32ToF16), then the values; one block at a time, the
// division and the scalar float16 round trip made a dependency chain per 32 values. (The block
// maxima QuantizeBlocksQ8 takes again only feed its scale argument, ignored here: the compiler
// drops them, as the object code shows.)
void QuantizeWeightRowQ8V(const float* w, int64_t cols, int8_t* q, uint16_t* scales) {
  const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
  alignas(64) float raw[kW];
  alignas(64) float rounded[kW];
  for (int64_t b0 = 0; b0 < n_blocks; b0 += kW) {
    const int chunk = static_cast<int>(std::min<int64_t>(kW, n_blocks - b0));
    for (int j = 0; j < chunk; ++j) {
      const int64_t begin = (b0 + j) * kQ8Block;
      const int64_t n = std::clamp<int64_t>(cols - begin, 0, kQ8Block);
      F m = V::Zero();
      for (int64_t i = 0; i < n; i += kW) {
        const int left = static_cast<int>(std::min<int64_t>(kW, n - i));
        m = V::Max(m,
                   V::Abs(left == kW ? V::Load(w + begin + i) : V::LoadTail(w + begin + i, left)));
      }
      raw[j] = MaxLane(m) / 127.0f;
    }
    V::RoundToF16(raw, chunk, scales + b0, rounded);
    const int64_t begin = b0 * kQ8Block;
    V::QuantizeBlocksQ8(
        w + begin, std::min<int64_t>(cols - begin, int64_t{chunk} * kQ8Block), q + begin,
        [&](int64_t b, float /*raw scale*/) { return rounded[b]; }, nullptr);
  }
}

// The table's split_q8_row: V::SplitQ8Row where the Q8 tiles read the sign split.
template <typename Traits>
constexpr SplitQ8RowFn SplitQ8RowOf() {
  if constexpr (Traits::kQ8SignSplit) {
    return Traits::SplitQ8Row;
  } else {
    return nullptr;
  }
}

const KernelTable kTable = {.isa = V::kIsa,
                            .matmul_rows = MatMulRows,
                            .matmul_rows_q8 = MatMulRowsQ8,
                            .matmul_rows_pair_x = V::kPairXMatMul ? MatMulRowsPairX : nullptr,
                            .quantize_row_q8 = QuantizeActivationRowQ8V,
                            .split_q8_row = SplitQ8RowOf<V>(),
                            .quantize_weight_row_q8 = QuantizeWeightRowQ8V,
                            .quantize_group_i8 = V::QuantizeGroupI8,
                            .gemm = Gemm,
                            .dot = Dot,
                            .stream_sum = StreamSum,
                            .axpy = Axpy,
                            .scale = Scale,
                            .exp = Exp,
                            .silu_mul = SiluMulV,
                            .rms_norm = RmsNormV,
                            .rope = RopeHeadsV,
                            .softmax = SoftmaxV,
                            .top_k = TopKV,
                            .round_to_bf16 = V::RoundToBf16,
                            .decode_row = DecodeRowV,
                            .scale_bias_max = ScaleBiasMax,
                            .exp_shift_sum = ExpShiftSum,
                            .pv_accumulate = PvAccumulate,
                            .bf16_to_f32 = Bf16ToF32,
                            .bf16_pair_form = Bf16PairForm,
                            .dot_rows_bf16 = DotRowsBf16,
                            .pv_accumulate_bf16 = PvAccumulateBf16,
                            .packed_bf16_fastest = V::kPackedBf16MatMul};

}  // namespace mlarun::SIMD_NAMESPACE
