// detail::MatMulRowsBlocksAvx2 (blocks_simd.h): KernelTable::matmul_rows_blocks of the AVX2
// table, GGUF block formats (block_formats.h) against Q8 activations with vpmaddubsw (u8 weights
// x s8 activations, pairs summed into int16). Compiled with -mavx2 -mfma -mf16c; only called on
// CPUs with them.
//
// Symbols (block_formats.h): per block b of 32 values q_i the weights' small integers, a_i the
// activations, A_b = sum_i a_i = -offsets[b] / 128, xs_b their scale, s_b / m_b the block's
// float scale / offset, I_b the exact int32 sum of the block.
//   y = sum_b xs_b * (s_b * I_b + m_b * A_b)
// Method (as blocks_avx512.cc, at half the width). A row is taken 8 blocks (256 values, a
// "group"; a K-quant super-block) at a time, in four "pairs" of 2 blocks. A pair is two vectors,
// F = the first 16 values of each of its 2 blocks and G = their last 16 (128-bit lane k = block
// k of the pair). With q < 64 and |a| <= 127 the int16 sums of vpmaddubsw(F, aF) +
// vpmaddubsw(G, aG) stay below 4 * 63 * 127 < 2^15, so one vpmaddwd by ones gives each block's
// sum in 4 int32 lanes; two levels of unpack-and-add reduce the group's 4 pairs to one vector of
// the 8 exact I_b, lane L holding block Beta(L) = 2 (L % 4) + L / 4. The float part is vectorised
// across those 8 blocks, acc[L] += xs * (s * float(I + integer offset) [+ m * A]), one
// accumulator per (row, token) and one horizontal sum per row.
// Integer offsets: Q4_0 adds offsets >> 4 = -8 A, Q5_0 offsets >> 3. Q8_0 keeps its signed
// values: vpmaddubsw(|q|, sign(a, q)) (pairs within 2 * 128 * 127 < 2^15), each half widened
// before adding. Q6_K multiplies each half's int16 pair sums by its int8 scale (vpmaddwd) and
// subtracts 32 sum_h sc_h S_h, S_h the sums of the activations' 16-value halves.
// The activations are rearranged once per call and token (PrepareToken), 352 bytes per group;
// token tiles of up to 4 tokens share each decoded pair. Each (row, token) output is the same
// sequence of operations whatever the tile, batch or row range (batch invariant); rows whose
// blocks end within a group run their last group from a zero-padded copy. The first token tile
// over a row prefetches the weights.
// The driver (group step, row tiles, passes, dispatch) is blocks_simd_impl.h's, shared with
// AVX-512.
// Per group of 8 blocks and token on Skylake (llvm-mca): 1 token ~24 (Q4_0, Q4_K), ~26-32 (Q8_0,
// Q6_K, Q4_1), ~34 (Q5_K) and ~45 (Q5_0, Q5_1) cycles; tiles of 4 tokens ~15-20 per token.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/blocks_simd.h"
#include "kernels/quant.h"

