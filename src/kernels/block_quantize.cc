// Reference quantisers of the GGUF block formats mlarun writes (block_formats.h describes the
// layouts: the published ggml formats of ggml-common.h). The bytes are valid ggml blocks, so
// llama.cpp loads the files; the fitting algorithms below are mlarun's own: small deterministic
// searches over candidate grids, each candidate refined by least squares and judged by its squared
// error after the scales are rounded to what the block stores.
//
// Symbols:
//   x_i           the input values of a block or sub-block (n of them)
//   k_i           a symmetric block's integers in [kmin, kmax] (kmin = -kmax - 1): x ~= d k
//   q_i           an affine block's integers in [0, qmax]: x ~= s q + o (o = m for Q4_1 / Q5_1,
//                 o = -dmin m_j for the K-quants, which need o <= 0)
//   vmax          the value of largest magnitude, with its sign
//   lo, hi        min and max of x
//   err           sum_i (x_i - dequantised_i)^2
// Fits are done in double (no overflow for any finite float input); scales are stored as float16
// saturated at +-65504 (never inf), integers are clamped to their range, so finite input never
// gives NaN or inf; an all-zero block gives zero scales and dequantises to zeros.
#include "kernels/block_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/dtype.h"

namespace mlarun::block_internal {
namespace {

constexpr double kF16Max = 65504.0;  // the largest finite float16

// The float16 bits of v, saturated to the finite range.
uint16_t F16Saturated(double v) {
  return F32ToF16(static_cast<float>(std::clamp(v, -kF16Max, kF16Max)));
}
// The value that storing v as float16 gives back.
double StoredF16(double v) { return F16ToF32(F16Saturated(v)); }

// round(v) (half to even) clamped to [lo, hi]; clamping first keeps huge quotients in range.
// Adding and subtracting 1.5 * 2^52 leaves no fraction bits in the double sum (|v| < 2^51), so
// it rounds as nearbyint does in the default mode, without the library call.
int RoundClamp(double v, int lo, int hi) {
  v = v > lo ? v : lo;  // (NaN would become lo; finite input gives none)
  v = v < hi ? v : hi;
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return static_cast<int>((v + kMagic) - kMagic);
}

// ---------------------------------------------------------------------------------------------
// Symmetric fit: x_i ~= d k_i.

// k_i = round(x_i / d) clamped for one stored scale d; returns err.
double SymmetricError(const float* x, int n, double d, int kmin, int kmax, int8_t* k) {
  double err = 0;
  const double inv = d != 0 ? 1.0 / d : 0.0;
  for (int i = 0; i < n; ++i) {
    k[i] = static_cast<int8_t>(RoundClamp(x[i] * inv, kmin, kmax));
    const double e = x[i] - d * k[i];
    err += e * e;
  }
  return err;
}

// Fits x [n <= 32] with the sign convention of ggml's reference quantisers: d = vmax / t with t
// near kmin < 0, so vmax lands on the negative end k = kmin, which has one step more than the
// positive end (ggml: d = vmax / -8 for Q4_0, / -16 for Q5_0). Candidates t = kmin + c / 5,
// c = 0 ... 10: a slightly smaller step rounds vmax to kmin, kmin + 1 or kmin + 2 but brings
// every other value closer to the grid. Each candidate d is followed by the least-squares scale for
// its integers, d' = sum x k / sum k^2. `store(d)` gives the value d will have once stored (float16
// rounding, or none); errors use stored values, and the best stored d is returned with its
// integers in k. c = 0 is ggml's d, so the error is never above that of ggml's choice of d.
template <typename Store>
double FitSymmetric(const float* x, int n, int kmin, int kmax, Store store, int8_t* k) {
  double vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
  }
  std::fill(k, k + n, 0);
  if (vmax == 0) return 0.0;
  double best_err = std::numeric_limits<double>::infinity(), best_d = 0;
  int8_t trial[kQK];
  auto try_scale = [&](double d) {
    d = store(d);
    const double err = SymmetricError(x, n, d, kmin, kmax, trial);
    if (err < best_err) {
      best_err = err;
      best_d = d;
      std::copy(trial, trial + n, k);
    }
  };
  for (int c = 0; c <= 10; ++c) {
    try_scale(vmax / (kmin + 0.2 * c));
    double sxk = 0, skk = 0;
    for (int i = 0; i < n; ++i) {
      sxk += x[i] * trial[i];
      skk += trial[i] * trial[i];
    }
    if (skk > 0) try_scale(sxk / skk);
  }
  if (best_err == std::numeric_limits<double>::infinity()) return 0.0;  // not reached for finite x
  return best_d;
}

// ---------------------------------------------------------------------------------------------
// Affine fit: x_i ~= s q_i + o, s >= 0.

struct Affine {
  double s = 0;
  double o = 0;
};

// q_i = round((x_i - o) / s) clamped for one stored (s, o); returns err.
double AffineError(const float* x, int n, Affine a, int qmax, uint8_t* q) {
  double err = 0;
  const double inv = a.s > 0 ? 1.0 / a.s : 0.0;
  for (int i = 0; i < n; ++i) {
    q[i] = static_cast<uint8_t>(RoundClamp((x[i] - a.o) * inv, 0, qmax));
    const double e = x[i] - (a.s * q[i] + a.o);
    err += e * e;
  }
  return err;
}

// Narrowings of the min/max grid tried by FitAffine, in steps (0: the plain min/max grid).
constexpr double kAffineDeltas[] = {0.0, 1.0, 2.0, 3.0};
// Least-squares refinements per candidate, at most (they stop once one does not lower err).
constexpr int kAffineRefits = 4;

// Fits x [n <= 32] with integers in [0, qmax]; o <= 0 when `nonpositive_offset` (the K-quants
// store -o as an unsigned min). Candidates: the min/max grid s = (hi - lo) / qmax, o = lo (with
// lo = min(lo, 0) when o <= 0 is required), and grids narrower by delta steps, s = (hi - lo) /
// (qmax + delta), centred (delta / 2 steps clipped at each end: the few extreme values of a
// block cost less than coarser steps for all the others). Each candidate is followed by the
// least-squares (s, o) for its integers (a 2x2 linear regression; with o <= 0 required and the
// regression's o > 0, o = 0 and s = sum x q / sum q^2), repeated with the integers that gives
// while err decreases. `store(&a)` rounds a candidate to its stored values; errors use them.
// delta = 0 is the min/max grid of ggml's Q4_1 / Q5_1 reference quantisers, so the error is
// never above that grid's.
template <typename Store>
Affine FitAffine(const float* x, int n, int qmax, bool nonpositive_offset, Store store,
                 uint8_t* q) {
  double lo = x[0], hi = x[0], sx = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min<double>(lo, x[i]);
    hi = std::max<double>(hi, x[i]);
    sx += x[i];
  }
  if (nonpositive_offset) lo = std::min(lo, 0.0);
  std::fill(q, q + n, 0);
  if (hi == lo) {  // a constant block: o = lo (<= 0 where required, as lo was lowered to 0)
    Affine a{.s = 0, .o = lo};
    store(&a);
    return a;
  }
  double best_err = std::numeric_limits<double>::infinity();
  Affine best;
  uint8_t trial[kQK];
  auto try_fit = [&](Affine a) {  // returns the trial's err; its integers stay in `trial`
    store(&a);
    const double err = AffineError(x, n, a, qmax, trial);
    if (err < best_err) {
      best_err = err;
      best = a;
      std::copy(trial, trial + n, q);
    }
    return err;
  };
  for (double delta : kAffineDeltas) {
    const double s = (hi - lo) / (qmax + delta);
    double o = lo + 0.5 * delta * s;
    if (nonpositive_offset) o = std::min(o, 0.0);
    double err = try_fit({.s = s, .o = o});
    // Least squares for the trial's integers, minimising sum (s q_i + o - x_i)^2; the new (s, o)
    // may round some values to other integers, hence the repetitions.
    for (int refit = 0; refit < kAffineRefits; ++refit) {
      double sq = 0, sqq = 0, sqx = 0;
      for (int i = 0; i < n; ++i) {
        sq += trial[i];
        sqq += trial[i] * trial[i];
        sqx += trial[i] * static_cast<double>(x[i]);
      }
      const double det = n * sqq - sq * sq;
      if (det <= 0) break;  // all integers equal
      Affine ls{.s = (n * sqx - sq * sx) / det, .o = 0};
      ls.o = (sx - ls.s * sq) / n;
      if (nonpositive_offset && ls.o > 0) ls = {.s = sqx / sqq, .o = 0};
      if (!(ls.s > 0)) break;
      const double refit_err = try_fit(ls);
      if (!(refit_err < err)) break;
      err = refit_err;
    }
  }
  return best;
}

