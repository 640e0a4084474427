// AVX-512 (F/BW/VL/DQ) kernels: 16-lane float vectors, masked tails. Compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma; only called when the CPU supports them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/cpu/blocks_simd.h"
#include "kernels/cpu/f8_nan_avx512.h"
#include "kernels/isa.h"
#include "kernels/packed_bf16.h"
#include "kernels/quant.h"

namespace mlarun::avx512 {

bool AnyF8Nan(const uint8_t* p, int64_t n) {
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  __m512i most = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    most = _mm512_max_epu8(most, _mm512_and_si512(_mm512_loadu_si512(p + i), low7));
  }
  if (i < n) {
    const __mmask64 tail = (~uint64_t{0}) >> (64 - (n - i));
    most = _mm512_max_epu8(most, _mm512_and_si512(_mm512_maskz_loadu_epi8(tail, p + i), low7));
  }
  return _mm512_cmpeq_epi8_mask(most, low7) != 0;
}

struct V {
  using F = __m512;
  static constexpr int kWidth = 16;
  static constexpr Isa kIsa = Isa::kAvx512;
  static F Zero() { return _mm512_setzero_ps(); }
  static F Set1(float a) { return _mm512_set1_ps(a); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadTail(const float* p, int n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
  }
  static F LoadBf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F LoadBf16Tail(const uint16_t* p, int n) {
    const __m256i h = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1u), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  // 2 kWidth bf16 values as pairs: lane i holds values 2i (low half) and 2i + 1 (high half), as
  // floats exactly lane << 16 and lane & 0xffff0000 (one integer op per 16 values).
  static void LoadBf16Pairs(const uint16_t* p, F* even, F* odd) {
    const __m512i v = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(-65536)));
  }
  // [p0 p0 p1 p1 ... p7 p7] from 8 floats, and x with the lanes of each pair swapped.
  static F LoadPairDup(const float* p) {
    const __m512i index = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm512_permutexvar_ps(index, _mm512_castps256_ps512(_mm256_loadu_ps(p)));
  }
  static F SwapPairs(F x) { return _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)); }
  // Bit l set where lane l of a equals lane l of b (ordered: NaN equals nothing).
  static uint32_t EqualBits(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  // sum_i x_i^2 in double (squares of floats are exact there): four 8-lane accumulators per
  // 32 values (four FMA chains), then the tail in order.
  static double SumSquaresF64(const float* x, int64_t n) {
    __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
                      _mm512_setzero_pd()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int64_t half = 0; half < 2; ++half) {
        const __m512 v = _mm512_loadu_ps(x + i + 16 * half);
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
        acc[2 * half] = _mm512_fmadd_pd(lo, lo, acc[2 * half]);
        acc[2 * half + 1] = _mm512_fmadd_pd(hi, hi, acc[2 * half + 1]);
      }
    }
    alignas(64) double lanes[8];
    _mm512_store_pd(lanes,
                    _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
    double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                 ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    return sum;
  }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Div(F a, F b) { return _mm512_div_ps(a, b); }
  // F32ToBF16 (core/dtype.h) of 16 floats' bits: each lane's high half is its bf16 value (round
  // to nearest even, NaN kept quiet), the low half is left over.
  static __m512i RoundedBf16High(__m512i bits) {
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(bits, _mm512_set1_epi32(0x400000));
    return _mm512_mask_blend_epi32(nan, rounded, quiet);
  }
  // F32ToBF16 (core/dtype.h) on 16 lanes at a time.
  static void RoundToBf16(const float* x, int64_t n, uint16_t* out) {
    for (int64_t i = 0; i < n; i += 16) {
      const int left = static_cast<int>(std::min<int64_t>(16, n - i));
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
      const __m512i result = RoundedBf16High(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i)));
      _mm512_mask_cvtepi32_storeu_epi16(out + i, m, _mm512_srli_epi32(result, 16));
    }
  }
  static F Min(F a, F b) { return _mm512_min_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static F Round(F a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F Pow2Times(F p, F n) { return _mm512_scalef_ps(p, n); }  // p * 2^n
  static float Reduce(F a) { return _mm512_reduce_add_ps(a); }
  static void Store(float* p, F a) { _mm512_storeu_ps(p, a); }
  static void StoreTail(float* p, F a, int n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), a);
  }
  static constexpr int kMatRows = 4;  // MatMul tile: 4 rows x 4 tokens
  static constexpr int kMatTokens = 4;
  // Float rows in column blocks (simd_impl.h): 4 rows x 6 tokens, 24 accumulators (4 x 4 was
  // 3-10% slower, 2 x 8, 3 x 8 and 2 x 12 30-70% slower).
  static constexpr int kFloatTileRows = 4;
  static constexpr int kFloatTileTokens = 6;
  static constexpr int kGemmRows = 12;  // GEMM tile: 12 rows x 2 vectors of accumulators
  // Attention tiles (32 registers): scores 4 rows x 4 heads, P V 16 heads.
  static constexpr int kScoreRows = 4;
  static constexpr int kScoreHeads = 4;
  static constexpr int kPvHeads = 16;
  static constexpr int kPvSlices = 1;
  static constexpr int kPvPairHeads = 0;  // no pair-form P V (see simd_impl.h)
  static constexpr bool kHasDeinterleave = false;
  static constexpr bool kPairXMatMul = false;
  // bf16 matrices packed at load (`--load copy`) are read by MatMulRowsPacked16: f32 FMAs on
  // words widened exactly in registers. On the Intel Xeon VM of docs/performance.md, where
  // vdpbf16ps does half the multiply-adds of FMAs, against the AVX512-BF16 table on the same
  // packed matrices (BM_MatMul, one core / two): 1 token 13.4 / 27.5 vs 10.8 / 23.9 GB/s, 512
  // tokens 136 / 227 vs 85 / 168 GFLOP/s. One token: 4 groups (4 streams and chains) prefetching
  // 1 KB ahead (1 and 2 groups, 512 B: 5-20% slower).
  static constexpr bool kPackedBf16MatMul = true;
  static constexpr int kPackedBf16Groups = 4;
  static constexpr int kPackedBf16PrefetchBytes = 1024;
  // Packed tiles (simd_packed_bf16_impl.h): 2 groups x 8 tokens (16 accumulators) widened in
  // registers for any batch. Widened weights (kernels_avx2.cc) lost here: storing them took 40%
  // of a 16-token product (4 x 6, 2 x 6, 2 x 10 and 1 x 16 tiles of them, 512 tokens, one core:
  // 105-138 GFLOP/s); in registers, 2 x 8: 140-148 in cache for 16-512 tokens. The kPackedWide*
  // values only let the shared widened-weights code compile; with kPackedDirectMaxTokens at
  // INT64_MAX it is never called here.
  static constexpr int kPackedWideGroups = 4;
  static constexpr int64_t kPackedDirectMaxTokens = INT64_MAX;
  static constexpr int kPackedTileGroups = 2;
  static constexpr int kPackedTileTokens = 8;
  static constexpr int kPackedWideTileGroups = 2;
  static constexpr int kPackedWideTileTokens = 8;

  // Packed Q8 (quant.h): one 64-byte quad vector holds 4 columns of 16 rows; VNNI's u8 x s8
  // dot product takes the +128-offset weights as the unsigned side, and the integer sum starts
  // at -128 * (the activations' block sum), which makes it the exact signed dot product.
  using Q = __m512i;
  // Tiles of 2 groups x 6 tokens: 12 independent vpdpbusd chains, where 2 x 4 gave 8 against a
  // latency of ~5 cycles at two issues per cycle on the Intel Xeon VM. There, bench-v2-lite int8
  // prefill 512 @0 (3 alternating pairs): 770, 786, 834 -> 875, 868, 896 tok/s; BM_MatMul
  // avx512_q8, 512 tokens, one core: 225-278 -> 287-362 GFLOP/s (2 x 5, 2 x 7 and 3 x 4 no
  // better, 2 x 8 spilled: 145).
  static constexpr int kQ8TileTokens = 6;
  static constexpr int kQ8TileGroups = 2;
  // One token (decode) where the kernel prefetches (Intel): 4 groups, i.e. 4 weight streams and 4
  // independent vpdpbusd chains.
  static constexpr int kQ8TileGroupsOneToken = 4;
  // One token where the hardware prefetchers alone feed the streams (AMD): 8 groups' streams.
  // 2-core Zen 5 VM, 2026-12-05: bench-v2-lite int8 decode @0 with tiles of 4 / 8 / 12 / 16
  // groups alternating token by token in one process, 3 runs: lm_head read at 48.8-52.3 /
  // 49.3-52.1 / 42-45 / 41-43 GB/s (12 and 16 spill registers), the MoE experts at 44.8-49.0 /
  // 46.1-50.0; 4 against 8 alone, 4 runs: 0.5-3.9% less time per token. BM_MatMul avx512_q8,
  // 262,144 rows, 1 token, 8 alternating runs: 2 threads 11.16 -> 10.87 ms, 1 thread 21.1 -> 20.2.
  static constexpr int kQ8TileGroupsOneTokenWide = 8;
  static Q LoadPacked(const uint8_t* p) { return _mm512_loadu_si512(p); }
  // A token's activations as the tiles read them: the int8 values and block offsets.
  static constexpr bool kQ8SignSplit = false;
  struct Q8Row {
    const int8_t* values;
    const int32_t* offsets;
  };
  using Q8Quad = Q;
  static Q8Row Q8RowOf(const Q8Activations& x, int64_t t) { return {x.Row(t), x.Offsets(t)}; }
  static Q8Quad BroadcastQuad(const Q8Row& row, int64_t col) {
    int32_t quad;
    std::memcpy(&quad, row.values + col, sizeof(quad));
    return _mm512_set1_epi32(quad);
  }
  static Q PackedInit(const Q8Row& row, int64_t block) {
    return _mm512_set1_epi32(row.offsets[block]);
  }
  static Q DotPacked(Q acc, Q w_offset, Q x) { return _mm512_dpbusd_epi32(acc, w_offset, x); }
  // Q8 quantisation of a row (quant.h), per block of 32: the same operations as the scalar
  // reference lane-wise (max |x|, scale = max / 127, x * (1 / scale) clamped to [-127, 127],
  // rounded to nearest even by vcvtps2dq), so bitwise the same values, scales and offsets.
  // `use_scale(b, scale)` stores block b's scale and returns the one the values are computed
  // with (rounded to float16 for weights); -128 x the block sums go to `offsets` unless null.
  template <typename UseScale>
  static void QuantizeBlocksQ8(const float* x, int64_t cols, int8_t* q, UseScale use_scale,
                               int32_t* offsets) {
    const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
    const __m512 lo = _mm512_set1_ps(-127.0f);
    const __m512 hi = _mm512_set1_ps(127.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t begin = b * kQ8Block;
      const int64_t n = std::clamp<int64_t>(cols - begin, 0, kQ8Block);
      const auto m0 = static_cast<__mmask16>((1u << std::min<int64_t>(n, 16)) - 1u);
      const auto m1 = static_cast<__mmask16>((1u << std::max<int64_t>(n - 16, 0)) - 1u);
      const __m512 x0 = _mm512_maskz_loadu_ps(m0, x + begin);
      const __m512 x1 = _mm512_maskz_loadu_ps(m1, x + begin + 16);
      const float max_abs =
          _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      const float scale = use_scale(b, max_abs / 127.0f);
      const __m512 inv = _mm512_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
      const __m512i i0 =
          _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x0, inv), lo), hi));
      const __m512i i1 =
          _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x1, inv), lo), hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + begin), _mm512_cvtsepi32_epi8(i0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + begin + 16), _mm512_cvtsepi32_epi8(i1));
      if (offsets != nullptr) offsets[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    }
  }
  // The same operations for one group of n values (n a multiple of 16) and one scale.
  static int32_t QuantizeGroupI8(const float* x, int64_t n, int8_t* q, float* scale) {
    __m512 max_abs = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      max_abs = _mm512_max_ps(max_abs, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    }
    *scale = _mm512_reduce_max_ps(max_abs) / 127.0f;
    const __m512 inv = _mm512_set1_ps(*scale > 0.0f ? 1.0f / *scale : 0.0f);
    const __m512 lo = _mm512_set1_ps(-127.0f);
    const __m512 hi = _mm512_set1_ps(127.0f);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16) {
      const __m512i v = _mm512_cvtps_epi32(
          _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv), lo), hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(v));
      sum = _mm512_add_epi32(sum, v);
    }
    return _mm512_reduce_add_epi32(sum);
  }
  static F ToFloat(Q a) { return _mm512_cvtepi32_ps(a); }
  static F Abs(F x) { return _mm512_abs_ps(x); }
  // half[i] = x[i] rounded to float16 (to nearest even) and back[i] = its value, i < n <= 16.
  static void RoundToF16(const float* x, int n, uint16_t* half, float* back) {
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(mask, x),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(half, mask, h);
    _mm512_mask_storeu_ps(back, mask, _mm512_cvtph_ps(h));
  }
  static F LoadF16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // 16 FP8 E4M3 bytes as float16 bit patterns of value / 256, widened exactly: the AVX2 traits'
  // integer steps on 16 lanes (AVX2 instructions; checked for all 256 bytes on an AVX2 CPU with
  // two 8-value vcvtph2ps), then one 16-value vcvtph2ps, as LoadF16.
  static F LoadF8Div256(const uint8_t* p) {
    const __m256i high = _mm256_slli_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 8);
    const __m256i half = _mm256_and_si256(_mm256_srai_epi16(high, 1),
                                          _mm256_set1_epi16(static_cast<int16_t>(0xbfff)));
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(high, _mm256_set1_epi16(0x7f00)),
                                           _mm256_set1_epi16(0x7f00));
    return _mm512_cvtph_ps(_mm256_or_si256(half, _mm256_and_si256(nan, _mm256_set1_epi16(0x7e00))));
  }
  // LoadF8Div256 for bytes that are not NaN (0x7f, 0xff give a finite value here): the byte
  // sign-extended and shifted left by 7 is s s eeee mmm 0000000, which the same clearing of bit
  // 14 makes that float16: 3 integer operations instead of 7 (a throwaway loop of TileF8's shape,
  // one core, rows in L2: 15.5 -> 24 GB/s with AnyF8Nan's check of the same bytes).
  static F LoadF8Div256NotNan(const uint8_t* p) {
    const __m256i shifted = _mm256_slli_epi16(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 7);
    return _mm512_cvtph_ps(
        _mm256_and_si256(shifted, _mm256_set1_epi16(static_cast<int16_t>(0xbfff))));
  }
  // Whether any of the n bytes at p is an FP8 E4M3 NaN (f8_nan_avx512.h).
  static bool AnyF8Nan(const uint8_t* p, int64_t n) { return avx512::AnyF8Nan(p, n); }
};

}  // namespace mlarun::avx512

