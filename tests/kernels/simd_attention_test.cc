// The attention kernels of the SIMD tables against the scalar table or a double-precision
// reference, for every ISA this CPU supports: the whole attention core over bf16 latent rows
// (short and long contexts), the softmax tile steps, scores and P V over bf16 row pointers, and
// the bf16-rounded variants (dot products of bf16 pairs, the pair GEMM of prefill).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_row.h"
#include "kernels/packed_bf16.h"
#include "kernels/simd_test_util.h"

namespace mlarun {
namespace {

class SimdAttentionTest : public SimdKernelTest {};

// Absorbed MLA in miniature: `n_heads` query heads over bf16 latent rows of 72 values, the first
// 64 of them also V.
AttentionSpec LatentSpec(int n_heads) {
  return {.n_head_q = n_heads,
          .n_head_kv = 1,
          .head_dim_qk = 72,
          .head_dim_v = 64,
          .v_aliases_k = true,
          .scale = 0.1f};
}
constexpr KvRowFormat kLatentRows{
    .dtype = DType::kBF16, .n_head_kv = 1, .head_dim_k = 72, .head_dim_v = 64, .v_aliases_k = true};

TEST_P(SimdAttentionTest, AttentionMatchesScalarOnBf16LatentRows) {
  const AttentionSpec spec = LatentSpec(8);
  const KvRowFormat& f = kLatentRows;
  const int block_size = 16;
  const std::vector<float> values = Random(static_cast<size_t>(3 * block_size * 72), 5, 2.0f);
  std::vector<uint8_t> storage(3 * block_size * f.RowBytes());
  for (int r = 0; r < 3 * block_size; ++r)
    EncodeKvRow(f, values.data() + r * 72, storage.data() + r * f.RowBytes());
  const KvRows rows{.base = storage.data(), .block_stride = block_size * f.RowBytes(), .format = f};
  const std::vector<KvSpan> spans = {{.block = 2, .row_begin = 0, .n_rows = 16},
                                     {.block = 0, .row_begin = 3, .n_rows = 9, .score_bias = 0.5f}};
  std::vector<float> q = Random(8 * 72, 6, 3.0f);
  const bool rounded = simd().dot_rows_bf16_rounded != nullptr;
  // A table with bf16 attention rounds q to bf16 (done here for the reference too, so the scores
  // agree to float32 rounding) and the probabilities (relative error <= 2^-9 per weight, so
  // |error| <= 2^-9 max|v| ~ 0.004 for |v| <= 2; the exact kernels agree to 1e-5).
  if (rounded) {
    for (float& v : q) v = BF16ToF32(F32ToBF16(v));
  }
  std::vector<float> a(8 * 64), b(8 * 64);
  Attend(simd(), spec, rows, {.q = q.data(), .spans = spans}, a.data());
  Attend(scalar(), spec, rows, {.q = q.data(), .spans = spans}, b.data());
  const double tolerance = rounded ? 4e-3 : 1e-5;
  double max_error = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], tolerance) << i;
    max_error = std::max(max_error, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  // The rounding is real but small: not zero, not at the bound.
  if (rounded) {
    EXPECT_GT(max_error, 1e-6);
  }
}

// Long contexts: 16 heads over 700 rows in paged blocks, spans starting mid-block, so the
// in-place kernels see several full 256-row tiles (whose rows come from many blocks) and a short
// last one. Checked against the scalar table (within the bf16 rounding bound where the table
// rounds) and, bitwise, AttendParallel on 1-3 threads against Attend.
TEST_P(SimdAttentionTest, LongContextAttentionMatchesScalarOverManyTiles) {
  const AttentionSpec spec = LatentSpec(16);
  const KvRowFormat& f = kLatentRows;
  const int block_size = 64;
  const int n_blocks = 12;
  const size_t cache_rows = size_t{n_blocks} * block_size;
  const std::vector<float> values = Random(cache_rows * 72, 61, 2.0f);
  std::vector<uint8_t> storage(cache_rows * f.RowBytes());
  for (size_t r = 0; r < cache_rows; ++r) {
    EncodeKvRow(f, values.data() + r * 72, storage.data() + r * f.RowBytes());
  }
  const KvRows rows{.base = storage.data(), .block_stride = block_size * f.RowBytes(), .format = f};
  std::vector<KvSpan> spans;
  int total = 0;
  for (int b = n_blocks - 1; b >= 0 && total < 700; --b) {  // blocks in reverse order
    const int begin = b % 3 == 0 ? 5 : 0;
    const int count = std::min(block_size - begin, 700 - total);
    spans.push_back(
        {.block = b, .row_begin = begin, .n_rows = count, .score_bias = b == 4 ? 0.5f : 0.0f});
    total += count;
  }
  ASSERT_EQ(total, 700);
  std::vector<float> q = Random(size_t{16} * 72, 62, 3.0f);
  const bool rounded = simd().dot_rows_bf16_rounded != nullptr;
  if (rounded) {  // as in AttentionMatchesScalarOnBf16LatentRows
    for (float& v : q) v = BF16ToF32(F32ToBF16(v));
  }
  std::vector<float> a(size_t{16} * 64), b(size_t{16} * 64);
  Attend(simd(), spec, rows, {.q = q.data(), .spans = spans}, a.data());
  Attend(scalar(), spec, rows, {.q = q.data(), .spans = spans}, b.data());
  // The scalar table against a direct double-precision softmax over the decoded rows.
  std::vector<double> scores;
  std::vector<const float*> listed;
  std::vector<float> decoded(cache_rows * 72);
  for (size_t r = 0; r < cache_rows; ++r) {
    DecodeKvRow(f, storage.data() + r * f.RowBytes(), decoded.data() + r * 72);
  }
  for (int h = 0; h < 16; ++h) {
    scores.clear();
    listed.clear();
    double max_score = -1e300;
    for (const KvSpan& span : spans) {
      for (int r = 0; r < span.n_rows; ++r) {
        const float* row =
            decoded.data() +
            static_cast<ptrdiff_t>(span.block * block_size + span.row_begin + r) * 72;
        double dot = 0.0;
        for (int d = 0; d < 72; ++d) dot += static_cast<double>(q[h * 72 + d]) * row[d];
        scores.push_back(dot * spec.scale + span.score_bias);
        listed.push_back(row);
        max_score = std::max(max_score, scores.back());
      }
    }
    double sum = 0.0;
    for (double& score : scores) sum += (score = std::exp(score - max_score));
    for (int c = 0; c < 64; ++c) {
      double expected = 0.0;
      for (size_t j = 0; j < listed.size(); ++j) expected += scores[j] / sum * listed[j][c];
      ASSERT_NEAR(b[static_cast<size_t>(h * 64 + c)], expected, 1e-5) << h << " " << c;
    }
  }
  const double tolerance = rounded ? 4e-3 : 1e-5;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << i;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Exec exec{pool, simd()};
    std::vector<float> parallel(a.size());
    AttendParallel(exec, spec, rows, {.q = q.data(), .spans = spans}, parallel.data());
    EXPECT_EQ(parallel, a) << threads << " threads";
  }
}