namespace mlarun::avx2 {
namespace {

constexpr int kGroupBlocks = 8;
// Per token and group: the 8 arranged value vectors, then xs, aux and halves (32 bytes each).
constexpr int64_t kTokenGroupBytes = 11 * 32;
constexpr int64_t kXsAt = 256, kAuxAt = 288, kHalvesAt = 320;
// Token tiles of up to 4 tokens: llvm-mca (Skylake) per group and token, Q4_0 19.1 cycles with
// 2, 14.8 with 4 (a few spills); Q4_K 19.1 / 16.5.
constexpr int kMaxTileTokens = 4;

// Block of the group in lane L of a reduced vector.
constexpr int Beta(int lane) { return 2 * (lane % 4) + lane / 4; }
alignas(32) constexpr int32_t kBetaLanes[8] = {0, 2, 4, 6, 1, 3, 5, 7};

using VecI = __m256i;
using VecF = __m256;

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i Load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i Broadcast128(const void* p) { return _mm256_broadcastsi128_si256(Load128(p)); }
inline __m256i Nibbles() { return _mm256_set1_epi8(0x0f); }
inline __m256 ZeroF() { return _mm256_setzero_ps(); }

inline __m256i Level1(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
inline __m256i Level2(__m256i a, __m256i b) {
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
// Pairs p0-p3 (128-bit lane k of pair j = block 2 j + k) to one vector: lane L = block Beta(L).
inline __m256i Reduce(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  return Level2(Level1(p0, p1), Level1(p2, p3));
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// 0x10 in byte i of 128-bit lane k where bit 16 kHalf + i of the 32-bit word at the start of
// lane k of h is set.
template <int kHalf>
inline __m256i HighBits(__m256i h) {
  const __m256i rep = _mm256_setr_epi8(
      2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf,
      2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1,
      2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf,
      2 * kHalf, 2 * kHalf, 2 * kHalf, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1,
      2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1, 2 * kHalf + 1);
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(h, rep), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, sel), _mm256_set1_epi8(0x10));
}

// The group's 8 f16 words at byte kOff of each block, in lane order.
template <int kBB, int kOff>
inline __m128i GroupWords(const uint8_t* g) {
  uint64_t lo = 0, hi = 0;
  for (int lane = 0; lane < 4; ++lane) {
    lo |= uint64_t{LoadU16(g + Beta(lane) * kBB + kOff)} << (16 * lane);
    hi |= uint64_t{LoadU16(g + Beta(lane + 4) * kBB + kOff)} << (16 * lane);
  }
  return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
}

enum class Aux {
  kNone,   // I as it is
  kShift,  // I += offsets >> kShift
  kMinA,   // T += m * A, A = -offsets / 128 (stored as float)
};

// Unsigned weights: pairs of products of one block summed in int16, then widened.
inline __m256i DotUnsigned(__m256i f, __m256i g, __m256i af, __m256i ag) {
  const __m256i sum16 = _mm256_add_epi16(_mm256_maddubs_epi16(f, af), _mm256_maddubs_epi16(g, ag));
  return _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
}

// Q4_0, Q4_1, Q5_0, Q5_1 (layouts as in blocks_avx512.cc).
template <int kBB, int kQs, int kQh, bool kHasMin, int kShiftBits>
struct SmallFormat {
  static constexpr int64_t kGroupBytes = int64_t{kGroupBlocks} * kBB;
  static constexpr Aux kAux = kHasMin ? Aux::kMinA : Aux::kShift;
  static constexpr int kShift = kShiftBits;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  struct Scales {
    __m256 s, m;
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    Scales s;
    s.s = _mm256_cvtph_ps(GroupWords<kBB, 0>(g));
    s.m = kHasMin ? _mm256_cvtph_ps(GroupWords<kBB, 2>(g)) : _mm256_setzero_ps();
    return s;
  }
  template <int P>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m256i* f, __m256i* gv) {
    const uint8_t* b = g + 2 * P * kBB;
    const __m256i z = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b + kBB + kQs),
                                          reinterpret_cast<const __m128i*>(b + kQs));
    *f = _mm256_and_si256(z, Nibbles());
    *gv = _mm256_and_si256(_mm256_srli_epi16(z, 4), Nibbles());
    if constexpr (kQh >= 0) {
      // Lane k: block k's 32 high bits (and bytes after them).
      const __m256i h = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b + kBB + kQh),
                                            reinterpret_cast<const __m128i*>(b + kQh));
      *f = _mm256_or_si256(*f, HighBits<0>(h));
      *gv = _mm256_or_si256(*gv, HighBits<1>(h));
    }
  }
  template <int P>
  [[gnu::always_inline]] static __m256i Dot(const Scales&, __m256i f, __m256i g, __m256i af,
                                            __m256i ag) {
    return DotUnsigned(f, g, af, ag);
  }
};

