// The one attention core against a direct double-precision softmax, over AttentionSpec rows for
// MHA, GQA, MQA and absorbed MLA, with spans (paging, windows, score bias).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"

namespace mlarun {
namespace {

const KernelTable& K() { return GetKernelTable(Isa::kScalar); }

struct Case {
  const char* name;
  AttentionSpec spec;
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

// Direct computation: out[h] = sum_j softmax_j(scale q_h.k_j + bias_j) v_j over listed rows.
std::vector<double> Direct(const AttentionSpec& spec, const KvRowFormat& f,
                           const std::vector<std::vector<float>>& rows,
                           const std::vector<float>& bias, const std::vector<float>& q) {
  const int group = spec.n_head_q / spec.n_head_kv;
  std::vector<double> out(static_cast<size_t>(spec.n_head_q * spec.head_dim_v));
  for (int h = 0; h < spec.n_head_q; ++h) {
    const int g = h / group;
    std::vector<double> scores;
    double max_score = -1e300;
    for (size_t j = 0; j < rows.size(); ++j) {
      double s = 0;
      for (int d = 0; d < spec.head_dim_qk; ++d) {
        s += static_cast<double>(q[static_cast<size_t>(h * spec.head_dim_qk + d)]) *
             rows[j][static_cast<size_t>(g * f.head_dim_k + d)];
      }
      s = s * spec.scale + bias[j];
      scores.push_back(s);
      max_score = std::max(max_score, s);
    }
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    for (size_t j = 0; j < rows.size(); ++j) {
      for (int d = 0; d < spec.head_dim_v; ++d) {
        out[static_cast<size_t>(h * spec.head_dim_v + d)] +=
            scores[j] / sum * rows[j][static_cast<size_t>(f.VOffset(g) + d)];
      }
    }
  }
  return out;
}

TEST_P(AttentionTest, MatchesDirectSoftmaxOverPagedSpans) {
  const AttentionSpec spec = GetParam().spec;
  const KvRowFormat format{.dtype = DType::kF32,
                           .n_head_kv = spec.n_head_kv,
                           .head_dim_k = spec.head_dim_qk,
                           .head_dim_v = spec.head_dim_v,
                           .v_aliases_k = spec.v_aliases_k};
  const int block_size = 4;
  const int n_blocks = 5;
  Rng rng(7);
  std::vector<float> storage(static_cast<size_t>(n_blocks * block_size * format.ValuesPerRow()));
  for (float& v : storage) v = rng.NextSymmetric();
  std::vector<float> q(static_cast<size_t>(spec.n_head_q * spec.head_dim_qk));
  for (float& v : q) v = 2.0f * rng.NextSymmetric();
  const KvRows rows{.base = reinterpret_cast<const uint8_t*>(storage.data()),
                    .block_stride = static_cast<size_t>(block_size) * format.RowBytes(),
                    .format = format};
  // Blocks out of order, a partial block, and a biased span (a summary).
  const std::vector<KvSpan> spans = {{.block = 3, .row_begin = 0, .n_rows = 4},
                                     {.block = 1, .row_begin = 1, .n_rows = 2},
                                     {.block = 4, .row_begin = 2, .n_rows = 2, .score_bias = 1.5f}};
  std::vector<std::vector<float>> listed;
  std::vector<float> bias;
  for (const KvSpan& s : spans) {
    for (int r = 0; r < s.n_rows; ++r) {
      const float* row = reinterpret_cast<const float*>(rows.Row(s.block, s.row_begin + r));
      listed.emplace_back(row, row + format.ValuesPerRow());
      bias.push_back(s.score_bias);
    }
  }
  const std::vector<double> expected = Direct(spec, format, listed, bias, q);
  std::vector<float> out(expected.size());
  Attend(K(), spec, rows, {.q = q.data(), .spans = spans}, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;

  // Split context: two partial states merged == one pass.
  std::vector<float> state_a(static_cast<size_t>(spec.n_head_q * (2 + spec.head_dim_v)));
  std::vector<float> state_b(state_a.size());
  const int nh = spec.n_head_q;
  AttentionPartial a{state_a.data(), state_a.data() + nh, state_a.data() + 2 * nh};
  AttentionPartial b{state_b.data(), state_b.data() + nh, state_b.data() + 2 * nh};
  ResetPartial(spec, a);
  ResetPartial(spec, b);
  AttendPartial(K(), spec, rows, {.q = q.data(), .spans = std::span(spans).subspan(0, 1)}, a);
  AttendPartial(K(), spec, rows, {.q = q.data(), .spans = std::span(spans).subspan(1)}, b);
  MergePartial(K(), spec, a, b);
  std::vector<float> merged(out.size());
  FinishPartial(spec, a, 0, -1, merged.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(merged[i], expected[i], 1e-5) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Specs, AttentionTest,
    ::testing::Values(
        Case{"mha",
             {.n_head_q = 8, .n_head_kv = 8, .head_dim_qk = 16, .head_dim_v = 16, .scale = 0.25f}},
        Case{"gqa",
             {.n_head_q = 8, .n_head_kv = 2, .head_dim_qk = 16, .head_dim_v = 16, .scale = 0.25f}},
        Case{"mqa",
             {.n_head_q = 8, .n_head_kv = 1, .head_dim_qk = 16, .head_dim_v = 16, .scale = 0.25f}},
        Case{"mla_absorbed",
             {.n_head_q = 4,
              .n_head_kv = 1,
              .head_dim_qk = 40,
              .head_dim_v = 32,
              .v_aliases_k = true,
              .scale = 0.2f}},
        Case{"mla_naive",
             {.n_head_q = 4, .n_head_kv = 4, .head_dim_qk = 24, .head_dim_v = 16, .scale = 0.2f}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(AttentionInvariantTest, GqaEqualsMhaWithRepeatedKvHeads) {
  // GQA with 2 kv heads for 4 query heads == MHA whose kv heads repeat them (0,0,1,1).
  const int hd = 8;
  Rng rng(3);
  const int n_rows = 6;
  const KvRowFormat gqa{.n_head_kv = 2, .head_dim_k = hd, .head_dim_v = hd};
  const KvRowFormat mha{.n_head_kv = 4, .head_dim_k = hd, .head_dim_v = hd};
  std::vector<float> gqa_rows(static_cast<size_t>(n_rows * gqa.ValuesPerRow()));
  for (float& v : gqa_rows) v = rng.NextSymmetric();
  std::vector<float> mha_rows(static_cast<size_t>(n_rows * mha.ValuesPerRow()));
  for (int r = 0; r < n_rows; ++r) {
    for (int h = 0; h < 4; ++h) {
      for (int d = 0; d < hd; ++d) {
        mha_rows[static_cast<size_t>(r * 64 + h * hd + d)] =
            gqa_rows[static_cast<size_t>(r * 32 + (h / 2) * hd + d)];
        mha_rows[static_cast<size_t>(r * 64 + 32 + h * hd + d)] =
            gqa_rows[static_cast<size_t>(r * 32 + 16 + (h / 2) * hd + d)];
      }
    }
  }
  std::vector<float> q(4 * hd);
  for (float& v : q) v = rng.NextSymmetric();
  const std::vector<KvSpan> spans = {{.block = 0, .row_begin = 0, .n_rows = n_rows}};
  std::vector<float> out_gqa(4 * hd), out_mha(4 * hd);
  Attend(
      K(), {.n_head_q = 4, .n_head_kv = 2, .head_dim_qk = hd, .head_dim_v = hd, .scale = 0.3f},
      {.base = reinterpret_cast<const uint8_t*>(gqa_rows.data()), .block_stride = 0, .format = gqa},
      {.q = q.data(), .spans = spans}, out_gqa.data());
  Attend(
      K(), {.n_head_q = 4, .n_head_kv = 4, .head_dim_qk = hd, .head_dim_v = hd, .scale = 0.3f},
      {.base = reinterpret_cast<const uint8_t*>(mha_rows.data()), .block_stride = 0, .format = mha},
      {.q = q.data(), .spans = spans}, out_mha.data());
  EXPECT_EQ(out_gqa, out_mha);
}

TEST(AttentionInvariantTest, LongContextsSplitIntoChunksGiveTheSameResultOnAnyThreadCount) {
  // 1000 rows: four pieces of AttentionChunkRows(1000) = 256 rows merged in order;
  // AttendParallel == Attend bitwise, and both match one unsplit pass closely.
  ASSERT_EQ(AttentionChunkRows(1000), 256);
  const KvRowFormat f{.dtype = DType::kBF16,
                      .n_head_kv = 1,
                      .head_dim_k = 40,
                      .head_dim_v = 32,
                      .v_aliases_k = true};
  const AttentionSpec spec{.n_head_q = 4,
                           .n_head_kv = 1,
                           .head_dim_qk = 40,
                           .head_dim_v = 32,
                           .v_aliases_k = true,
                           .scale = 0.3f};
  const int n_rows = 1000;
  Rng rng(21);
  std::vector<uint8_t> storage(static_cast<size_t>(n_rows) * f.RowBytes());
  std::vector<float> row(40);
  for (int r = 0; r < n_rows; ++r) {
    for (float& v : row) v = rng.NextSymmetric();
    EncodeKvRow(f, row.data(), storage.data() + static_cast<size_t>(r) * f.RowBytes());
  }
  std::vector<float> q(4 * 40);
  for (float& v : q) v = 2.0f * rng.NextSymmetric();
  const KvRows rows{.base = storage.data(), .block_stride = 100 * f.RowBytes(), .format = f};
  std::vector<KvSpan> spans;
  for (int b = 0; b < 10; ++b)
    spans.push_back(
        {.block = b, .row_begin = 0, .n_rows = 100, .score_bias = b == 3 ? 0.7f : 0.0f});
  std::vector<float> serial(4 * 32), parallel(4 * 32), unsplit(4 * 32);
  Attend(K(), spec, rows, {.q = q.data(), .spans = spans}, serial.data());
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Exec exec{pool, K()};
    AttendParallel(exec, spec, rows, {.q = q.data(), .spans = spans}, parallel.data());
    EXPECT_EQ(parallel, serial) << threads;
  }
  std::vector<float> state(4 * 34);
  AttentionPartial p{state.data(), state.data() + 4, state.data() + 8};
  ResetPartial(spec, p);
  AttendPartial(K(), spec, rows, {.q = q.data(), .spans = spans}, p);
  FinishPartial(spec, p, 0, -1, unsplit.data());
  for (size_t i = 0; i < serial.size(); ++i) EXPECT_NEAR(serial[i], unsplit[i], 1e-5);
}

TEST(AttentionInvariantTest, ChunkRowsAreAQuarterOfTheContextIn64RowStepsWithinBounds) {
  EXPECT_EQ(AttentionChunkRows(0), 256);
  EXPECT_EQ(AttentionChunkRows(601), 256);    // 151 -> 192 -> at least 256
  EXPECT_EQ(AttentionChunkRows(3000), 768);   // 750 -> 768: 4 pieces
  EXPECT_EQ(AttentionChunkRows(4096), 1024);  // 4 pieces
  EXPECT_EQ(AttentionChunkRows(4097), 1024);  // 1,025 -> 1,088 -> at most 1,024: 5 pieces
  EXPECT_EQ(AttentionChunkRows(1 << 20), 1024);
}

TEST(AttentionInvariantTest, OneHotScoresSelectOneRow) {
  // A 1e4-scaled match makes the softmax one-hot: the output is that row's value.
  const KvRowFormat f{.n_head_kv = 1, .head_dim_k = 4, .head_dim_v = 4};
  std::vector<float> rows = {1, 0, 0, 0, 10, 11, 12, 13,   // row 0
                             0, 1, 0, 0, 20, 21, 22, 23,   // row 1
                             0, 0, 1, 0, 30, 31, 32, 33};  // row 2
  const std::vector<float> q = {0, 1e4f, 0, 0};
  std::vector<float> out(4);
  const std::vector<KvSpan> spans = {{.block = 0, .row_begin = 0, .n_rows = 3}};
  Attend(K(), {.n_head_q = 1, .n_head_kv = 1, .head_dim_qk = 4, .head_dim_v = 4, .scale = 1.0f},
         {.base = reinterpret_cast<const uint8_t*>(rows.data()), .format = f},
         {.q = q.data(), .spans = spans}, out.data());
  EXPECT_EQ(out, (std::vector<float>{20, 21, 22, 23}));
}

}  // namespace
}  // namespace mlarun
