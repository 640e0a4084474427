// AttendParallel splits a query's context into pieces and, where there are fewer pieces than
// threads, each piece's heads into blocks (kv heads, or blocks of 16 query heads of one kv head).
// Every head's result must be bitwise Attend's on any thread count, for every kernel table this
// CPU has and every row format (each takes a different path: float rows, bf16 rows in place,
// int8 rows decoded or read by the VNNI kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_row.h"

namespace mlarun {
namespace {

AttentionSpec Spec(int n_head_q, const KvRowFormat& f) {
  return {.n_head_q = n_head_q,
          .n_head_kv = f.n_head_kv,
          .head_dim_qk = f.head_dim_k,
          .head_dim_v = f.head_dim_v,
          .v_aliases_k = f.v_aliases_k,
          .scale = 0.05f};
}

TEST(AttendParallelTest, HeadBlocksKeepTheThreadsBusy) {
  const KvRowFormat mla{.dtype = DType::kI8,
                        .head_dim_k = 576,
                        .head_dim_v = 512,
                        .v_aliases_k = true,
                        .rope_tail_dim = 64};
  const AttentionSpec mqa128 = Spec(128, mla);
  const AttendArgs all{};
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 1, 16), 8);  // 8 blocks of 16 heads at most
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 5, 16), 8);  // 40 items, short of 16 x 4
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 4, 2), 1);   // the pieces balance the threads
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 16, 16), 1);
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 3, 2), 2);          // 6 items: 3 each
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 5, 2), 2);          // 10 items: 5 each
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 9, 2), 1);          // 4 or more pieces per thread
  EXPECT_EQ(AttentionHeadBlocks(mqa128, all, 3, 4), 4);          // 12 items: 3 each
  EXPECT_EQ(AttentionHeadBlocks(Spec(16, mla), all, 1, 16), 1);  // one block of 16 heads
  EXPECT_EQ(AttentionHeadBlocks(Spec(40, mla), all, 1, 4), 3);   // 16 + 16 + 8
  const KvRowFormat gqa{.dtype = DType::kBF16, .n_head_kv = 8, .head_dim_k = 64, .head_dim_v = 64};
  EXPECT_EQ(AttentionHeadBlocks(Spec(32, gqa), all, 1, 16), 8);  // one kv head each
  EXPECT_EQ(AttentionHeadBlocks(Spec(32, gqa), all, 2, 5), 5);   // 10 items: 2 each
  EXPECT_EQ(AttentionHeadBlocks(Spec(32, gqa), {.kv_head_begin = 2, .kv_head_end = 4}, 1, 16), 2);
}

struct Case {
  const char* name;
  KvRowFormat format;
  int n_head_q;
};

std::vector<Case> Cases() {
  const KvRowFormat mla_i8{.dtype = DType::kI8,
                           .head_dim_k = 576,
                           .head_dim_v = 512,
                           .v_aliases_k = true,
                           .rope_tail_dim = 64};
  KvRowFormat mla_i8_short_tail = mla_i8;  // a tail ending mid-quad-pair
  mla_i8_short_tail.head_dim_k = 518;
  mla_i8_short_tail.rope_tail_dim = 6;
  KvRowFormat mla_bf16 = mla_i8;
  mla_bf16.dtype = DType::kBF16;
  mla_bf16.rope_tail_dim = 0;
  return {
      {"mla int8 rows, 64 heads", mla_i8, 64},
      {"mla int8 rows, 48 heads", mla_i8, 48},
      {"mla int8 rows, 32 heads, 6 tail values", mla_i8_short_tail, 32},
      {"mla bf16 rows, 40 heads", mla_bf16, 40},
      {"gqa f32 rows",
       {.dtype = DType::kF32, .n_head_kv = 6, .head_dim_k = 32, .head_dim_v = 32},
       24},
      {"gqa bf16 rows",
       {.dtype = DType::kBF16, .n_head_kv = 4, .head_dim_k = 64, .head_dim_v = 64},
       8},
      {"gqa int8 rows",
       {.dtype = DType::kI8, .n_head_kv = 3, .head_dim_k = 64, .head_dim_v = 64, .quant_group = 32},
       9},
  };
}