void StoreAffineF16(Affine* a) {
  a->s = StoredF16(a->s);
  a->o = StoredF16(a->o);
}
double StoreF16Scale(double d) { return StoredF16(d); }
void KeepAffine(Affine*) {}
double KeepScale(double d) { return d; }

// ---------------------------------------------------------------------------------------------
// 32-value blocks.

// 4-bit values: byte i holds value i (low nibble) and value i + 16 (high nibble).
void Pack4(const uint8_t* q, uint8_t* qs) {
  for (int i = 0; i < kQK / 2; ++i) {
    qs[i] = static_cast<uint8_t>((q[i] & 15) | (q[i + 16] & 15) << 4);
  }
}
// 5-bit values: Pack4's nibbles, bit 4 of value i in bit i of the little-endian 32-bit qh.
void Pack5(const uint8_t* q, uint8_t* qh, uint8_t* qs) {
  Pack4(q, qs);
  std::memset(qh, 0, 4);
  for (int i = 0; i < kQK; ++i) qh[i / 8] |= static_cast<uint8_t>(((q[i] >> 4) & 1) << (i % 8));
}

// Q4_0 / Q5_0: FitSymmetric with float16 d, q = k - kmin.
template <int kBits>
void QuantizeSymmetric32(const float* x, int64_t n, void* blocks, int bytes) {
  MLARUN_CHECK(n % kQK == 0);
  constexpr int kMin = -(1 << (kBits - 1)), kMax = (1 << (kBits - 1)) - 1;
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, p += bytes) {
    int8_t k[kQK];
    const double d = FitSymmetric(x, kQK, kMin, kMax, StoreF16Scale, k);
    StoreU16(p, F16Saturated(d));
    uint8_t q[kQK];
    for (int i = 0; i < kQK; ++i) q[i] = static_cast<uint8_t>(k[i] - kMin);
    if (kBits == 4) {
      Pack4(q, p + kQ4_0Qs);
    } else {
      Pack5(q, p + kQ5_0Qh, p + kQ5_0Qs);
    }
  }
}

