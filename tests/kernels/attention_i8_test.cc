// Attention over int8 cache rows read in place (dot_rows_i8, pv_accumulate_i8 of the AVX512-BF16
// table): each kernel against a double-precision computation on its quantised inputs, and the
// whole attention against the decode-to-float path of the scalar table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/attention.h"

namespace mlarun {
namespace {

constexpr int kBody = 512;
constexpr int kTail = 64;
constexpr int kGroup = 128;

KvRowFormat MlaInt8Row() {
  return {.dtype = DType::kI8,
          .n_head_kv = 1,
          .head_dim_k = kBody + kTail,
          .head_dim_v = kBody,
          .v_aliases_k = true,
          .rope_tail_dim = kTail,
          .quant_group = kGroup};
}

AttentionSpec MlaSpec(int n_heads) {
  return {.n_head_q = n_heads,
          .n_head_kv = 1,
          .head_dim_qk = kBody + kTail,
          .head_dim_v = kBody,
          .v_aliases_k = true,
          .scale = 0.08f};
}

const KernelTable* Fast() {
  if (!IsaSupported(Isa::kAvx512Bf16)) return nullptr;
  return &GetKernelTable(Isa::kAvx512Bf16);
}

// `n` encoded rows of random values (magnitudes varying by group, as real latents do).
std::vector<uint8_t> RandomRows(int n, uint64_t seed, const KvRowFormat& f = MlaInt8Row()) {
  Rng rng(seed);
  std::vector<uint8_t> rows(static_cast<size_t>(n) * f.RowBytes());
  std::vector<float> values(static_cast<size_t>(f.head_dim_k));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = (1.0f + std::floor(static_cast<float>(i) / kGroup)) * rng.NextSymmetric();
    EncodeKvRow(f, values.data(), rows.data() + static_cast<size_t>(r) * f.RowBytes());
  }
  return rows;
}

std::vector<float> Decoded(const std::vector<uint8_t>& rows, int r,
                           const KvRowFormat& f = MlaInt8Row()) {
  std::vector<float> v(static_cast<size_t>(f.head_dim_k));
  DecodeKvRow(f, rows.data() + static_cast<size_t>(r) * f.RowBytes(), v.data());
  return v;
}

// The query value the kernels use for head h, column c: body int8 * scale, tail bf16.
double PreparedQuery(const I8Query& q, int h, int c) {
  const size_t hb = static_cast<size_t>(h / 16);
  const size_t lane = static_cast<size_t>(h % 16);
  if (c >= q.body_dim) {
    const int t = c - q.body_dim;
    // I8Query's tail layout: like the body's, pairs of bf16 pairs.
    const uint32_t pair =
        q.tail[((hb * static_cast<size_t>(q.TailQuads()) + static_cast<size_t>(t / 4)) * 2 +
                lane / 8) *
                   16 +
               2 * (lane % 8) + static_cast<size_t>(t / 2 % 2)];
    return BF16ToF32(static_cast<uint16_t>(t % 2 == 0 ? pair & 0xffffu : pair >> 16));
  }
  // I8Query's body layout (kernel_table.h): two 16-word vectors per pair of quads, heads 0-7 and
  // 8-15 of the block, two words per head.
  const size_t pair_of_quads =
      hb * static_cast<size_t>(q.body_dim / 8) + static_cast<size_t>(c / 8);
  const int32_t word =
      q.body[(pair_of_quads * 2 + lane / 8) * 16 + 2 * (lane % 8) + static_cast<size_t>(c / 4 % 2)];
  const auto v = static_cast<int8_t>(static_cast<uint32_t>(word) >> (8 * (c % 4)));
  const int n_groups = q.body_dim / q.quant_group;
  return v * static_cast<double>(
                 q.scales[(hb * static_cast<size_t>(n_groups) + c / q.quant_group) * 16 + lane]);
}

TEST(AttentionI8Test, PreparedQueryIsTheQueryQuantisedPerGroup) {
  const AttentionSpec spec = MlaSpec(32);
  Rng rng(3);
  std::vector<float> q(static_cast<size_t>(32 * (kBody + kTail)));
  for (float& v : q) v = 4.0f * rng.NextSymmetric();
  I8QueryBuffer prepared;
  PrepareI8Query(GetKernelTable(Isa::kScalar), spec, MlaInt8Row(), q.data(), &prepared);
  for (int h = 0; h < 32; ++h) {
    for (int c = 0; c < kBody + kTail; ++c) {
      const double want = q[static_cast<size_t>(h) * (kBody + kTail) + static_cast<size_t>(c)];
      // Half a step of the group's scale (max |q| <= 4 over 127 steps), or bf16's 2^-9.
      const double tol = c < kBody ? 0.5 * 4.0 / 127.0 + 1e-6 : std::fabs(want) / 256.0;
      ASSERT_NEAR(PreparedQuery(prepared.view, h, c), want, tol) << "head " << h << " col " << c;
    }
  }
  // The offsets are -128 times each group's integer sum.
  for (int g = 0; g < kBody / kGroup; ++g) {
    int64_t sum = 0;
    for (int c = g * kGroup; c < (g + 1) * kGroup; ++c) {
      sum += std::lround(PreparedQuery(prepared.view, 5, c) / prepared.view.scales[g * 16 + 5]);
    }
    EXPECT_EQ(prepared.view.offsets[g * 16 + 5], -128 * sum);
  }
}

TEST(AttentionI8Test, ScoresMatchDoubleOnQuantisedInputs) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->dot_rows_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  for (const int n_rows : {1, 8, 37}) {
    const AttentionSpec spec = MlaSpec(32);
    const std::vector<uint8_t> rows = RandomRows(n_rows, 5 + n_rows);
    Rng rng(9);
    std::vector<float> q(static_cast<size_t>(32 * (kBody + kTail)));
    for (float& v : q) v = rng.NextSymmetric();
    I8QueryBuffer prepared;
    PrepareI8Query(*k, spec, MlaInt8Row(), q.data(), &prepared);
    std::vector<const uint8_t*> ptrs;
    for (int r = n_rows - 1; r >= 0; --r)  // any row order: rows are given by pointer
      ptrs.push_back(rows.data() + static_cast<size_t>(r) * MlaInt8Row().RowBytes());
    const int lds = n_rows + 3;
    std::vector<float> s(static_cast<size_t>(32 * lds), -7.0f);
    k->dot_rows_i8(ptrs.data(), n_rows, prepared.view, s.data(), lds);
    for (int j = 0; j < n_rows; ++j) {
      const std::vector<float> row = Decoded(rows, n_rows - 1 - j);
      for (int h = 0; h < 32; ++h) {
        double want = 0;
        double magnitude = 0;
        for (int c = 0; c < kBody + kTail; ++c) {
          const double term = PreparedQuery(prepared.view, h, c) * row[static_cast<size_t>(c)];
          want += term;
          magnitude += std::fabs(term);
        }
        ASSERT_NEAR(s[static_cast<size_t>(h * lds + j)], want, 1e-5 * magnitude + 1e-6)
            << n_rows << " rows, row " << j << " head " << h;
      }
    }
    for (int h = 0; h < 32; ++h) {  // nothing written past n_rows
      for (int j = n_rows; j < lds; ++j) ASSERT_EQ(s[static_cast<size_t>(h * lds + j)], -7.0f);
    }
  }
}