// The two-step form (the query laid out once, bf16_query_blocks, then dot_rows_bf16_blocks per
// tile, as AttendPartial uses it) gives dot_rows_bf16_rounded's scores bitwise.
TEST_P(SimdAttentionTest, Bf16BlockScoresAreBitwiseTheRoundedKernel) {
  if (simd().dot_rows_bf16_blocks == nullptr) GTEST_SKIP() << "no two-step bf16 scores here";
  for (int n_heads : {16, 48}) {
    for (int dim : {4, 40, 576}) {
      for (int n_rows : {1, 13, 32}) {
        const std::vector<float> rows_f =
            Random(static_cast<size_t>(n_rows) * static_cast<size_t>(dim), 61);
        std::vector<uint16_t> rows_h(rows_f.size());
        for (size_t i = 0; i < rows_f.size(); ++i) rows_h[i] = F32ToBF16(rows_f[i]);
        std::vector<const uint16_t*> ptrs(static_cast<size_t>(n_rows));
        for (int j = 0; j < n_rows; ++j) {
          ptrs[static_cast<size_t>(j)] =
              rows_h.data() + static_cast<ptrdiff_t>((j * 7) % n_rows) * dim;
        }
        const std::vector<float> q_f =
            Random(static_cast<size_t>(n_heads) * static_cast<size_t>(dim), 62);
        std::vector<uint16_t> q_h(q_f.size());
        for (size_t i = 0; i < q_f.size(); ++i) q_h[i] = F32ToBF16(q_f[i]);
        const int lds = n_rows + 1;
        std::vector<float> want(static_cast<size_t>(n_heads) * static_cast<size_t>(lds), -1.0f);
        simd().dot_rows_bf16_rounded(ptrs.data(), n_rows, q_h.data(), n_heads, dim, want.data(),
                                     lds);
        std::vector<uint32_t> q_blocks(static_cast<size_t>(BF16QueryBlockWords(n_heads, dim)));
        simd().bf16_query_blocks(q_h.data(), n_heads, dim, q_blocks.data());
        std::vector<float> got(want.size(), -1.0f);
        simd().dot_rows_bf16_blocks(ptrs.data(), n_rows, q_blocks.data(), n_heads, dim, got.data(),
                                    lds);
        ASSERT_EQ(got, want) << n_heads << " heads, dim " << dim << ", " << n_rows << " rows";
      }
    }
  }
}