// Q8_0: signed values, |q| against the activations with q's sign.
struct Q8_0 {
  static constexpr int kBB = 34;
  static constexpr int64_t kGroupBytes = int64_t{kGroupBlocks} * kBB;
  static constexpr Aux kAux = Aux::kNone;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  struct Scales {
    __m256 s, m;
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    return {_mm256_cvtph_ps(GroupWords<kBB, 0>(g)), _mm256_setzero_ps()};
  }
  template <int P>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m256i* f, __m256i* gv) {
    const uint8_t* b = g + 2 * P * kBB + 2;
    *f = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b + kBB),
                             reinterpret_cast<const __m128i*>(b));
    *gv = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b + kBB + 16),
                              reinterpret_cast<const __m128i*>(b + 16));
  }
  template <int P>
  [[gnu::always_inline]] static __m256i Dot(const Scales&, __m256i f, __m256i g, __m256i af,
                                            __m256i ag) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i pf = _mm256_maddubs_epi16(_mm256_abs_epi8(f), _mm256_sign_epi8(af, f));
    const __m256i pg = _mm256_maddubs_epi16(_mm256_abs_epi8(g), _mm256_sign_epi8(ag, g));
    return _mm256_add_epi32(_mm256_madd_epi16(pf, ones), _mm256_madd_epi16(pg, ones));
  }
};

// The byte shuffles that unpack the 6-bit scales and mins of a Q4_K / Q5_K super-block from its
// first 16 bytes (f16 d, f16 dmin, scales[12]; block_formats.h): output byte L < 8 is sc_j,
// byte 8 + L m_j, for the sub-block j = Beta(L) in lane L.
struct SixBitShuffle {
  int8_t a[16], b[16], mask_lo[16], mask_hi[16];
};
constexpr SixBitShuffle MakeSixBitShuffle() {
  SixBitShuffle t{};
  for (int p = 0; p < 16; ++p) {
    const int j = Beta(p % 8);
    const bool min = p >= 8;
    // sc_j = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
    // m_j = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4 (s at byte 4)
    t.a[p] = static_cast<int8_t>(4 + (min || j >= 4 ? j + 4 : j));
    t.b[p] = static_cast<int8_t>(j < 4 ? -1 : 4 + (min ? j : j - 4));
    t.mask_lo[p] = static_cast<int8_t>(j < 4 ? 63 : (min ? 0 : 15));
    t.mask_hi[p] = static_cast<int8_t>(j >= 4 && min ? 15 : 0);
  }
  return t;
}

// Q4_K (kQh < 0) and Q5_K; a group is one super-block, pair P its chunk P (sub-blocks 2P, 2P + 1).
template <int kSB, int kQs, int kQh>
struct KFormat {
  static constexpr int64_t kGroupBytes = kSB;
  static constexpr Aux kAux = Aux::kMinA;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  struct Scales {
    __m256 s, m;  // d sc_j and -dmin m_j
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    static constexpr SixBitShuffle kT = MakeSixBitShuffle();
    const __m128i y = Load128(g);
    const __m128i a = _mm_shuffle_epi8(y, Load128(kT.a));
    const __m128i b = _mm_shuffle_epi8(y, Load128(kT.b));
    const __m128i low = _mm_or_si128(_mm_and_si128(a, Load128(kT.mask_lo)),
                                     _mm_and_si128(_mm_srli_epi16(a, 4), Load128(kT.mask_hi)));
    const __m128i r = _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
    // [d, -dmin] from the f16 words 0, 1 of y.
    const __m128 dd = _mm_xor_ps(_mm_cvtph_ps(y), _mm_setr_ps(0.0f, -0.0f, 0.0f, 0.0f));
    return {_mm256_mul_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(r))),
            _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
                          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(r, 8))))};
  }
  template <int P>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m256i* f, __m256i* gv) {
    const __m256i shift = _mm256_setr_epi64x(0, 0, 4, 4);
    const uint8_t* qs = g + kQs + 32 * P;
    *f = _mm256_and_si256(_mm256_srlv_epi64(Broadcast128(qs), shift), Nibbles());
    *gv = _mm256_and_si256(_mm256_srlv_epi64(Broadcast128(qs + 16), shift), Nibbles());
    if constexpr (kQh >= 0) {
      // Sub-block j = 2P + k takes bit j of qh[l]: shift it to bit 4.
      const __m256i hf = Broadcast128(g + kQh), hg = Broadcast128(g + kQh + 16);
      const __m256i bit4 = _mm256_set1_epi8(0x10);
      auto move = [](__m256i h) {
        if constexpr (P == 0) return _mm256_sllv_epi64(h, _mm256_setr_epi64x(4, 4, 3, 3));
        if constexpr (P == 1) return _mm256_sllv_epi64(h, _mm256_setr_epi64x(2, 2, 1, 1));
        if constexpr (P == 2) return _mm256_srlv_epi64(h, _mm256_setr_epi64x(0, 0, 1, 1));
        return _mm256_srlv_epi64(h, _mm256_setr_epi64x(2, 2, 3, 3));
      };
      *f = _mm256_or_si256(*f, _mm256_and_si256(move(hf), bit4));
      *gv = _mm256_or_si256(*gv, _mm256_and_si256(move(hg), bit4));
    }
  }
  template <int P>
  [[gnu::always_inline]] static __m256i Dot(const Scales&, __m256i f, __m256i g, __m256i af,
                                            __m256i ag) {
    return DotUnsigned(f, g, af, ag);
  }
};

