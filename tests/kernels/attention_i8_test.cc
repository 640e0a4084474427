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

// The int8 value of I8Query's word layout (kernel_table.h: two 16-word vectors per pair of quads,
// heads 0-7 and 8-15 of the block, two words per head) for head h and value c of a group whose
// first pair of quads is `first` within the head block's `pairs`.
int QueryInt8(const int32_t* words, int pairs, int first, int h, int c) {
  const size_t hb = static_cast<size_t>(h / 16);
  const size_t lane = static_cast<size_t>(h % 16);
  const size_t pair_of_quads =
      hb * static_cast<size_t>(pairs) + static_cast<size_t>(first) + static_cast<size_t>(c / 8);
  const int32_t word =
      words[(pair_of_quads * 2 + lane / 8) * 16 + 2 * (lane % 8) + static_cast<size_t>(c / 4 % 2)];
  return static_cast<int8_t>(static_cast<uint32_t>(word) >> (8 * (c % 4)));
}

// Value c of tail group g of head h (int8).
int TailInt8(const I8Query& q, int h, int g, int c) {
  return QueryInt8(q.tail, q.tail_groups * q.TailQuadPairs(), g * q.TailQuadPairs(), h, c);
}

// The query value the kernels use for head h, column c: int8 times its group's scale (the tail's
// groups like the body's).
double PreparedQuery(const I8Query& q, int h, int c) {
  const size_t hb = static_cast<size_t>(h / 16);
  const size_t lane = static_cast<size_t>(h % 16);
  if (c >= q.body_dim) {
    const int g = (c - q.body_dim) / q.tail_group;
    const size_t at =
        (hb * static_cast<size_t>(q.tail_groups) + static_cast<size_t>(g)) * 16 + lane;
    return TailInt8(q, h, g, (c - q.body_dim) % q.tail_group) *
           static_cast<double>(q.tail_scales[at]);
  }
  const int n_groups = q.body_dim / q.quant_group;
  return QueryInt8(q.body, q.body_dim / 8, 0, h, c) *
         static_cast<double>(
             q.scales[(hb * static_cast<size_t>(n_groups) + c / q.quant_group) * 16 + lane]);
}

TEST(AttentionI8Test, PreparedQueryIsTheQueryQuantisedPerGroup) {
  const AttentionSpec spec = MlaSpec(32);
  Rng rng(3);
  std::vector<float> q(static_cast<size_t>(32 * (kBody + kTail)));
  for (float& v : q) v = 4.0f * rng.NextSymmetric();
  for (const Isa isa : {Isa::kScalar, Isa::kAvx512Bf16}) {
    if (!IsaSupported(isa)) continue;
    I8QueryBuffer prepared;
    PrepareI8Query(GetKernelTable(isa), spec, MlaInt8Row(), q.data(), &prepared);
    const I8Query& view = prepared.view;
    ASSERT_EQ(view.tail_groups, 2);
    ASSERT_EQ(view.tail_group, kTail / 2);
    for (int h = 0; h < 32; ++h) {
      for (int c = 0; c < kBody + kTail; ++c) {
        const double want = q[static_cast<size_t>(h) * (kBody + kTail) + static_cast<size_t>(c)];
        // Half a step of the group's scale (max |q| <= 4 over 127 steps; the tail's too).
        ASSERT_NEAR(PreparedQuery(view, h, c), want, 0.5 * 4.0 / 127.0 + 1e-6)
            << "head " << h << " col " << c;
      }
    }
    // The offsets are -128 times each group's integer sum, the tail groups' too.
    for (int g = 0; g < kBody / kGroup; ++g) {
      int64_t sum = 0;
      for (int c = g * kGroup; c < (g + 1) * kGroup; ++c)
        sum += QueryInt8(view.body, kBody / 8, 0, 5, c);
      EXPECT_EQ(view.offsets[g * 16 + 5], -128 * sum);
    }
    for (const int h : {5, 21}) {
      for (int g = 0; g < 2; ++g) {
        const size_t at = static_cast<size_t>((h / 16 * 2 + g) * 16 + h % 16);
        int64_t sum = 0;
        float max_abs = 0;
        for (int c = 0; c < kTail / 2; ++c) {
          sum += TailInt8(view, h, g, c);
          max_abs = std::max(
              max_abs,
              std::fabs(q[static_cast<size_t>(h * (kBody + kTail) + kBody + g * kTail / 2 + c)]));
        }
        EXPECT_EQ(view.tail_offsets[at], -128 * sum) << "head " << h << " group " << g;
        EXPECT_EQ(view.tail_scales[at], max_abs / 127.0f) << "head " << h << " group " << g;
      }
    }
  }
}