TEST_P(SimdAttentionTest, RoundedBf16DotRowsAndPvMatchDoubleReference) {
  if (simd().dot_rows_bf16_rounded == nullptr) GTEST_SKIP() << "no bf16 attention in this ISA";
  for (int n_heads : {1, 3, 8, 16, 40}) {  // 40: two blocks of 16 and 8 in 4 x 4 tiles
    for (int dim : {7, 40, 64, 576}) {
      for (int n_rows : {1, 13, 32}) {
        const std::vector<float> rows_f = Random(static_cast<size_t>(n_rows * (dim + 3)), 51);
        std::vector<uint16_t> rows_h(rows_f.size());
        for (size_t i = 0; i < rows_f.size(); ++i) rows_h[i] = F32ToBF16(rows_f[i]);
        std::vector<const uint16_t*> ptrs(static_cast<size_t>(n_rows));
        for (int j = 0; j < n_rows; ++j)
          ptrs[static_cast<size_t>(j)] = rows_h.data() + ((j * 5) % n_rows) * (dim + 3);
        const std::vector<float> q_f = Random(static_cast<size_t>(n_heads * dim), 52);
        std::vector<uint16_t> q_h(q_f.size());
        for (size_t i = 0; i < q_f.size(); ++i) q_h[i] = F32ToBF16(q_f[i]);
        const int lds = n_rows + 2;
        std::vector<float> s(static_cast<size_t>(n_heads * lds), -1.0f);
        simd().dot_rows_bf16_rounded(ptrs.data(), n_rows, q_h.data(), n_heads, dim, s.data(), lds);
        for (int h = 0; h < n_heads; ++h) {
          for (int j = 0; j < n_rows; ++j) {
            double expected = 0.0;
            for (int d = 0; d < dim; ++d) {
              expected += static_cast<double>(BF16ToF32(q_h[static_cast<size_t>(h * dim + d)])) *
                          BF16ToF32(ptrs[static_cast<size_t>(j)][d]);
            }
            ASSERT_NEAR(s[static_cast<size_t>(h * lds + j)], expected, 1e-5 * dim)
                << n_heads << " " << dim << " " << h << " " << j;
          }
          EXPECT_EQ(s[static_cast<size_t>(h * lds + n_rows)], -1.0f);  // untouched padding
        }
        // P V: p float32 [n_heads, ldp] (the kernel rounds it to bf16; values well above the
        // denormal range, which vcvtne2ps2bf16 would read as 0).
        const int ldp = n_rows + 3;
        const std::vector<float> p = Random(static_cast<size_t>(n_heads * ldp), 53);
        const std::vector<float> acc0 = Random(static_cast<size_t>(n_heads * dim), 54);
        std::vector<float> acc = acc0;
        simd().pv_accumulate_bf16_rounded(p.data(), ldp, n_heads, n_rows, ptrs.data(), dim,
                                          acc.data());
        for (int h = 0; h < n_heads; ++h) {
          for (int c = 0; c < dim; ++c) {
            double expected = acc0[static_cast<size_t>(h * dim + c)];
            for (int j = 0; j < n_rows; ++j) {
              expected +=
                  static_cast<double>(BF16ToF32(F32ToBF16(p[static_cast<size_t>(h * ldp + j)]))) *
                  BF16ToF32(ptrs[static_cast<size_t>(j)][c]);
            }
            ASSERT_NEAR(acc[static_cast<size_t>(h * dim + c)], expected, 1e-5 * n_rows)
                << n_heads << " " << dim << " " << n_rows << " " << h << " " << c;
          }
        }
      }
    }
  }
}