// Q6_K: a group is one super-block; pair P = blocks 2 (P % 2), + 1 of half P / 2.
struct Q6_K {
  static constexpr int64_t kGroupBytes = 210;
  static constexpr Aux kAux = Aux::kNone;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = true;
  static constexpr int kMaxTile = kMaxTileTokens;
  struct Scales {
    __m256 s;
    __m256i sc_f[4], sc_g[4];  // per pair: lane k's scale in every int16 word
    __m256i pairs;             // lane L: block Beta(L)'s two scales as int16 words
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    Scales s;
    const __m256i e = _mm256_cvtepi8_epi16(Load128(g + 192));  // word i = sc[i]
    s.pairs = _mm256_permutevar8x32_epi32(e, Load(kBetaLanes));
    // Dwords (sc_i, sc_i): lo = i 0-3 | 8-11, hi = i 4-7 | 12-15.
    const __m256i lo = _mm256_unpacklo_epi16(e, e), hi = _mm256_unpackhi_epi16(e, e);
    for (int p = 0; p < 4; ++p) {
      const int n = p / 2;
      const __m256i src = p % 2 == 0 ? lo : hi;
      s.sc_f[p] =
          _mm256_permutevar8x32_epi32(src, _mm256_setr_epi32(4 * n, 4 * n, 4 * n, 4 * n, 4 * n + 2,
                                                             4 * n + 2, 4 * n + 2, 4 * n + 2));
      s.sc_g[p] = _mm256_permutevar8x32_epi32(
          src, _mm256_setr_epi32(4 * n + 1, 4 * n + 1, 4 * n + 1, 4 * n + 1, 4 * n + 3, 4 * n + 3,
                                 4 * n + 3, 4 * n + 3));
    }
    s.s = _mm256_set1_ps(_cvtsh_ss(LoadU16(g + 208)));
    return s;
  }
  template <int P>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m256i* f, __m256i* gv) {
    const uint8_t* ql = g + 64 * (P / 2);
    const uint8_t* qh = g + 128 + 32 * (P / 2);
    const __m256i qa = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(ql + 32),
                                           reinterpret_cast<const __m128i*>(ql));
    const __m256i qb = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(ql + 48),
                                           reinterpret_cast<const __m128i*>(ql + 16));
    const __m256i hf = Broadcast128(qh), hg = Broadcast128(qh + 16);
    const __m256i bits = _mm256_set1_epi8(0x30);
    if constexpr (P % 2 == 0) {  // blocks l and l + 32: low nibbles, qh bits 0-1 and 2-3
      const __m256i shift = _mm256_setr_epi64x(4, 4, 2, 2);
      *f = _mm256_or_si256(_mm256_and_si256(qa, Nibbles()),
                           _mm256_and_si256(_mm256_sllv_epi64(hf, shift), bits));
      *gv = _mm256_or_si256(_mm256_and_si256(qb, Nibbles()),
                            _mm256_and_si256(_mm256_sllv_epi64(hg, shift), bits));
    } else {  // blocks l + 64 and l + 96: high nibbles, qh bits 4-5 and 6-7
      const __m256i shift = _mm256_setr_epi64x(0, 0, 2, 2);
      *f = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), Nibbles()),
                           _mm256_and_si256(_mm256_srlv_epi64(hf, shift), bits));
      *gv = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), Nibbles()),
                            _mm256_and_si256(_mm256_srlv_epi64(hg, shift), bits));
    }
  }
  template <int P>
  [[gnu::always_inline]] static __m256i Dot(const Scales& s, __m256i f, __m256i g, __m256i af,
                                            __m256i ag) {
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(f, af), s.sc_f[P]),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(g, ag), s.sc_g[P]));
  }
};