#define SIMD_NAMESPACE avx512
#include "kernels/cpu/simd_impl.h"

namespace mlarun::avx512 {
namespace {

// A 16 x 16 transpose of 32-bit words: store(j, v) receives v = word j of r[0..15] (lane i from
// r[i]). Three stages: 32-bit and 64-bit unpacks (within 128-bit lanes: u[4q + c] lane L holds
// rows 4q .. 4q + 3 of word 4L + c), then a 4 x 4 transpose of 128-bit lanes per c.
template <typename Store>
inline void TransposeWords16x16(const __m512i (&r)[16], Store store) {
  __m512i t[16];
  for (int64_t i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m512i u[16];
  for (int64_t q = 0; q < 4; ++q) {
    const __m512i* tq = t + 4 * q;  // rows 4q .. 4q + 3
    u[4 * q + 0] = _mm512_unpacklo_epi64(tq[0], tq[2]);
    u[4 * q + 1] = _mm512_unpackhi_epi64(tq[0], tq[2]);
    u[4 * q + 2] = _mm512_unpacklo_epi64(tq[1], tq[3]);
    u[4 * q + 3] = _mm512_unpackhi_epi64(tq[1], tq[3]);
  }
  for (int64_t c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    store(0 + c, _mm512_shuffle_i32x4(v0, v2, 0x88));
    store(4 + c, _mm512_shuffle_i32x4(v0, v2, 0xdd));
    store(8 + c, _mm512_shuffle_i32x4(v1, v3, 0x88));
    store(12 + c, _mm512_shuffle_i32x4(v1, v3, 0xdd));
  }
}

// Words [kk0, kk0 + 16) of 16 rows (row i at src + i * cols) transposed into 16 vectors, vector j
// holding word kk0 + j of rows 0-15, stored at out + j * 16. kF16Order: each vector's halves
// reordered from (row, column of the pair) to (column, row), the packed f16 order
// (packed_bf16.h), by one vpermw.
template <bool kF16Order>
inline __m512i Transpose16Words(const uint16_t* src, int64_t cols, int64_t kk0, uint32_t* out) {
  __m512i r[16];
  __m512i largest = _mm512_setzero_si512();
  const __m512i magnitude = _mm512_set1_epi16(0x7fff);
  for (int64_t i = 0; i < 16; ++i) {
    r[i] = _mm512_loadu_si512(src + i * cols + 2 * kk0);
    largest = _mm512_max_epu16(largest, _mm512_and_si512(r[i], magnitude));
  }
  // Half 16 j + i of the f16 order is half 2 i + j of the pair order (row i, column j).
  const __m512i f16_order =
      _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1, 30, 28, 26, 24,
                       22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  TransposeWords16x16(r, [&](int64_t j, __m512i v) {
    if constexpr (kF16Order) v = _mm512_permutexvar_epi16(f16_order, v);
    _mm512_storeu_si512(out + j * 16, v);
  });
  return largest;
}

// Bf16PairColumns (packed_bf16.h): 16 rows x 16 pairs a step, each row's 32 floats rounded as
// RoundToBf16 and their bf16 halves gathered into 16 pair words by one vpermt2w, then transposed
// by TransposeWords16x16; the last n_rows % 16 rows and n_pairs % 16 pairs by
// Bf16PairColumnsFrom. The prefill's bf16 attention (bench-v2-lite, 512-token chunks filling
// 4,096 positions, Zen 5 VM, 2026-12-05; the old and the new layout code alternating layer by
// layer in one process, 4 runs): keys and values laid out in 6.8 ms per layer on average (4.5-8.7
// per run) against 15.8 (11.6-21.2) with a scalar transposing loop and per-row rounding calls.
void Bf16PairColumnsV(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs, uint32_t* out,
                      int64_t ld_out) {
  const int64_t rows16 = n_rows / 16 * 16;
  const int64_t pairs16 = n_pairs / 16 * 16;
  alignas(64) static constexpr uint16_t kHighHalves[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i high_halves = _mm512_load_si512(kHighHalves);
  for (int64_t r0 = 0; r0 < rows16; r0 += 16) {
    for (int64_t c0 = 0; c0 < pairs16; c0 += 16) {
      __m512i words[16];
      for (int64_t i = 0; i < 16; ++i) {
        const float* p = x + (r0 + i) * ldx + 2 * c0;
        words[i] = _mm512_permutex2var_epi16(V::RoundedBf16High(_mm512_loadu_si512(p)), high_halves,
                                             V::RoundedBf16High(_mm512_loadu_si512(p + 16)));
      }
      TransposeWords16x16(words, [&](int64_t j, __m512i v) {
        _mm512_storeu_si512(out + (c0 + j) * ld_out + r0, v);
      });
    }
  }
  if (rows16 < n_rows || pairs16 < n_pairs) {
    Bf16PairColumnsFrom(x, ldx, n_rows, n_pairs, rows16, pairs16, out, ld_out);
  }
}

// Bf16PairRows (packed_bf16.h), 16 pair words a step: a's rounded bf16 halves shifted down,
// b's kept high (one vpternlogd merges them).
void Bf16PairRowsV(const float* a, const float* b, int64_t n, uint32_t* out) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = static_cast<__mmask16>((1u << std::min<int64_t>(16, n - c)) - 1u);
    const __m512i low = _mm512_srli_epi32(
        V::RoundedBf16High(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, a + c))), 16);
    const __m512i odd =
        b != nullptr ? V::RoundedBf16High(_mm512_castps_si512(_mm512_maskz_loadu_ps(m, b + c)))
                     : _mm512_setzero_si512();
    // (odd & high) | low: low has no high bits.
    _mm512_mask_storeu_epi32(out + c, m, _mm512_ternarylogic_epi32(odd, high, low, 0xea));
  }
}