// Q4_1 / Q5_1: FitAffine with float16 d = s and m = o.
template <int kBits>
void QuantizeAffine32(const float* x, int64_t n, void* blocks, int bytes) {
  MLARUN_CHECK(n % kQK == 0);
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, p += bytes) {
    uint8_t q[kQK];
    const Affine a = FitAffine(x, kQK, (1 << kBits) - 1, false, StoreAffineF16, q);
    StoreU16(p, F16Saturated(a.s));
    StoreU16(p + 2, F16Saturated(a.o));
    if (kBits == 4) {
      Pack4(q, p + kQ4_1Qs);
    } else {
      Pack5(q, p + kQ5_1Qh, p + kQ5_1Qs);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// K-quants.

// The 12 scale bytes of Q4_K / Q5_K from 6-bit sc[8], m[8] (the inverse of UnpackScaleMinK):
// for j < 4, s[j] = sc_j | (sc_{j+4} >> 4) << 6, s[j + 4] = m_j | (m_{j+4} >> 4) << 6 and
// s[j + 8] = (sc_{j+4} & 15) | (m_{j+4} & 15) << 4.
void PackScalesK(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

// Given float16 values d and dmin, chooses each sub-block j's 6-bit sc_j and m_j among the
// integers within `radius` of round(s_j / d) and round(mn_j / dmin) by the squared error as
// the decoder sees it: w = (d sc) q - (dmin m), q = round((x + dmin m) / (d sc)) clamped to
// [0, qmax]. Writes sc, m, q [256]; returns the super-block's err.
double ChooseScalesK(const float* x, const double* s, const double* mn, float d, float dmin,
                     int qmax, int radius, int* sc, int* m, uint8_t* q) {
  double total = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + kQK * j;
    const int sc0 = d > 0 ? RoundClamp(s[j] / d, 0, 63) : 0;
    const int m0 = dmin > 0 ? RoundClamp(mn[j] / dmin, 0, 63) : 0;
    double best_err = std::numeric_limits<double>::infinity();
    for (int sc_try = std::max(sc0 - radius, 0); sc_try <= std::min(sc0 + radius, 63); ++sc_try) {
      for (int m_try = std::max(m0 - radius, 0); m_try <= std::min(m0 + radius, 63); ++m_try) {
        // The decoder's float values: scale d sc, offset -(dmin m).
        const float scale = d * static_cast<float>(sc_try);
        const float offset = -(dmin * static_cast<float>(m_try));
        const double inv = scale > 0 ? 1.0 / scale : 0.0;
        uint8_t trial[kQK];
        double err = 0;
        for (int i = 0; i < kQK; ++i) {
          trial[i] = static_cast<uint8_t>(RoundClamp((xj[i] - offset) * inv, 0, qmax));
          const double e = xj[i] - (scale * static_cast<float>(trial[i]) + offset);
          err += e * e;
        }
        if (err < best_err) {
          best_err = err;
          sc[j] = sc_try;
          m[j] = m_try;
          std::copy(trial, trial + kQK, q + kQK * j);
        }
      }
    }
    total += best_err;
  }
  return total;
}

// One Q4_K / Q5_K super-block x [256]: writes d, dmin and the 12 scale bytes at p and the
// integers q [256] (0 ... qmax). Each sub-block j of 32 gets a float affine fit
// x ~= s_j q + o_j (FitAffine, o_j <= 0, mn_j = -o_j); then
//   1. d = max s_j / 63, dmin = max mn_j / 63 (float16), sc_j, m_j, q by ChooseScalesK
//      (radius 1);
//   2. with those integers fixed, x_i ~= d (sc_j q_i) - dmin m_j is linear in (d, dmin): their
//      least-squares values (a 2x2 system over the 256 values; dmin >= 0), rounded to float16,
//      and ChooseScalesK again with them (radius 2);
// and keeps the better of the two.
void QuantizeSuperBlockK(const float* x, int qmax, uint8_t* p, uint8_t* q) {
  double s[8], mn[8];
  double max_s = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    const Affine a = FitAffine(x + kQK * j, kQK, qmax, true, KeepAffine, q + kQK * j);
    s[j] = a.s;
    mn[j] = -a.o;
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, mn[j]);
  }
  uint16_t d_bits = F16Saturated(max_s / 63), dmin_bits = F16Saturated(max_m / 63);
  int sc[8], m[8];
  const double err =
      ChooseScalesK(x, s, mn, F16ToF32(d_bits), F16ToF32(dmin_bits), qmax, 1, sc, m, q);
  // Least squares for (d, dmin) with a_i = sc_j q_i, b_i = m_j: minimise
  // sum (d a_i - dmin b_i - x_i)^2, i.e. d saa - dmin sab = sax, d sab - dmin sbb = sbx.
  double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const double a = sc[i / kQK] * q[i], b = m[i / kQK];
    saa += a * a;
    sab += a * b;
    sbb += b * b;
    sax += a * x[i];
    sbx += b * x[i];
  }
  const double det = saa * sbb - sab * sab;
  double d2 = 0, dmin2 = -1;
  if (det > 0) {
    d2 = (sax * sbb - sab * sbx) / det;
    dmin2 = (sab * sax - saa * sbx) / det;
  }
  if (!(dmin2 >= 0)) {  // no solution with dmin >= 0 (or all m_j zero): d alone, dmin = 0
    d2 = saa > 0 ? sax / saa : 0;
    dmin2 = 0;
  }
  if (d2 > 0) {
    const uint16_t d2_bits = F16Saturated(d2), dmin2_bits = F16Saturated(dmin2);
    int sc2[8], m2[8];
    uint8_t q2[kQK_K];
    // s_j and mn_j are fixed; only the integers they round to change with d and dmin.
    const double err2 =
        ChooseScalesK(x, s, mn, F16ToF32(d2_bits), F16ToF32(dmin2_bits), qmax, 2, sc2, m2, q2);
    if (err2 < err) {
      d_bits = d2_bits;
      dmin_bits = dmin2_bits;
      std::copy(sc2, sc2 + 8, sc);
      std::copy(m2, m2 + 8, m);
      std::copy(q2, q2 + kQK_K, q);
    }
  }
  StoreU16(p, d_bits);
  StoreU16(p + 2, dmin_bits);
  PackScalesK(sc, m, p + kKScales);
}

}  // namespace