template <class Fmt>
void PrepareToken(const Q8Activations& x, int64_t t, int64_t n_groups, uint8_t* out) {
  const int8_t* a = x.Row(t);
  const float* xs = x.Scales(t);
  const int32_t* off = x.Offsets(t);
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  const __m256i beta = Load(kBetaLanes);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t g = 0; g < n_groups; ++g) {
    uint8_t* dst = out + g * kTokenGroupBytes;
    __m256i v[8];
    for (int i = 0; i < 8; ++i) {
      const int64_t b = g * kGroupBlocks + i;
      v[i] = b < n_blocks ? Load(a + kQ8Block * b) : _mm256_setzero_si256();
    }
    __m256i f[4], gv[4];
    for (int p = 0; p < 4; ++p) {
      f[p] = _mm256_permute2x128_si256(v[2 * p], v[2 * p + 1], 0x20);
      gv[p] = _mm256_permute2x128_si256(v[2 * p], v[2 * p + 1], 0x31);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * p), f[p]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * p + 32), gv[p]);
    }
    const int64_t valid = std::min<int64_t>(kGroupBlocks, n_blocks - g * kGroupBlocks);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)), lanes);
    const __m256 xv = _mm256_maskload_ps(xs + g * kGroupBlocks, mask);
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + kXsAt), _mm256_permutevar8x32_ps(xv, beta));
    const __m256i o =
        _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(off + g * kGroupBlocks, mask), beta);
    __m256i aux = _mm256_setzero_si256();
    if constexpr (Fmt::kAux == Aux::kShift) {
      aux = _mm256_srai_epi32(o, Fmt::kShift);
    } else if constexpr (Fmt::kAux == Aux::kMinA) {
      aux = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(o), _mm256_set1_ps(-1.0f / 128)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kAuxAt), aux);
    if constexpr (Fmt::kHalves) {
      const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
      auto sums = [&](const __m256i* q) {
        __m256i s[4];
        for (int p = 0; p < 4; ++p)
          s[p] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q[p]), ones16);
        return Reduce(s[0], s[1], s[2], s[3]);
      };
      const __m256i halves = _mm256_or_si256(_mm256_and_si256(sums(f), _mm256_set1_epi32(0xffff)),
                                             _mm256_slli_epi32(sums(gv), 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kHalvesAt), halves);
    }
  }
}

template <class Fmt>
[[gnu::always_inline]] inline __m256 Accumulate(const typename Fmt::Scales& s, __m256i i,
                                                const uint8_t* tg, __m256 acc) {
  if constexpr (Fmt::kAux == Aux::kShift) i = _mm256_add_epi32(i, Load(tg + kAuxAt));
  if constexpr (Fmt::kHalves) {
    i = _mm256_sub_epi32(i, _mm256_slli_epi32(_mm256_madd_epi16(s.pairs, Load(tg + kHalvesAt)), 5));
  }
  __m256 t = _mm256_mul_ps(s.s, _mm256_cvtepi32_ps(i));
  if constexpr (Fmt::kAux == Aux::kMinA) {
    t = _mm256_fmadd_ps(s.m, _mm256_loadu_ps(reinterpret_cast<const float*>(tg + kAuxAt)), t);
  }
  return _mm256_fmadd_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(tg + kXsAt)), t, acc);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace mlarun::avx2

#define SIMD_NAMESPACE avx2
#include "kernels/cpu/blocks_simd_impl.h"

namespace mlarun::detail {
void MatMulRowsBlocksAvx2(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                          const Q8Activations& x, float* y, int64_t ldy) {
  avx2::MatMulRowsBlocks(w, row_begin, row_end, x, y, ldy);
}
}  // namespace mlarun::detail