// pack_bf16_rows (kF16 false) and pack_f16_rows (true): whole 16-row groups 16 column pairs (a
// cache line of each row) at a time by Transpose16Words; partial groups and the last
// cols / 2 % 16 pairs by PackBf16PairsFrom / PackF16ColsFrom. Bitwise PackBf16Rows / PackF16Rows
// (SimdTest); the packed f16 order is the bf16 one with each 64-byte pair reordered. A copying
// load of bench-v2-lite's 4.5 GB bf16 (Zen 5 VM, 2026-12-05): packing 12,230 -> 8,114 perf
// samples (now mostly waiting for the mapped rows), the load 3.35-3.98 -> 2.75-3.02 s (3
// alternating pairs); of its f16 copy: PackF16Rows' 7,601-7,797 samples -> 4,533-5,054, the load
// 1.48-2.33 -> 1.03-1.14 s (7 pairs).
template <bool kF16>
uint16_t PackRows16V(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                     uint32_t* dst) {
  const int64_t vector_pairs = cols / 2 / 16 * 16;
  uint16_t largest = 0;
  for (int64_t r0 = row_begin; r0 < row_end;) {
    const int64_t n = std::min(kBf16GroupRows - r0 % kBf16GroupRows, row_end - r0);
    int64_t kk_begin = 0;                           // pairs before it packed here for these rows
    if (n == kBf16GroupRows && vector_pairs > 0) {  // a whole group
      uint32_t* group = dst + PackedBf16GroupWords(r0 / kBf16GroupRows, cols);
      __m512i big = _mm512_setzero_si512();
      for (int64_t kk0 = 0; kk0 < vector_pairs; kk0 += 16) {
        big = _mm512_max_epu16(
            big, Transpose16Words<kF16>(src + r0 * cols, cols, kk0, group + kk0 * kBf16GroupRows));
      }
      alignas(64) uint16_t lanes[32];
      _mm512_store_si512(lanes, big);
      largest = std::max(largest, *std::max_element(lanes, lanes + 32));
      kk_begin = vector_pairs;
    }
    const uint16_t rest = kF16 ? PackF16ColsFrom(src, cols, r0, r0 + n, 2 * kk_begin,
                                                 reinterpret_cast<uint16_t*>(dst))
                               : PackBf16PairsFrom(src, cols, r0, r0 + n, kk_begin, dst);
    largest = std::max(largest, rest);
    r0 += n;
  }
  return largest;
}