// The scores over tails of 64 values, 6 (an odd number of bf16 pairs: the kernel's last step
// reads one pair of the row) and 2, over row counts around the kernel's 8-row steps.
TEST(AttentionI8Test, ScoresMatchDoubleForEveryTailLength) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->dot_rows_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  for (const int tail : {kTail, 6, 2}) {
    KvRowFormat f = MlaInt8Row();
    f.head_dim_k = kBody + tail;
    f.rope_tail_dim = tail;
    AttentionSpec spec = MlaSpec(16);
    spec.head_dim_qk = f.head_dim_k;
    for (const int n_rows : {1, 7, 8, 21}) {
      const std::vector<uint8_t> rows = RandomRows(n_rows, 40 + n_rows, f);
      Rng rng(41);
      std::vector<float> q(static_cast<size_t>(16 * f.head_dim_k));
      for (float& v : q) v = rng.NextSymmetric();
      I8QueryBuffer prepared;
      PrepareI8Query(*k, spec, f, q.data(), &prepared);
      std::vector<const uint8_t*> ptrs(static_cast<size_t>(n_rows));
      for (int r = 0; r < n_rows; ++r)
        ptrs[static_cast<size_t>(r)] = rows.data() + static_cast<size_t>(r) * f.RowBytes();
      std::vector<float> s(static_cast<size_t>(16 * n_rows));
      k->dot_rows_i8(ptrs.data(), n_rows, prepared.view, s.data(), n_rows);
      for (int j = 0; j < n_rows; ++j) {
        const std::vector<float> row = Decoded(rows, j, f);
        for (int h = 0; h < 16; ++h) {
          double want = 0;
          double magnitude = 0;
          for (int c = 0; c < f.head_dim_k; ++c) {
            const double term = PreparedQuery(prepared.view, h, c) * row[static_cast<size_t>(c)];
            want += term;
            magnitude += std::fabs(term);
          }
          ASSERT_NEAR(s[static_cast<size_t>(h * n_rows + j)], want, 1e-5 * magnitude + 1e-6)
              << "tail " << tail << ", " << n_rows << " rows, row " << j << " head " << h;
        }
      }
    }
  }
}