TEST(AttendParallelTest, EveryHeadSplitIsBitwiseAttend) {
  std::vector<const KernelTable*> tables;
  for (Isa isa : SupportedIsas()) tables.push_back(&GetKernelTable(isa));
  tables.push_back(&FastestKernelTable());
  for (const Case& c : Cases()) {
    const KvRowFormat& f = c.format;
    const AttentionSpec spec = Spec(c.n_head_q, f);
    constexpr int kBlockRows = 64;
    constexpr int kBlocks = 12;
    Rng rng(7);
    std::vector<uint8_t> storage(size_t{kBlocks} * kBlockRows * f.RowBytes());
    std::vector<float> values(static_cast<size_t>(f.ValuesPerRow()));
    for (size_t r = 0; r < size_t{kBlocks} * kBlockRows; ++r) {
      for (float& v : values) v = rng.NextSymmetric();
      EncodeKvRow(f, values.data(), storage.data() + r * f.RowBytes());
    }
    const KvRows rows{
        .base = storage.data(), .block_stride = kBlockRows * f.RowBytes(), .format = f};
    std::vector<float> q(static_cast<size_t>(c.n_head_q) * f.head_dim_k);
    for (float& v : q) v = 2.0f * rng.NextSymmetric();
    // 150 rows (one piece) and 700 rows (three), blocks out of order, a biased span.
    for (const int n_rows : {150, 700}) {
      std::vector<KvSpan> spans;
      int left = n_rows;
      for (int b : {5, 0, 11, 3, 7, 1, 9, 2, 10, 4, 8, 6}) {
        const int take = std::min(left, kBlockRows - 3);
        if (take == 0) break;
        spans.push_back(
            {.block = b, .row_begin = 3, .n_rows = take, .score_bias = b == 3 ? 0.7f : 0.0f});
        left -= take;
      }
      const AttendArgs args{.q = q.data(), .spans = spans};
      const size_t out_size = static_cast<size_t>(c.n_head_q) * f.head_dim_v;
      for (const KernelTable* k : tables) {
        std::vector<float> want(out_size);
        Attend(*k, spec, rows, args, want.data());
        for (const int threads : {2, 3, 5, 8}) {
          ThreadPool pool(threads);
          Exec exec{pool, *k};
          std::vector<float> got(out_size, -1.0f);
          AttendParallel(exec, spec, rows, args, got.data());
          ASSERT_EQ(got, want) << c.name << ", " << n_rows << " rows, " << IsaName(k->isa) << ", "
                               << threads << " threads";
        }
      }
    }
  }
}

TEST(AttendParallelTest, APreparedBf16QueryIsBitwiseTheQueryPreparedPerCall) {
  // Attend and AttendParallel lay the query out once for all pieces of a context
  // (PrepareBf16Query); a piece's state must be what AttendPartial computes preparing it itself:
  // bf16 rows, every table (exact pair form, or rounded with blocks of 16 and the rest), MLA rows
  // with a query head range and GQA rows with a kv head range.
  std::vector<const KernelTable*> tables;
  for (Isa isa : SupportedIsas()) tables.push_back(&GetKernelTable(isa));
  tables.push_back(&FastestKernelTable());
  const KvRowFormat mla{
      .dtype = DType::kBF16, .head_dim_k = 576, .head_dim_v = 512, .v_aliases_k = true};
  const KvRowFormat gqa{.dtype = DType::kBF16, .n_head_kv = 4, .head_dim_k = 64, .head_dim_v = 64};
  struct Selection {
    const KvRowFormat* format;
    int n_head_q;
    AttendArgs heads;
  };
  const Selection selections[] = {
      {&mla, 40, {}},
      {&mla, 40, {.q_head_begin = 16, .q_head_end = 40}},
      {&gqa, 8, {.kv_head_begin = 1, .kv_head_end = 3}},
  };
  for (const Selection& sel : selections) {
    const KvRowFormat& f = *sel.format;
    const AttentionSpec spec = Spec(sel.n_head_q, f);
    constexpr int kRows = 300;
    Rng rng(11);
    std::vector<uint8_t> storage(size_t{kRows} * f.RowBytes());
    std::vector<float> values(static_cast<size_t>(f.ValuesPerRow()));
    for (size_t r = 0; r < size_t{kRows}; ++r) {
      for (float& v : values) v = rng.NextSymmetric();
      EncodeKvRow(f, values.data(), storage.data() + r * f.RowBytes());
    }
    const KvRows rows{.base = storage.data(), .block_stride = 0, .format = f};
    std::vector<float> q(static_cast<size_t>(sel.n_head_q) * f.head_dim_k);
    for (float& v : q) v = 2.0f * rng.NextSymmetric();
    const std::vector<KvSpan> spans{{.block = 0, .row_begin = 0, .n_rows = kRows}};
    AttendArgs args = sel.heads;
    args.q = q.data();
    args.spans = spans;
    const size_t floats = static_cast<size_t>(sel.n_head_q) * (2 + f.head_dim_v);
    for (const KernelTable* k : tables) {
      std::vector<float> own(floats, 0.0f), prepared(floats, 0.0f);
      const ptrdiff_t n = sel.n_head_q;
      const AttentionPartial own_state{own.data(), own.data() + n, own.data() + 2 * n};
      const AttentionPartial prepared_state{prepared.data(), prepared.data() + n,
                                            prepared.data() + 2 * n};
      ResetPartial(spec, own_state);
      ResetPartial(spec, prepared_state);
      AttendPartial(*k, spec, rows, args, own_state);
      Bf16QueryBuffer buffer;
      PrepareBf16Query(*k, spec, f, args, &buffer);
      AttendArgs with_query = args;
      with_query.bf16_query = &buffer;
      AttendPartial(*k, spec, rows, with_query, prepared_state);
      ASSERT_EQ(prepared, own) << IsaName(k->isa) << ", " << sel.n_head_q << " heads";
      EXPECT_GT(*std::max_element(own.begin() + 2 * n, own.end()), 0.0f);  // heads were computed
    }
  }
}

}  // namespace
}  // namespace mlarun