// Random bf16 values packed in pairs, low half first.
std::vector<uint32_t> RandomBf16Pairs(size_t n, uint64_t seed) {
  const std::vector<float> v = Random(2 * n, seed);
  std::vector<uint32_t> pairs(n);
  for (size_t i = 0; i < n; ++i) {
    pairs[i] = BF16Pair(F32ToBF16(v[2 * i]), F32ToBF16(v[2 * i + 1]));
  }
  return pairs;
}

double PairDot(uint32_t a, uint32_t b) {
  auto lo = [](uint32_t w) { return static_cast<double>(BF16ToF32(static_cast<uint16_t>(w))); };
  auto hi = [](uint32_t w) {
    return static_cast<double>(BF16ToF32(static_cast<uint16_t>(w >> 16)));
  };
  return lo(a) * lo(b) + hi(a) * hi(b);
}

TEST_P(SimdAttentionTest, Bf16PairGemmMatchesDoubleReference) {
  if (simd().gemm_bf16_pairs == nullptr) GTEST_SKIP() << "no bf16 GEMM in this ISA";
  // Row tiles of 6 and 1-5 (7 = 4 + 3 and 8 = 4 + 4 rows on AVX512-BF16), partial column panels
  // (masks), several depth chunks, and k = 0.
  for (int64_t m : {1, 3, 7, 8, 13, 14}) {
    for (int64_t n : {1, 16, 17, 64, 130}) {
      for (int64_t k_pairs : {0, 1, 96, 300}) {
        const int64_t lda = k_pairs + 2;
        const int64_t ldb = n + 5;
        const int64_t ldc = n + 3;
        const std::vector<uint32_t> a = RandomBf16Pairs(static_cast<size_t>(m * lda), 81);
        const std::vector<uint32_t> b =
            RandomBf16Pairs(static_cast<size_t>(std::max<int64_t>(k_pairs, 1) * ldb), 82);
        std::vector<float> c(static_cast<size_t>(m * ldc), -7.0f);
        simd().gemm_bf16_pairs(m, n, k_pairs, a.data(), lda, b.data(), ldb, c.data(), ldc);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double expected = 0.0;
            for (int64_t kk = 0; kk < k_pairs; ++kk) {
              expected += PairDot(a[static_cast<size_t>(i * lda + kk)],
                                  b[static_cast<size_t>(kk * ldb + j)]);
            }
            ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], expected, 1e-6 * (2 * k_pairs + 1))
                << m << " " << n << " " << k_pairs << " " << i << " " << j;
          }
          for (int64_t j = n; j < ldc; ++j) {
            ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], -7.0f) << "wrote past n";
          }
        }
      }
    }
  }
}