void QuantizeF32(const float* x, int64_t n, void* blocks) {
  std::memcpy(blocks, x, static_cast<size_t>(n) * sizeof(float));
}

// Saturates at +-65504 rather than rounding large values to infinity.
void QuantizeF16(const float* x, int64_t n, void* blocks) {
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t i = 0; i < n; ++i) StoreU16(p + 2 * i, F16Saturated(x[i]));
}

// Rounds to nearest even; the few floats above the largest finite bf16 (which round to
// infinity) saturate to it.
void QuantizeBF16(const float* x, int64_t n, void* blocks) {
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = F32ToBF16(x[i]);
    if ((h & 0x7fffu) == 0x7f80u) h = static_cast<uint16_t>((h & 0x8000u) | 0x7f7fu);
    StoreU16(p + 2 * i, h);
  }
}

void QuantizeQ4_0(const float* x, int64_t n, void* blocks) {
  QuantizeSymmetric32<4>(x, n, blocks, kQ4_0Bytes);
}
void QuantizeQ5_0(const float* x, int64_t n, void* blocks) {
  QuantizeSymmetric32<5>(x, n, blocks, kQ5_0Bytes);
}
void QuantizeQ4_1(const float* x, int64_t n, void* blocks) {
  QuantizeAffine32<4>(x, n, blocks, kQ4_1Bytes);
}
void QuantizeQ5_1(const float* x, int64_t n, void* blocks) {
  QuantizeAffine32<5>(x, n, blocks, kQ5_1Bytes);
}