TEST(AttentionI8Test, PvMatchesDoubleWithinInt16Steps) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->pv_accumulate_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  for (const int n_heads : {16, 9}) {
    for (const int n_rows : {1, 2, 31, 256}) {
      const std::vector<uint8_t> rows = RandomRows(n_rows, 17 + n_rows);
      Rng rng(21);
      const int ldp = n_rows + 5;
      std::vector<float> p(static_cast<size_t>(n_heads * ldp));
      for (float& v : p) v = rng.NextUniform() * rng.NextUniform();
      std::vector<float> acc(static_cast<size_t>(n_heads * kBody));
      for (float& v : acc) v = rng.NextSymmetric();
      std::vector<double> want(acc.begin(), acc.end());
      std::vector<double> bound(acc.size(), 1e-5);
      std::vector<const uint8_t*> ptrs;
      ptrs.reserve(static_cast<size_t>(n_rows));
      for (int r = 0; r < n_rows; ++r)
        ptrs.push_back(rows.data() + static_cast<size_t>(r) * MlaInt8Row().RowBytes());
      for (int h = 0; h < n_heads; ++h) {
        for (int g = 0; g < kBody / kGroup; ++g) {
          // p * row scale is rounded to a step of (the largest row scale / 32767): at most half a
          // step per product, times |v_int| <= 127.
          double top = 0;
          for (int j = 0; j < n_rows; ++j) {
            float scale;
            std::memcpy(&scale, ptrs[static_cast<size_t>(j)] + kBody + int64_t{4} * g,
                        sizeof(scale));
            top = std::max(top, static_cast<double>(scale));
          }
          for (int c = g * kGroup; c < (g + 1) * kGroup; ++c) {
            bound[static_cast<size_t>(h) * kBody + static_cast<size_t>(c)] +=
                n_rows * 0.5 * top / 32767.0 * 127.0;
          }
        }
        for (int j = 0; j < n_rows; ++j) {
          const std::vector<float> row = Decoded(rows, j);
          for (int c = 0; c < kBody; ++c) {
            want[static_cast<size_t>(h) * kBody + static_cast<size_t>(c)] +=
                static_cast<double>(p[static_cast<size_t>(h) * ldp + static_cast<size_t>(j)]) *
                row[static_cast<size_t>(c)];
          }
        }
      }
      k->pv_accumulate_i8(p.data(), ldp, n_heads, n_rows, ptrs.data(), kBody, kGroup, kBody,
                          acc.data());
      for (size_t i = 0; i < acc.size(); ++i) {
        ASSERT_NEAR(acc[i], want[i], bound[i]) << n_heads << " heads, " << n_rows << " rows, head "
                                               << i / kBody << " col " << i % kBody;
      }
    }
  }
}