TEST_P(SimdAttentionTest, SoftmaxTileStepsMatchScalar) {
  for (int64_t n : {1, 5, 16, 32, 45}) {
    std::vector<float> a = Random(static_cast<size_t>(n), 61, 8.0f), b = a;
    const std::vector<float> bias = Random(static_cast<size_t>(n), 62);
    const float max_a = simd().scale_bias_max(a.data(), 0.3f, bias.data(), n);
    const float max_b = scalar().scale_bias_max(b.data(), 0.3f, bias.data(), n);
    for (int64_t i = 0; i < n; ++i) {  // equal up to the rounding of a fused multiply-add
      EXPECT_NEAR(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)],
                  1e-6 * (1.0 + std::abs(b[static_cast<size_t>(i)])));
    }
    EXPECT_NEAR(max_a, max_b, 1e-6 * (1.0 + std::abs(max_b)));
    EXPECT_EQ(max_a, *std::max_element(a.begin(), a.end()));
    const float sum_a = simd().exp_shift_sum(a.data(), max_a, n);
    const float sum_b = scalar().exp_shift_sum(b.data(), max_b, n);
    double sum_direct = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)], 1e-6);
      EXPECT_LE(a[static_cast<size_t>(i)], 1.0f + 1e-6f);
      sum_direct += a[static_cast<size_t>(i)];
    }
    EXPECT_NEAR(sum_a, sum_b, 1e-5 * n);
    EXPECT_NEAR(sum_a, sum_direct, 1e-5 * n);
    EXPECT_GE(sum_a, 1.0f - 1e-6f);  // the maximum contributes exp(0) = 1
  }
}

TEST_P(SimdAttentionTest, DotRowsAndPvOverBf16RowPointersMatchScalar) {
  for (int n_heads : {1, 3, 6, 16}) {
    for (int dim : {7, 40, 44, 576}) {
      const int n_rows = 13;
      const std::vector<float> rows_f = Random(static_cast<size_t>(n_rows * (dim + 3)), 41);
      const std::vector<float> q_f = Random(static_cast<size_t>(n_heads * dim), 42);
      std::vector<uint16_t> rows_h(rows_f.size());
      for (size_t i = 0; i < rows_f.size(); ++i) rows_h[i] = F32ToBF16(rows_f[i]);
      // Rows out of order and strided, as paged cache rows are.
      std::vector<const uint16_t*> ptrs(n_rows);
      for (int j = 0; j < n_rows; ++j)
        ptrs[static_cast<size_t>(j)] = rows_h.data() + ((j * 5) % n_rows) * (dim + 3);
      const int lds = n_rows + 2;
      std::vector<float> s(static_cast<size_t>(n_heads * lds), -1.0f);
      std::vector<float> q_pairs(q_f.size());
      for (int h = 0; h < n_heads; ++h) {
        simd().bf16_pair_form(q_f.data() + h * dim, dim, q_pairs.data() + h * dim);
      }
      simd().dot_rows_bf16(ptrs.data(), n_rows, q_pairs.data(), n_heads, dim, s.data(), lds);
      for (int h = 0; h < n_heads; ++h) {
        for (int j = 0; j < n_rows; ++j) {
          double expected = 0.0;
          for (int d = 0; d < dim; ++d) {
            expected += static_cast<double>(q_f[static_cast<size_t>(h * dim + d)]) *
                        BF16ToF32(ptrs[static_cast<size_t>(j)][d]);
          }
          EXPECT_NEAR(s[static_cast<size_t>(h * lds + j)], expected, 1e-5 * dim) << h << " " << j;
        }
        EXPECT_EQ(s[static_cast<size_t>(h * lds + n_rows)], -1.0f);  // untouched padding
      }
      // P V over the same row pointers (dv = dim) against the f32 kernel on decoded rows.
      const std::vector<float> p = Random(static_cast<size_t>(n_heads * n_rows), 43);
      std::vector<float> v_f(static_cast<size_t>(n_rows * dim));
      for (int j = 0; j < n_rows; ++j) {
        for (int d = 0; d < dim; ++d)
          v_f[static_cast<size_t>(j * dim + d)] = BF16ToF32(ptrs[static_cast<size_t>(j)][d]);
      }
      std::vector<float> a = Random(static_cast<size_t>(n_heads * dim), 44), b = a;
      simd().pv_accumulate_bf16(p.data(), n_heads, n_rows, ptrs.data(), dim, a.data());
      scalar().pv_accumulate(p.data(), n_heads, n_rows, v_f.data(), dim, dim, b.data());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << n_heads << " " << dim;
    }
  }
}