// Q8_0: d = max|x| / 127 (float16), q = round(x / d) with the stored d, clamped to +-127 (the
// float16 rounding of d may leave max|x| / d just above 127).
void QuantizeQ8_0(const float* x, int64_t n, void* blocks) {
  MLARUN_CHECK(n % kQK == 0);
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, p += kQ8_0Bytes) {
    double amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max<double>(amax, std::fabs(x[i]));
    const uint16_t d_bits = F16Saturated(amax / 127);
    StoreU16(p, d_bits);
    const double d = F16ToF32(d_bits);
    const double inv = d > 0 ? 1.0 / d : 0.0;
    for (int i = 0; i < kQK; ++i) {
      p[kQ8_0Qs + i] = static_cast<uint8_t>(static_cast<int8_t>(RoundClamp(x[i] * inv, -127, 127)));
    }
  }
}

// Q4_K: QuantizeSuperBlockK with 4-bit q; chunk c < 4 of 64 values in qs[32 c + l]: value
// 64 c + l in the low nibble, 64 c + 32 + l in the high nibble.
void QuantizeQ4_K(const float* x, int64_t n, void* blocks) {
  MLARUN_CHECK(n % kQK_K == 0);
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K, p += kQ4_KBytes) {
    uint8_t q[kQK_K];
    QuantizeSuperBlockK(x, 15, p, q);
    uint8_t* qs = p + kQ4_KQs;
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
      }
    }
  }
}