// The kernel's arithmetic written out in scalar code: q = the probability times the row's step
// (row scale * (32767 / the group's largest row scale)), rounded to nearest even and clamped to
// [0, 32767]; the exact integer sum of q times the stored value - 128 per column; acc += float(sum)
// * (largest scale / 32767). Whatever instructions compute the integer sum (vpdpwssd on int16
// pairs; vpdpbusd on q's two bytes was tried, docs/performance.md), the result must be bitwise
// this.
void PvInt16Model(const float* p, int ldp, int n_heads, int n_rows, const uint8_t* const* rows,
                  int dv, float* acc) {
  for (int c0 = 0; c0 < dv; c0 += kGroup) {
    const int g = c0 / kGroup;
    float top = 0.0f;
    std::vector<float> scales(static_cast<size_t>(n_rows));
    for (int j = 0; j < n_rows; ++j) {
      std::memcpy(&scales[static_cast<size_t>(j)], rows[j] + kBody + int64_t{4} * g, sizeof(float));
      top = std::max(top, scales[static_cast<size_t>(j)]);
    }
    const float inv = top > 0.0f ? 32767.0f / top : 0.0f;
    const float unit = top / 32767.0f;
    for (int h = 0; h < n_heads; ++h) {
      for (int c = c0; c < std::min(dv, c0 + kGroup); ++c) {
        int64_t sum = 0;
        for (int j = 0; j < n_rows; ++j) {
          const float step = scales[static_cast<size_t>(j)] * inv;
          const float scaled = p[static_cast<size_t>(h) * ldp + static_cast<size_t>(j)] * step;
          const int64_t q = std::clamp<int64_t>(std::llrintf(scaled), 0, 32767);
          sum += q * (static_cast<int64_t>(rows[j][c]) - 128);
        }
        float& out = acc[static_cast<size_t>(h) * dv + static_cast<size_t>(c)];
        out += static_cast<float>(static_cast<int32_t>(sum)) * unit;
      }
    }
  }
}

TEST(AttentionI8Test, PvIsBitwiseTheExactInt16Products) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->pv_accumulate_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  struct Case {
    int n_heads, n_rows, dv;
  };
  for (const Case c : {Case{16, 256, 512}, Case{16, 512, 512}, Case{9, 31, 448}, Case{1, 1, 64},
                       Case{3, 5, 192}, Case{16, 3, 512}, Case{2, 130, 320}, Case{43, 77, 512}}) {
    const std::vector<uint8_t> rows = RandomRows(c.n_rows, 5 + c.n_rows);
    std::vector<const uint8_t*> ptrs;
    ptrs.reserve(static_cast<size_t>(c.n_rows));
    for (int r = 0; r < c.n_rows; ++r)
      ptrs.push_back(rows.data() + static_cast<size_t>(r) * MlaInt8Row().RowBytes());
    Rng rng(c.n_rows + c.dv);
    const int ldp = c.n_rows + 3;
    std::vector<float> p(static_cast<size_t>(c.n_heads * ldp));
    for (float& v : p) v = rng.NextUniform();
    p[0] = 1.0f;  // the largest probability
    std::vector<float> acc(static_cast<size_t>(c.n_heads * c.dv));
    for (float& v : acc) v = rng.NextSymmetric();
    std::vector<float> want = acc;
    PvInt16Model(p.data(), ldp, c.n_heads, c.n_rows, ptrs.data(), c.dv, want.data());
    k->pv_accumulate_i8(p.data(), ldp, c.n_heads, c.n_rows, ptrs.data(), kBody, kGroup, c.dv,
                        acc.data());
    for (size_t i = 0; i < acc.size(); ++i) {
      ASSERT_EQ(acc[i], want[i]) << c.n_heads << " heads, " << c.n_rows << " rows, dv " << c.dv
                                 << ", head " << i / c.dv << " col " << i % c.dv;
    }
  }
}