// bf16_pair_columns (where a table has it) is Bf16PairColumns bitwise, which is its definition
// word by word: whole 16 x 16 blocks and partial ones (37 rows, 40 or 16 pairs), strided rows and
// output, rounding ties, NaN, inf and denormals; words past n_rows are left alone.
TEST_P(SimdAttentionTest, Bf16PairColumnsKernelIsBitwiseTheDefinition) {
  const int64_t rows = 37, ld_out = 41, ldx = 87;
  std::vector<float> x = Random(static_cast<size_t>(rows * ldx), 13);
  auto bits_to_float = [](uint32_t bits) { return std::bit_cast<float>(bits); };
  x[5] = bits_to_float(0x3f808000);   // a tie, rounds down to even (0x3f80)
  x[6] = bits_to_float(0x3f818000);   // a tie, rounds up to even (0x3f82)
  x[40] = bits_to_float(0x7fc00001);  // NaN
  x[41] = -INFINITY;
  x[100] = bits_to_float(0x00012345);            // denormal
  x[20 * ldx + 33] = bits_to_float(0xff800001);  // signalling NaN, in the second block of pairs
  for (const int64_t pairs : {int64_t{40}, int64_t{16}}) {
    std::vector<uint32_t> expected(static_cast<size_t>(pairs * ld_out), 7u);
    for (int64_t c = 0; c < pairs; ++c) {
      for (int64_t r = 0; r < rows; ++r) {
        expected[static_cast<size_t>(c * ld_out + r)] =
            BF16Pair(F32ToBF16(x[static_cast<size_t>(r * ldx + 2 * c)]),
                     F32ToBF16(x[static_cast<size_t>(r * ldx + 2 * c + 1)]));
      }
    }
    std::vector<uint32_t> reference(expected.size(), 7u);
    Bf16PairColumns(x.data(), ldx, rows, pairs, reference.data(), ld_out);
    EXPECT_EQ(reference, expected) << pairs;
    std::vector<uint32_t> got(expected.size(), 7u);
    Bf16PairColumnsWith(simd(), x.data(), ldx, rows, pairs, got.data(), ld_out);
    EXPECT_EQ(got, expected) << pairs;
  }
}

// bf16_pair_rows (where a table has it) is Bf16PairRows bitwise, which is its definition word by
// word: a whole vector and a tail (n = 37), NaN, inf and a tie, and the missing second row (b
// null: zero high halves); words past n are left alone.
TEST_P(SimdAttentionTest, Bf16PairRowsKernelIsBitwiseTheDefinition) {
  const int64_t n = 37;
  std::vector<float> a = Random(static_cast<size_t>(n), 14);
  const std::vector<float> b = Random(static_cast<size_t>(n), 15);
  a[3] = std::bit_cast<float>(uint32_t{0x7fc00001});  // NaN
  a[17] = INFINITY;
  a[36] = std::bit_cast<float>(uint32_t{0x3f818000});  // a tie
  for (const bool second : {true, false}) {
    std::vector<uint32_t> expected(static_cast<size_t>(n + 3), 7u);
    for (int64_t c = 0; c < n; ++c) {
      expected[static_cast<size_t>(c)] =
          BF16Pair(F32ToBF16(a[static_cast<size_t>(c)]),
                   second ? F32ToBF16(b[static_cast<size_t>(c)]) : uint16_t{0});
    }
    std::vector<uint32_t> reference(expected.size(), 7u);
    Bf16PairRows(a.data(), second ? b.data() : nullptr, n, reference.data());
    EXPECT_EQ(reference, expected) << second;
    std::vector<uint32_t> got(expected.size(), 7u);
    Bf16PairRowsWith(simd(), a.data(), second ? b.data() : nullptr, n, got.data());
    EXPECT_EQ(got, expected) << second;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, SimdAttentionTest, ::testing::ValuesIn(SimdIsas()),
                         IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SimdAttentionTest);

}  // namespace
}  // namespace mlarun