// Q5_K: as Q4_K for the low 4 bits; bit 4 of value 32 j + l (sub-block j) in bit j of qh[l].
void QuantizeQ5_K(const float* x, int64_t n, void* blocks) {
  MLARUN_CHECK(n % kQK_K == 0);
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K, p += kQ5_KBytes) {
    uint8_t q[kQK_K];
    QuantizeSuperBlockK(x, 31, p, q);
    uint8_t* qh = p + kQ5_KQh;
    uint8_t* qs = p + kQ5_KQs;
    std::memset(qh, 0, 32);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        qs[32 * c + l] =
            static_cast<uint8_t>((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4);
      }
    }
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) qh[l] |= static_cast<uint8_t>((q[32 * j + l] >> 4) << j);
    }
  }
}

// Q6_K: each sub-block j of 16 gets a FitSymmetric scale s_j (k in [-32, 31], float); then
// d = max |s_j| / 127 (float16), and each int8 sc_j starts at round(s_j / d) and is chosen among
// its neighbours +-1 by the squared error as stored: w = (d sc_j) k, k = round(x / (d sc_j))
// clamped to [-32, 31], q = k + 32.
void QuantizeQ6_K(const float* x, int64_t n, void* blocks) {
  MLARUN_CHECK(n % kQK_K == 0);
  uint8_t* p = static_cast<uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K, p += kQ6_KBytes) {
    double s[16];
    double max_abs = 0;
    int8_t k[kQK_K];
    for (int j = 0; j < 16; ++j) {
      s[j] = FitSymmetric(x + 16 * j, 16, -32, 31, KeepScale, k + 16 * j);
      max_abs = std::max(max_abs, std::fabs(s[j]));
    }
    const uint16_t d_bits = F16Saturated(max_abs / 127);
    const float d = F16ToF32(d_bits);
    for (int j = 0; j < 16; ++j) {
      const float* xj = x + 16 * j;
      const int sc0 = d > 0 ? RoundClamp(s[j] / d, -127, 127) : 0;
      double best_err = std::numeric_limits<double>::infinity();
      int best_sc = 0;
      // sc0 first, so that it wins ties (d = 0: every candidate gives 0 and sc stays 0).
      for (const int sc : {sc0, sc0 - 1, sc0 + 1}) {
        if (sc < -127 || sc > 127) continue;
        const float scale = d * static_cast<float>(sc);  // the decoder's d sc
        int8_t trial[16];
        const double err = SymmetricError(xj, 16, scale, -32, 31, trial);
        if (err < best_err) {
          best_err = err;
          best_sc = sc;
          std::copy(trial, trial + 16, k + 16 * j);
        }
      }
      p[kQ6_KScales + j] = static_cast<uint8_t>(static_cast<int8_t>(best_sc));
    }
    StoreU16(p + kQ6_KD, d_bits);
    // Half n2 < 2, group g < 4, l < 32: value 128 n2 + 32 g + l; low 4 bits into
    // ql[64 n2 + 32 (g & 1) + l] (low nibble for g < 2, high for g >= 2), high 2 bits into bits
    // 2g, 2g + 1 of qh[32 n2 + l].
    uint8_t* ql = p;
    uint8_t* qh = p + kQ6_KQh;
    std::memset(p, 0, kQ6_KScales);
    for (int n2 = 0; n2 < 2; ++n2) {
      for (int g = 0; g < 4; ++g) {
        for (int l = 0; l < 32; ++l) {
          const int q = k[128 * n2 + 32 * g + l] + 32;
          ql[64 * n2 + 32 * (g & 1) + l] |= static_cast<uint8_t>((q & 15) << (4 * (g >> 1)));
          qh[32 * n2 + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
        }
      }
    }
  }
}

}  // namespace mlarun::block_internal