uint16_t PackBf16RowsV(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                       uint32_t* dst) {
  return PackRows16V<false>(src, cols, row_begin, row_end, dst);
}

uint16_t PackF16RowsV(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                      uint16_t* dst) {
  // The packed f16 matrix is written in 64-byte pieces, as the bf16 one in 32-bit words.
  return PackRows16V<true>(src, cols, row_begin, row_end, reinterpret_cast<uint32_t*>(dst));
}

// pack_f8_rows: PackF8Rows (packed_bf16.h) for whole 16-row groups 32 column pairs (a cache line
// of each row) at a time: TransposeWords16x16 leaves in vector j the 32-bit words (pairs 2 j and
// 2 j + 1) of rows 0-15, and one vpermw puts its even 16-bit halves (pair 2 j of every row, the
// packed pair's 32 bytes) before its odd ones (pair 2 j + 1): one 64-byte store. NaN bytes (0x7f
// after clearing the sign) are counted by byte compares of the loaded rows. Partial groups and the
// last cols / 2 % 32 pairs by PackF8PairsFrom. Bitwise PackF8Rows (SimdTest).
bool PackF8RowsV(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                 uint8_t* dst) {
  const int64_t vector_pairs = cols / 2 / 32 * 32;
  alignas(64) static constexpr uint16_t kEvenThenOdd[32] = {
      0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
      1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  const __m512i even_then_odd = _mm512_load_si512(kEvenThenOdd);
  const __m512i magnitude = _mm512_set1_epi8(0x7f);
  bool nan = false;
  for (int64_t r0 = row_begin; r0 < row_end;) {
    const int64_t n = std::min(kBf16GroupRows - r0 % kBf16GroupRows, row_end - r0);
    int64_t kk_begin = 0;  // pairs before it packed here for these rows
    if (n == kBf16GroupRows && vector_pairs > 0) {
      uint8_t* group = dst + PackedF8GroupBytes(r0 / kBf16GroupRows, cols);
      __mmask64 nan_bytes = 0;
      for (int64_t kk0 = 0; kk0 < vector_pairs; kk0 += 32) {
        __m512i r[16];
        for (int64_t i = 0; i < 16; ++i) {
          r[i] = _mm512_loadu_si512(src + (r0 + i) * cols + 2 * kk0);
          nan_bytes |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(r[i], magnitude), magnitude);
        }
        uint8_t* out = group + kk0 * 2 * kBf16GroupRows;
        TransposeWords16x16(r, [&](int64_t j, __m512i v) {
          _mm512_storeu_si512(out + j * 4 * kBf16GroupRows,
                              _mm512_permutexvar_epi16(even_then_odd, v));
        });
      }
      nan = nan || nan_bytes != 0;
      kk_begin = vector_pairs;
    }
    nan = PackF8PairsFrom(src, cols, r0, r0 + n, kk_begin, dst) || nan;
    r0 += n;
  }
  return nan;
}

}  // namespace
}  // namespace mlarun::avx512

