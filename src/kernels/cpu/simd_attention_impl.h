// The attention kernels over cached rows of simd_impl.h (P V accumulation, bf16-row scores,
// the pair form of a query), split from it to keep each file short. Included by simd_impl.h
// inside a translation unit compiled for the ISA, after F, kW, kPairStep and the exp kernels.

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/row_prefetch.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"

namespace mlarun::SIMD_NAMESPACE {

// Register-blocked P V: for NS consecutive V-wide slices of the output, NH heads' accumulators
// stay in registers while the rows stream past (NS loads of v_j and NH broadcasts of p[j, h] per
// NS x NH multiply-adds). `load_v(j, c)` returns values [c, c + kW) of row j; `load_tail(j, c, n)`
// the last n < kW, zero-filled (kTail: NS = 1). p: [n_rows, n_heads].
template <int NH, int NS, bool kTail, typename LoadV, typename LoadTailV>
inline void PvSlice(const float* p, int64_t n_heads, int n_rows, LoadV load_v, LoadTailV load_tail,
                    int64_t dv, int64_t c, float* acc, int tail) {
  static_assert(!kTail || NS == 1);
  F a[NH][NS];
  Unrolled<NH>([&](auto h) {
    Unrolled<NS>([&](auto s) {
      if constexpr (kTail) {
        a[h][s] = V::LoadTail(acc + h * dv + c, tail);
      } else {
        a[h][s] = V::Load(acc + h * dv + c + s * kW);
      }
    });
  });
  for (int64_t j = 0; j < n_rows; ++j) {
    F vj[NS];
    Unrolled<NS>([&](auto s) {
      if constexpr (kTail) {
        vj[s] = load_tail(j, c, tail);
      } else {
        vj[s] = load_v(j, c + s * kW);
      }
    });
    const float* pj = p + j * n_heads;
    Unrolled<NH>([&](auto h) {
      const F ph = V::Set1(pj[h]);
      Unrolled<NS>([&](auto s) { a[h][s] = V::Fma(ph, vj[s], a[h][s]); });
    });
  }
  Unrolled<NH>([&](auto h) {
    Unrolled<NS>([&](auto s) {
      if constexpr (kTail) {
        alignas(64) float tmp[kW];
        V::Store(tmp, a[h][s]);
        for (int i = 0; i < tail; ++i) acc[h * dv + c + i] = tmp[i];
      } else {
        V::Store(acc + h * dv + c + s * kW, a[h][s]);
      }
    });
  });
}

// Columns [c_begin, dv) of every head.
template <typename LoadV, typename LoadTailV>
void PvAccumulateWith(const float* p, int n_heads, int n_rows, LoadV load_v, LoadTailV load_tail,
                      int dv, float* acc, int64_t c_begin = 0) {
  auto heads = [&](auto nh, auto ns, int64_t h) {
    constexpr int kNh = decltype(nh)::value;
    constexpr int kNs = decltype(ns)::value;
    int64_t c = c_begin;
    for (; c + int64_t{kNs} * kW <= dv; c += int64_t{kNs} * kW) {
      PvSlice<kNh, kNs, false>(p + h, n_heads, n_rows, load_v, load_tail, dv, c, acc + h * dv, kW);
    }
    for (; c + kW <= dv; c += kW) {
      PvSlice<kNh, 1, false>(p + h, n_heads, n_rows, load_v, load_tail, dv, c, acc + h * dv, kW);
    }
    if (c < dv) {
      PvSlice<kNh, 1, true>(p + h, n_heads, n_rows, load_v, load_tail, dv, c, acc + h * dv,
                            static_cast<int>(dv - c));
    }
  };
  using One = std::integral_constant<int, 1>;
  int64_t h = 0;
  for (; h + V::kPvHeads <= n_heads; h += V::kPvHeads) {
    heads(std::integral_constant<int, V::kPvHeads>{}, std::integral_constant<int, V::kPvSlices>{},
          h);
  }
  for (; h + 4 <= n_heads; h += 4) heads(std::integral_constant<int, 4>{}, One{}, h);
  for (; h < n_heads; ++h) heads(One{}, One{}, h);
}

void PvAccumulate(const float* p, int n_heads, int n_rows, const float* v, int64_t v_stride, int dv,
                  float* acc) {
  PvAccumulateWith(
      p, n_heads, n_rows, [&](int64_t j, int64_t c) { return V::Load(v + j * v_stride + c); },
      [&](int64_t j, int64_t c, int n) { return V::LoadTail(v + j * v_stride + c, n); }, dv, acc);
}

// P V over bf16 rows, 2 kW columns [c, c + 2 kW) of NH heads: one load of 16-bit pairs per row
// gives the even and the odd columns as two float vectors (one integer op each, LoadBf16Pairs)
// where widening loads take two ops per kW values. The accumulators are split into even and odd
// columns when loaded and merged back when stored; each element is the same FMA chain over the
// rows as in PvSlice (bitwise the same result).
// (VT is V, as a template parameter so that ISAs without Deinterleave / Interleave never
// instantiate it.)
template <int NH, typename VT>
inline void PvPairSlice(const float* p, int64_t n_heads, int n_rows, const uint16_t* const* v_rows,
                        int64_t dv, int64_t c, float* acc) {
  F even[NH];
  F odd[NH];
  Unrolled<NH>([&](auto h) {
    VT::Deinterleave(V::Load(acc + h * dv + c), V::Load(acc + h * dv + c + kW), &even[h], &odd[h]);
  });
  for (int64_t j = 0; j < n_rows; ++j) {
    F v_even;
    F v_odd;
    V::LoadBf16Pairs(v_rows[j] + c, &v_even, &v_odd);
    const float* pj = p + j * n_heads;
    Unrolled<NH>([&](auto h) {
      const F ph = V::Set1(pj[h]);
      even[h] = V::Fma(ph, v_even, even[h]);
      odd[h] = V::Fma(ph, v_odd, odd[h]);
    });
  }
  Unrolled<NH>([&](auto h) {
    F lo;
    F hi;
    VT::Interleave(even[h], odd[h], &lo, &hi);
    V::Store(acc + h * dv + c, lo);
    V::Store(acc + h * dv + c + kW, hi);
  });
}

template <typename VT>
void PvAccumulateBf16With(const float* p, int n_heads, int n_rows, const uint16_t* const* v_rows,
                          int dv, float* acc) {
  // Pair form where the ISA asks for it (V::kPvPairHeads > 0: AVX2, in-cache P V 15.6 -> 19.4
  // GMAC/s per core on a 2-core AMD EPYC VM, where the FMA peak is ~20); the widening form for
  // the rest.
  const int64_t pair_cols = VT::kPvPairHeads > 0 ? dv / kPairStep * kPairStep : 0;
  if constexpr (VT::kPvPairHeads > 0) {
    auto heads = [&](auto nh, int64_t h) {
      for (int64_t c = 0; c < pair_cols; c += kPairStep) {
        PvPairSlice<decltype(nh)::value, VT>(p + h, n_heads, n_rows, v_rows, dv, c, acc + h * dv);
      }
    };
    int64_t h = 0;
    for (; h + VT::kPvPairHeads <= n_heads; h += VT::kPvPairHeads)
      heads(std::integral_constant<int, VT::kPvPairHeads>{}, h);
    for (; h < n_heads; ++h) heads(std::integral_constant<int, 1>{}, h);
  }
  if (pair_cols < dv) {
    PvAccumulateWith(
        p, n_heads, n_rows, [&](int64_t j, int64_t c) { return V::LoadBf16(v_rows[j] + c); },
        [&](int64_t j, int64_t c, int n) { return V::LoadBf16Tail(v_rows[j] + c, n); }, dv, acc,
        pair_cols);
  }
}

void PvAccumulateBf16(const float* p, int n_heads, int n_rows, const uint16_t* const* v_rows,
                      int dv, float* acc) {
  PvAccumulateBf16With<V>(p, n_heads, n_rows, v_rows, dv, acc);
}

// Pair form of a float vector for dot products with bf16 rows loaded as pairs: per step of
// 2 kW values, the kW even-indexed values, then the kW odd-indexed ones; a shorter tail as is.
template <typename VT>
void Bf16PairFormWith(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  if constexpr (VT::kHasDeinterleave) {
    for (; i + kPairStep <= n; i += kPairStep) {
      F even;
      F odd;
      VT::Deinterleave(V::Load(x + i), V::Load(x + i + kW), &even, &odd);
      V::Store(out + i, even);
      V::Store(out + i + kW, odd);
    }
  }
  for (; i + kPairStep <= n; i += kPairStep) {
    for (int64_t l = 0; l < kW; ++l) {
      out[i + l] = x[i + 2 * l];
      out[i + kW + l] = x[i + 2 * l + 1];
    }
  }
  for (; i < n; ++i) out[i] = x[i];
}

void Bf16PairForm(const float* x, int64_t n, float* out) { Bf16PairFormWith<V>(x, n, out); }

// s[h * lds + r] = rows[r] . q[h] for MR rows and NH heads; q in pair form. The bf16 rows are
// widened exactly to float and multiplied in float32 (two FMAs per 2 kW values).
// `next` (MR rows, or null) are prefetched as this tile reads its own, a line per row and step.
template <int MR, int NH>
inline void PairTile(const uint16_t* const* rows, const uint16_t* const* next, const float* q,
                     int64_t dim, float* s, int64_t lds) {
  // Constant indices throughout (unrolled.h): with loops over r and h GCC kept acc on the stack.
  F acc[MR][NH];
  Unrolled<MR>([&](auto r) { Unrolled<NH>([&](auto h) { acc[r][h] = V::Zero(); }); });
  int64_t d = 0;
  for (; d + kPairStep <= dim; d += kPairStep) {
    if (next != nullptr) PrefetchRowLine<MR>(next, d);
    F q_even[NH];
    F q_odd[NH];
    Unrolled<NH>([&](auto h) {
      q_even[h] = V::Load(q + h * dim + d);
      q_odd[h] = V::Load(q + h * dim + d + kW);
    });
    Unrolled<MR>([&](auto r) {
      F even;
      F odd;
      V::LoadBf16Pairs(rows[r] + d, &even, &odd);
      Unrolled<NH>([&](auto h) {
        acc[r][h] = V::Fma(even, q_even[h], acc[r][h]);
        acc[r][h] = V::Fma(odd, q_odd[h], acc[r][h]);
      });
    });
  }
  Unrolled<MR>([&](auto r) {
    Unrolled<NH>([&](auto h) {
      float sum = V::Reduce(acc[r][h]);
      for (int64_t e = d; e < dim; ++e) sum += BF16ToF32(rows[r][e]) * q[h * dim + e];
      s[h * lds + r] = sum;
    });
  });
}

void DotRowsBf16(const uint16_t* const* rows, int n_rows, const float* q, int n_heads, int dim,
                 float* s, int lds) {
  // Rows outer (each tile of rows is used by every head while in L1), heads inner; the next
  // tile's rows are prefetched by the first head tile a line per row and step where a full next
  // tile follows, else at once (row_prefetch.h; against a burst per tile:
  // BM_AbsorbedMlaDecode/avx512 @4096 with the cache evicted 1.36 -> 1.22-1.25 ms in 4 of 4
  // alternating pairs, unchanged in cache).
  const int64_t row_bytes = static_cast<int64_t>(dim) * 2;
  auto heads = [&](auto mr, int r) {
    constexpr int kMr = decltype(mr)::value;
    const bool spread = r + 2 * kMr <= n_rows;
    if (!spread) PrefetchRowsAtOnce(rows, r + kMr, std::min(n_rows, r + 2 * kMr), row_bytes);
    ForEachTokenTile<V::kScoreHeads>(n_heads, [&](auto nh, int64_t h) {
      PairTile<kMr, decltype(nh)::value>(rows + r, spread && h == 0 ? rows + r + kMr : nullptr,
                                         q + h * dim, dim, s + h * lds + r, lds);
    });
  };
  int r = 0;
  for (; r + V::kScoreRows <= n_rows; r += V::kScoreRows)
    heads(std::integral_constant<int, V::kScoreRows>{}, r);
  for (; r < n_rows; ++r) heads(std::integral_constant<int, 1>{}, r);
}

}  // namespace mlarun::SIMD_NAMESPACE
