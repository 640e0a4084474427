// AVX2 + FMA kernels: 8-lane float vectors, masked tails via vmaskmov. Compiled with
// -mavx2 -mfma; only called when the CPU supports them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/blocks_simd.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace mlarun::avx2 {

struct V {
  using F = __m256;
  static constexpr int kWidth = 8;
  static constexpr Isa kIsa = Isa::kAvx2;
  static __m256i TailMask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F Zero() { return _mm256_setzero_ps(); }
  static F Set1(float a) { return _mm256_set1_ps(a); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  static F LoadTail(const float* p, int n) { return _mm256_maskload_ps(p, TailMask(n)); }
  static F LoadBf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static F LoadBf16Tail(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return LoadBf16(tmp);
  }
  // 2 kWidth bf16 values as pairs (see the AVX-512 traits).
  static void LoadBf16Pairs(const uint16_t* p, F* even, F* odd) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(-65536)));
  }
  // Even / odd lanes of the 2 kWidth values (lo, hi), as LoadBf16Pairs splits bf16 pairs, and back.
  static void Deinterleave(F lo, F hi, F* even, F* odd) {
    *even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
    *odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                              _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static void Interleave(F even, F odd, F* lo, F* hi) {
    const F u0 = _mm256_unpacklo_ps(even, odd);  // e0 o0 e1 o1 | e4 o4 e5 o5
    const F u1 = _mm256_unpackhi_ps(even, odd);  // e2 o2 e3 o3 | e6 o6 e7 o7
    *lo = _mm256_permute2f128_ps(u0, u1, 0x20);
    *hi = _mm256_permute2f128_ps(u0, u1, 0x31);
  }
  // [p0 p0 p1 p1 | p2 p2 p3 p3] from 4 floats (in-lane unpacks: the cross-lane permutes of
  // Deinterleave / Interleave cost several micro-ops each on Zen 1), and x with the lanes of
  // each pair swapped.
  static F LoadPairDup(const float* p) {
    const __m128 v = _mm_loadu_ps(p);
    return _mm256_set_m128(_mm_unpackhi_ps(v, v), _mm_unpacklo_ps(v, v));
  }
  static F SwapPairs(F x) { return _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)); }
  // Bit l set where lane l of a equals lane l of b (ordered: NaN equals nothing).
  static uint32_t EqualBits(F a, F b) {
    return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
  }
  // sum_i x_i^2 in double (squares of floats are exact there): four 4-lane accumulators per
  // 16 values (four FMA chains), then the tail in order.
  static double SumSquaresF64(const float* x, int64_t n) {
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      for (int64_t half = 0; half < 2; ++half) {
        const __m256 v = _mm256_loadu_ps(x + i + 8 * half);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        acc[2 * half] = _mm256_fmadd_pd(lo, lo, acc[2 * half]);
        acc[2 * half + 1] = _mm256_fmadd_pd(hi, hi, acc[2 * half + 1]);
      }
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes,
                    _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    return sum;
  }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Div(F a, F b) { return _mm256_div_ps(a, b); }
  // Stands in for a function of the traits (AVX-512 tables define one): none here.
  // NOLINTNEXTLINE(readability-identifier-naming)
  static constexpr void (*RoundToBf16)(const float*, int64_t, uint16_t*) = nullptr;
  static F Min(F a, F b) { return _mm256_min_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static F Round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n for integral n in [-127, 127]: build 2^n from its exponent bits.
  static F Pow2Times(F p, F n) {
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }
  static float Reduce(F a) {
    const __m128 lo = _mm256_castps256_ps128(a);
    const __m128 hi = _mm256_extractf128_ps(a, 1);
    __m128 s = _mm_add_ps(lo, hi);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void Store(float* p, F a) { _mm256_storeu_ps(p, a); }
  static void StoreTail(float* p, F a, int n) { _mm256_maskstore_ps(p, TailMask(n), a); }
  // MatMul tile: 4 rows x 3 tokens (12 accumulators, 3 activation vectors; 4 x 4 spilled):
  // BM_MatMul avx2_bf16 on one core, 512 tokens 25.1 -> 35.4 GFLOP/s, 16 tokens 22.0 -> 28.9.
  static constexpr int kMatRows = 4;
  static constexpr int kMatTokens = 3;
  // No column blocks for float rows (simd_impl.h's FloatRowsInColumnBlocks): with 16 registers
  // its 4 x 3 tiles ran 15% slower than Tile's (BM_MatMul avx2_fp8, 48 and 512 tokens).
  static constexpr int kFloatTileRows = 0;
  static constexpr int kFloatTileTokens = 0;
  static constexpr int kGemmRows = 4;  // GEMM tile: 4 rows x 2 vectors of accumulators
  // Attention tiles within 16 registers (4 x 4 and 16 heads spilled): scores 4 rows x 2 heads
  // (8 accumulators, 4 query vectors); P V of float rows 4 heads x 2 vectors, of bf16 rows 4
  // heads x the even and odd columns of a pair load (8 accumulators each). In-cache rates on a
  // 2-core AMD EPYC VM (FMA peak ~20 GMAC/s per core): scores 13.4 -> 16.3 GMAC/s, P V of bf16
  // rows 15.6 -> 19.4.
  static constexpr int kScoreRows = 4;
  static constexpr int kScoreHeads = 2;
  static constexpr int kPvHeads = 4;
  static constexpr int kPvSlices = 2;
  static constexpr int kPvPairHeads = 4;
  static constexpr bool kHasDeinterleave = true;
  // bf16 row-major matmuls take x in pair form (KernelTable::matmul_rows_pair_x): BM_MatMul
  // avx2_bf16, 1 token, 9.4 -> 12.1 GB/s on one core and 17.0 -> 19.8 on two (the GEMV was
  // bound by widening the weights, not by memory).
  static constexpr bool kPairXMatMul = true;
  // bf16 matrices packed at load (`--load copy`) are read by MatMulRowsPacked16 (one stream
  // per 16-row group); one token in tiles of 2 groups prefetching 512 B ahead. BM_MatMul, 1
  // token, against row-major in the same minutes: 12.7-13.6 -> 16.5-19.0 GB/s on one core,
  // 21.0-23.7 -> 25.6-29.8 on two (docs/performance.md).
  static constexpr bool kPackedBf16MatMul = true;
  static constexpr int kPackedBf16Groups = 2;
  static constexpr int kPackedBf16PrefetchBytes = 512;
  // Packed tiles (simd_packed_bf16_impl.h): 1 group x 4 tokens widened in registers; widened
  // weights in blocks of 4 groups, 2 groups x 3 tokens (6 accumulators): BM_MatMul
  // avx2_bf16packed, 512 tokens, 2 threads, 64-67 -> 73-74 GFLOP/s (1 x 4), the row-major
  // kernels' 72-73.
  static constexpr int kPackedWideGroups = 4;
  static constexpr int64_t kPackedDirectMaxTokens = 8;
  static constexpr int kPackedTileGroups = 1;
  static constexpr int kPackedTileTokens = 4;
  static constexpr int kPackedWideTileGroups = 2;
  static constexpr int kPackedWideTileTokens = 3;

  // Packed Q8 (quant.h): a 64-byte quad is two vectors of 8 rows. Without VNNI the products
  // are vpmaddubsw's (unsigned x signed bytes, pairs summed into int16) on the activations' sign
  // split (quant.h, SplitQ8Row): |x| times the weight with x's sign applied by one xor (exact
  // up to the block's negative sum, where the integer sum starts), then vpmaddwd with ones sums
  // the pairs into int32. Taking |w| and moving w's sign onto x instead (two vpsignb) cost 1.5
  // more instructions per 32 multiply-adds; the two multiplies keep Zen 1's one port that runs
  // them busy for 4 cycles either way. In-cache rate of the single-token product on the AMD
  // EPYC VM, one core: 14.1 -> 16.4 GB/s (a standalone loop of the two forms with the scale
  // arithmetic).
  using Q = __m256i;
  static constexpr int kQ8TileTokens = 2;
  static constexpr int kQ8TileGroups = 1;
  static constexpr int kQ8TileGroupsOneToken = 1;
  static constexpr int kQ8TileGroupsOneTokenWide = 1;  // (its table keeps MatMulRowsQ8)
  static constexpr bool kQ8SignSplit = true;
  struct Q8Row {
    const uint8_t* magnitudes;
    const uint8_t* sign_masks;
    const int32_t* negative_sums;
  };
  struct Q8Quad {
    Q magnitude;
    Q sign_mask;
  };
  static Q8Row Q8RowOf(const Q8Activations& x, int64_t t) {
    return {x.Magnitudes(t), x.SignMasks(t), x.NegativeSums(t)};
  }
  static Q LoadPacked(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static Q Broadcast4(const uint8_t* p) {
    int32_t quad;
    std::memcpy(&quad, p, sizeof(quad));
    return _mm256_set1_epi32(quad);
  }
  static Q8Quad BroadcastQuad(const Q8Row& row, int64_t col) {
    return {Broadcast4(row.magnitudes + col), Broadcast4(row.sign_masks + col)};
  }
  static Q PackedInit(const Q8Row& row, int64_t block) {
    return _mm256_set1_epi32(row.negative_sums[block]);
  }
  static Q DotPacked(Q acc, Q w_offset, const Q8Quad& x) {
    const __m256i pairs =
        _mm256_maddubs_epi16(x.magnitude, _mm256_xor_si256(w_offset, x.sign_mask));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  // SplitQ8Row (quant.h), bitwise: |q|, 0x80 ^ (q < 0 ? 0xff : 0), and per block the sum of
  // |min(q, 0)| by vpsadbw.
  static void SplitQ8Row(const int8_t* q, int64_t padded_cols, uint8_t* magnitudes,
                         uint8_t* sign_masks, int32_t* negative_sums) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i high = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int64_t b = 0; b < padded_cols / kQ8Block; ++b) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * kQ8Block));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitudes + b * kQ8Block),
                          _mm256_abs_epi8(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sign_masks + b * kQ8Block),
                          _mm256_xor_si256(_mm256_cmpgt_epi8(zero, v), high));
      const __m256i sad = _mm256_sad_epu8(_mm256_abs_epi8(_mm256_min_epi8(v, zero)), zero);
      __m128i sum = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
      sum = _mm_add_epi64(sum, _mm_unpackhi_epi64(sum, sum));
      negative_sums[b] = _mm_cvtsi128_si32(sum);
    }
  }
  // Q8 quantisation of a row, the scalar reference's operations per block of 32 (max |x|, scale
  // = max / 127, x / scale clamped and rounded to nearest even by vcvtps2dq), bitwise equal to
  // it. `use_scale(b, scale)` stores block b's scale and returns the one the values are computed
  // with (rounded to float16 for weights); -128 x the block sums go to `offsets` unless null.
  // Activations: 6.6 -> ~1.5 us per 2,048 values (BM_QuantizeRowQ8), run serially before each
  // decode product.
  template <typename UseScale>
  static void QuantizeBlocksQ8(const float* x, int64_t cols, int8_t* q, UseScale use_scale,
                               int32_t* offsets) {
    const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
    const __m256 lo = _mm256_set1_ps(-127.0f);
    const __m256 hi = _mm256_set1_ps(127.0f);
    // packs_epi32 / packs_epi16 interleave the 128-bit lanes: this restores the value order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t begin = b * kQ8Block;
      const int64_t n = std::clamp<int64_t>(cols - begin, 0, kQ8Block);
      __m256 v[4];
      __m256 max_abs = _mm256_setzero_ps();
      for (int64_t j = 0; j < 4; ++j) {
        const int left = static_cast<int>(std::clamp<int64_t>(n - 8 * j, 0, 8));
        v[j] = left == 8 ? _mm256_loadu_ps(x + begin + 8 * j) : LoadTail(x + begin + 8 * j, left);
        max_abs = _mm256_max_ps(max_abs, Abs(v[j]));
      }
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs), _mm256_extractf128_ps(max_abs, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_movehdup_ps(m));
      const float scale = use_scale(b, _mm_cvtss_f32(m) / 127.0f);
      const __m256 inv = _mm256_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
      __m256i i[4];
      for (int j = 0; j < 4; ++j) {
        i[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[j], inv), lo), hi));
      }
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + begin), bytes);
      if (offsets == nullptr) continue;
      const __m256i sum8 =
          _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
      __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(1, 0, 3, 2)));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(2, 3, 0, 1)));
      offsets[b] = -128 * _mm_cvtsi128_si32(sum4);
    }
  }
  static int32_t QuantizeGroupI8(const float* x, int64_t n, int8_t* q, float* scale) {
    return mlarun::QuantizeGroupI8(x, n, q, scale);
  }
  static F ToFloat(Q a) { return _mm256_cvtepi32_ps(a); }
  static F Abs(F x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
  // half[i] = x[i] rounded to float16 (to nearest even, F16C) and back[i] = its value, i < n <= 8.
  static void RoundToF16(const float* x, int n, uint16_t* half, float* back) {
    const __m128i h =
        _mm256_cvtps_ph(LoadTail(x, n), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    alignas(16) uint16_t lanes[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes), h);
    std::copy_n(lanes, n, half);
    StoreTail(back, _mm256_cvtph_ps(h), n);
  }
  static F LoadF16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // 8 FP8 E4M3 (e4m3fn) bytes as float16 bit patterns of value / 256, widened exactly: the byte
  // s eeee mmm in the high half of a 16-bit lane, shifted right arithmetically by one, is
  // s s eeee mmm 0000000; clearing bit 14 leaves the float16 s 0eeee mmm0000000 (bias 15
  // against 7: a factor 2^-8, subnormals included). 0x7f / 0xff (NaN) get exponent 11111.
  static F LoadF8Div256(const uint8_t* p) {
    const __m128i high = _mm_unpacklo_epi8(_mm_setzero_si128(),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i half =
        _mm_and_si128(_mm_srai_epi16(high, 1), _mm_set1_epi16(static_cast<int16_t>(0xbfff)));
    const __m128i nan =
        _mm_cmpeq_epi16(_mm_and_si128(high, _mm_set1_epi16(0x7f00)), _mm_set1_epi16(0x7f00));
    return _mm256_cvtph_ps(_mm_or_si128(half, _mm_and_si128(nan, _mm_set1_epi16(0x7e00))));
  }
  // LoadF8Div256 for bytes that are not NaN (0x7f, 0xff give a finite value here): the byte
  // sign-extended and shifted left by 7 is s s eeee mmm 0000000, which the same clearing of bit
  // 14 makes that float16.
  static F LoadF8Div256NotNan(const uint8_t* p) {
    const __m128i shifted =
        _mm_slli_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 7);
    return _mm256_cvtph_ps(_mm_and_si128(shifted, _mm_set1_epi16(static_cast<int16_t>(0xbfff))));
  }
  // Whether any of the n bytes at p (n a multiple of 8) is an FP8 E4M3 NaN (low 7 bits set).
  static bool AnyF8Nan(const uint8_t* p, int64_t n) {
    const __m256i low7 = _mm256_set1_epi8(0x7f);
    __m256i most = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      most = _mm256_max_epu8(
          most,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), low7));
    }
    for (; i < n; i += 8) {
      const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i));
      most =
          _mm256_max_epu8(most, _mm256_zextsi128_si256(_mm_and_si128(eight, _mm_set1_epi8(0x7f))));
    }
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(most, low7)) != 0;
  }
};

}  // namespace mlarun::avx2

#define SIMD_NAMESPACE avx2
#include "kernels/cpu/simd_impl.h"

namespace mlarun::detail {
const KernelTable& Avx2KernelTable() {
  static const KernelTable table = [] {
    KernelTable t = avx2::kTable;
    t.matmul_rows_blocks = MatMulRowsBlocksAvx2;
    return t;
  }();
  return table;
}
}  // namespace mlarun::detail