namespace mlarun::detail {
const KernelTable& Avx512KernelTable() {
  static const KernelTable table = [] {
    KernelTable t = avx512::kTable;
    // On AMD's AVX-512 cores the 4 KB-ahead software prefetch slows the single-token Q8
    // product. 2026-12-04, 2-core EPYC VM (Zen 5, family 26), bench-v2-lite int8 decode @0, 6
    // alternating runs: 92-99 -> 104-114 tok/s (79-83% -> 89-95% of the probe); in the VM's
    // fastest minutes (probe 74-77 GB/s) 92-94 -> 118-121; batched decode of 4 sequences 191-194
    // -> 202-211 tok/s. Products of more tokens keep it (a 16-token prefill was ~10% slower
    // without), and so do Intel CPUs, where it was measured a gain (at kPackedPrefetchBytes).
    if (DetectCpuFeatures().amd) t.matmul_rows_q8 = avx512::MatMulRowsQ8HardwarePrefetchOneToken;
    t.matmul_rows_blocks = MatMulRowsBlocksAvx512;
    t.pack_bf16_rows = avx512::PackBf16RowsV;
    t.bf16_pair_columns = avx512::Bf16PairColumnsV;
    t.bf16_pair_rows = avx512::Bf16PairRowsV;
    t.pack_f16_rows = avx512::PackF16RowsV;
    t.pack_f8_rows = avx512::PackF8RowsV;
    return t;
  }();
  return table;
}
}  // namespace mlarun::detail