TEST(AttentionI8Test, PvExtremeSumsStayExact) {
  // 512 rows (the most one call takes) of -128 (stored byte 0) or +127 (255) at equal scales, every
  // probability 1: every q is 32767 and the sums are 32767 * -128 * 512 = -2,147,418,112, 65,535
  // from int32's limit, and 32767 * 127 * 512.
  const KernelTable* k = Fast();
  if (k == nullptr || k->pv_accumulate_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const KvRowFormat f = MlaInt8Row();
  constexpr int kRows = 512;
  for (const uint8_t stored : {uint8_t{0}, uint8_t{255}}) {
    std::vector<uint8_t> rows(static_cast<size_t>(kRows) * f.RowBytes(), stored);
    std::vector<const uint8_t*> ptrs;
    ptrs.reserve(kRows);
    for (int r = 0; r < kRows; ++r) {
      uint8_t* row = rows.data() + static_cast<size_t>(r) * f.RowBytes();
      const float scale = 0.5f;
      for (int g = 0; g < kBody / kGroup; ++g)
        std::memcpy(row + kBody + int64_t{4} * g, &scale, sizeof(scale));
      ptrs.push_back(row);
    }
    const std::vector<float> p(size_t{2} * kRows, 1.0f);
    std::vector<float> acc(size_t{2} * kBody, 0.0f);
    k->pv_accumulate_i8(p.data(), kRows, 2, kRows, ptrs.data(), kBody, kGroup, kBody, acc.data());
    const int64_t value = static_cast<int64_t>(stored) - 128;
    const float want =
        static_cast<float>(static_cast<int32_t>(32767 * value * kRows)) * (0.5f / 32767.0f);
    for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(acc[i], want) << "stored " << int{stored};
  }
}

TEST(AttentionI8Test, AttendMatchesDecodedRowsAndThreadCounts) {
  const KernelTable* k = Fast();
  if (k == nullptr || !UsesI8Kernels(*k, MlaSpec(16), MlaInt8Row())) {
    GTEST_SKIP() << "no int8-row kernels on this CPU";
  }
  const AttentionSpec spec = MlaSpec(16);
  const KvRowFormat f = MlaInt8Row();
  constexpr int kBlockRows = 64;
  constexpr int kBlocks = 12;
  const std::vector<uint8_t> storage = RandomRows(kBlocks * kBlockRows, 31);
  const KvRows rows{.base = storage.data(), .block_stride = kBlockRows * f.RowBytes(), .format = f};
  // Blocks out of order, partial spans, a biased summary span: 601 rows, three 256-row chunks.
  std::vector<KvSpan> spans;
  for (int b : {7, 2, 9, 0, 11, 4, 5, 1, 3})
    spans.push_back({.block = b, .row_begin = 0, .n_rows = 64});
  spans.push_back({.block = 6, .row_begin = 3, .n_rows = 21, .score_bias = 1.2f});
  spans.push_back({.block = 8, .row_begin = 0, .n_rows = 4});
  Rng rng(41);
  std::vector<float> q(static_cast<size_t>(16 * (kBody + kTail)));
  for (float& v : q) v = 2.0f * rng.NextSymmetric();
  const AttendArgs args{.q = q.data(), .spans = spans};
  std::vector<float> fast(size_t{16} * kBody);
  std::vector<float> exact(size_t{16} * kBody);
  Attend(*k, spec, rows, args, fast.data());
  Attend(GetKernelTable(Isa::kScalar), spec, rows, args, exact.data());
  double max_diff = 0;
  double max_out = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(fast[i]) - exact[i]));
    max_out = std::max(max_out, std::fabs(static_cast<double>(exact[i])));
  }
  // The query's int8 rounding moves each score by ~0.1% of its terms' magnitude; the output by
  // a few thousandths of its scale. A wrong group scale or interleave gives O(1).
  EXPECT_LT(max_diff, 0.01 * max_out) << "max |out| " << max_out;
  for (const int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Exec exec{pool, *k};
    std::vector<float> parallel(fast.size());
    AttendParallel(exec, spec, rows, args, parallel.data());
    EXPECT_EQ(parallel, fast) << threads << " threads";
  }
}

}  // namespace
}  // namespace mlarun