// A tail of 6 values: two groups of 3, each one partial pair of quads, the query zero past them.
TEST(AttentionI8Test, PreparedShortTailGroupsAreZeroPadded) {
  KvRowFormat f = MlaInt8Row();
  f.head_dim_k = kBody + 6;
  f.rope_tail_dim = 6;
  AttentionSpec spec = MlaSpec(16);
  spec.head_dim_qk = f.head_dim_k;
  std::vector<float> q(static_cast<size_t>(16 * f.head_dim_k), 0.0f);
  for (int h = 0; h < 16; ++h) {
    for (int c = 0; c < 6; ++c) q[static_cast<size_t>(h * f.head_dim_k + kBody + c)] = c - 2.5f;
  }
  for (const Isa isa : {Isa::kScalar, Isa::kAvx512Bf16}) {
    if (!IsaSupported(isa)) continue;
    I8QueryBuffer prepared;
    PrepareI8Query(GetKernelTable(isa), spec, f, q.data(), &prepared);
    ASSERT_EQ(prepared.view.tail_group, 3);
    ASSERT_EQ(prepared.view.TailQuadPairs(), 1);
    // -2.5, -1.5, -0.5 | 0.5, 1.5, 2.5, each group at scale 2.5 / 127: -127, -76.2, -25.4 | 25.4,
    // 76.2, 127, rounded; then zeros.
    const int want[2][8] = {{-127, -76, -25, 0, 0, 0, 0, 0}, {25, 76, 127, 0, 0, 0, 0, 0}};
    for (int h = 0; h < 16; ++h) {
      for (int g = 0; g < 2; ++g) {
        for (int c = 0; c < 8; ++c) EXPECT_EQ(TailInt8(prepared.view, h, g, c), want[g][c]);
        EXPECT_EQ(prepared.view.tail_offsets[g * 16 + h], g == 0 ? -128 * -228 : -128 * 228);
      }
    }
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

// The scores over tails of 64 values, 16, 12 and 6 (the last pair of quads partial: the kernel
// reads only the tail's bytes of it) and 2, over row counts around the kernel's 8-row steps. Each
// row is an allocation of its own, RowBytes long, so that AddressSanitizer sees any read past a
// row.
TEST(AttentionI8Test, ScoresMatchDoubleForEveryTailLength) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->dot_rows_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  for (const int tail : {kTail, 16, 12, 6, 2, 3}) {
    KvRowFormat f = MlaInt8Row();
    f.head_dim_k = kBody + tail;
    f.rope_tail_dim = tail;
    AttentionSpec spec = MlaSpec(16);
    spec.head_dim_qk = f.head_dim_k;
    for (const int n_rows : {1, 7, 8, 21}) {
      const std::vector<uint8_t> rows = RandomRows(n_rows, 40 + n_rows, f);
      std::vector<std::vector<uint8_t>> own(static_cast<size_t>(n_rows));
      std::vector<const uint8_t*> ptrs(static_cast<size_t>(n_rows));
      for (int r = 0; r < n_rows; ++r) {
        const auto begin = rows.begin() + static_cast<ptrdiff_t>(r * f.RowBytes());
        own[static_cast<size_t>(r)].assign(begin, begin + static_cast<ptrdiff_t>(f.RowBytes()));
        ptrs[static_cast<size_t>(r)] = own[static_cast<size_t>(r)].data();
      }
      Rng rng(41);
      std::vector<float> q(static_cast<size_t>(16 * f.head_dim_k));
      for (float& v : q) v = rng.NextSymmetric();
      I8QueryBuffer prepared;
      PrepareI8Query(*k, spec, f, q.data(), &prepared);
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

// The tail's part of a score alone (a zero query body): per tail group the exact int32 sum of its
// products times the two group scales, accumulated in float32 by fused multiply-adds, group after
// group. Every stored tail byte is 128 + 3 (value 3, scale 0.5 in both groups) against a query
// tail of 64 values 1/64 .. 64/64.
TEST(AttentionI8Test, TailScoreIsEachGroupsIntegerSumTimesBothScales) {
  const KernelTable* k = Fast();
  if (k == nullptr || k->dot_rows_i8 == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const KvRowFormat f = MlaInt8Row();
  std::vector<uint8_t> row(f.RowBytes(), 128);  // body values 0
  const float zero = 0.0f;
  for (int g = 0; g < 4; ++g) std::memcpy(row.data() + kBody + 4 * g, &zero, sizeof(zero));
  std::fill_n(row.begin() + f.TailOffset(), kTail, uint8_t{131});
  const float half = 0.5f;
  for (int g = 0; g < 2; ++g) std::memcpy(row.data() + f.TailScaleOffset() + 4 * g, &half, 4);
  const AttentionSpec spec = MlaSpec(16);
  std::vector<float> q(size_t{16} * (kBody + kTail), 0.0f);
  for (int h = 0; h < 16; ++h) {
    for (int c = 0; c < kTail; ++c)
      q[static_cast<size_t>(h * (kBody + kTail) + kBody + c)] = (c + 1) / 64.0f;
  }
  I8QueryBuffer prepared;
  PrepareI8Query(*k, spec, f, q.data(), &prepared);
  float want = 0.0f;
  for (int g = 0; g < 2; ++g) {
    int64_t sum = 0;
    for (int c = 0; c < kTail / 2; ++c) sum += 3 * TailInt8(prepared.view, 0, g, c);
    want = std::fma(static_cast<float>(sum), prepared.view.tail_scales[g * 16] * 0.5f, want);
  }
  const uint8_t* ptr = row.data();
  std::vector<float> s(16);
  k->dot_rows_i8(&ptr, 1, prepared.view, s.data(), 1);
  for (int h = 0; h < 16; ++h) EXPECT_EQ(s[static_cast<size_t>(h)], want) << "head " << h;
  // Against the unquantised product: at most half a query step (1/64 / 127) per value.
  EXPECT_NEAR(want, 3 * 0.5 * (64 * 65 / 2) / 64.0, kTail * 0.5 / 127.0 * 3 * 0.5);
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
