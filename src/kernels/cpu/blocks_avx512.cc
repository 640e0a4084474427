// detail::MatMulRowsBlocksAvx512 (blocks_simd.h): KernelTable::matmul_rows_blocks of the AVX-512
// tables, GGUF block formats (block_formats.h) against Q8 activations with vpdpbusd (u8 weights x
// s8 activations, 4 products per int32 lane). Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512dq -mavx512vnni; only called on CPUs with them.
//
// Symbols (block_formats.h): per block b of 32 values q_i the weights' small integers (unsigned;
// Q8_0: q + 128), a_i the activations, A_b = sum_i a_i = -offsets[b] / 128, xs_b their scale,
// s_b / m_b the block's float scale / offset, I_b the exact int32 sum of the block.
//   y = sum_b xs_b * (s_b * I_b + m_b * A_b)
// Method. A row is taken 16 blocks (512 values, a "group"; two K-quant super-blocks) at a time,
// in four "quads" of 4 blocks. A quad is two vectors, F = the first 16 values of each of its 4
// blocks and G = their last 16 values (one block per 128-bit lane, in an order each format picks
// for the fewest shuffles: Q4_0's 4 blocks' 16 bytes qs give F as low nibbles and G as high
// nibbles; Q4_K's 64 bytes of qs give blocks 0 2 | 1 3 by one vshufi64x2 each).
// vpdpbusd(vpdpbusd(0, F, aF), G, aG) then holds each block's sum in 4 lanes, and two levels of
// unpack-and-add reduce the group's 4 quads to one vector of the 16 exact I_b, lane L holding
// block LaneBlock(L) = 4 (L % 4) + order[L / 4]. The float part is vectorised across those 16
// blocks:
//   acc[L] += xs * (s * float(I + integer offset) [+ m * A])
// with one float accumulator per (row, token) and one horizontal sum per row at the end.
// Integer offsets: Q4_0 (q - 8) adds offsets >> 4 = -8 A, Q5_0 offsets >> 3, Q8_0 (q + 128)
// offsets. Q6_K (scales per 16 values) multiplies the F and G sums by their int8 scales
// (vpmaddwd, vpdpwssd: the 4-product lane sums fit int16) and subtracts 32 sum_h sc_h S_h, S_h
// the sums of the activations' 16-value halves.
// The activations are rearranged once per call and token (PrepareToken: the quads' F / G, xs,
// the integer offset terms or the float A in lane order, Q6_K's half sums), 704 bytes per group;
// token tiles of up to 8 tokens share each decoded quad (and the first tile prefetches the
// weights). Each (row, token) output is the same sequence of operations whatever the tile, batch
// or row range (batch invariant); rows whose blocks end within a group run their last group from
// a zero-padded copy.
// The driver (group step, row tiles, passes, dispatch) is blocks_simd_impl.h's, shared with AVX2.
// Per group and token on Sapphire Rapids (llvm-mca): 1 token ~26-28 (Q6_K, Q4_0), ~30-34 (Q4_1,
// Q4_K, Q8_0), ~42 (Q5_K) and ~52 (Q5_0, Q5_1: their high bits by scalar code) cycles; tiles of
// 8 tokens ~12 (Q4_0) and ~15 (Q4_K) cycles per token.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/blocks_simd.h"
#include "kernels/quant.h"

namespace mlarun::avx512 {
namespace {

constexpr int kGroupBlocks = 16;
// Per token and group: the 8 arranged value vectors, then xs, aux and halves (64 bytes each).
constexpr int64_t kTokenGroupBytes = 11 * 64;
constexpr int64_t kXsAt = 512, kAuxAt = 576, kHalvesAt = 640;
// Token tiles of up to 8 tokens (Q6_K 4: its scales take registers too); llvm-mca (Sapphire
// Rapids) per group and token: Q4_K 17.3 cycles with 4, 14.9 with 8.
constexpr int kMaxTileTokens = 8;

// The blocks of a quad in its F and G vectors' 128-bit lanes (a format's choice: the order its
// bytes give with the fewest shuffles).
struct QuadOrder {
  int k[4];
};
constexpr QuadOrder kNaturalOrder = {{0, 1, 2, 3}};
// Block of the group in lane L of a reduced vector.
constexpr int LaneBlock(QuadOrder o, int lane) { return 4 * (lane % 4) + o.k[lane / 4]; }
struct Lanes16 {
  int32_t v[16];
};
constexpr Lanes16 MakeLanes(QuadOrder o) {
  Lanes16 l{};
  for (int lane = 0; lane < 16; ++lane) l.v[lane] = LaneBlock(o, lane);
  return l;
}
// Qword indices of vpermt2q taking a quad's F (G: + 2) from natural activations [blocks 0, 1]
// and [blocks 2, 3] (each block's 32 bytes: first 16, last 16).
struct Qwords8 {
  int64_t v[8];
};
constexpr Qwords8 MakeArrangeF(QuadOrder o) {
  Qwords8 q{};
  for (int k = 0; k < 4; ++k) {
    const int b = o.k[k];
    q.v[2 * k] = (b >= 2 ? 8 : 0) + 4 * (b % 2);
    q.v[2 * k + 1] = q.v[2 * k] + 1;
  }
  return q;
}
// Lanes holding blocks 8-15 (the second super-block of a K-quant group) for every order used.
constexpr __mmask16 kSecondHalfLanes = 0xCCCC;

using VecI = __m512i;
using VecF = __m512;

inline __m512i Load(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i Nibbles() { return _mm512_set1_epi8(0x0f); }
inline __m512 ZeroF() { return _mm512_setzero_ps(); }
inline float HorizontalSum(__m512 v) { return _mm512_reduce_add_ps(v); }

// Sums of lane pairs of a and b (level 1) and of lane quads (level 2), within 128-bit lanes.
inline __m512i Level1(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
inline __m512i Level2(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
// Quads q0-q3 (128-bit lane k of quad j = block 4 j + order[k]) to one vector: lane L = block
// LaneBlock(order, L).
inline __m512i Reduce(__m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  return Level2(Level1(q0, q1), Level1(q2, q3));
}

// [16 bytes at p, at p + stride, at p + 2 stride, at p + 3 stride].
inline __m512i Load4x16(const uint8_t* p, int64_t stride) {
  __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  z = _mm512_mask_broadcast_i32x4(z, 0x00f0,
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)));
  z = _mm512_mask_broadcast_i32x4(
      z, 0x0f00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)));
  return _mm512_mask_broadcast_i32x4(
      z, 0xf000, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)));
}

inline void SplitNibbles(__m512i z, __m512i* lo, __m512i* hi) {
  *lo = _mm512_and_si512(z, Nibbles());
  *hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), Nibbles());
}

// a | (b & c), bitwise.
inline __m512i OrMasked(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi64(a, b, c, 0xf8);
}

// Collecting 16-bit words at a fixed stride (the f16 scales of 16 blocks of a 32-value format)
// into lane order: windows of 128 bytes (two masked loads that stay within the group) and one
// vpermt2w each.
struct WordWindows {
  int n = 0;
  int first_block[4] = {};
  uint16_t idx[4][32] = {};
  uint32_t lanes[4] = {};
  uint64_t load_mask[4][2] = {};
};

// Word lane L < 16: the word at byte kOffD of block LaneBlock(L) (natural quad order); lane
// 16 + L: at kOffM (if >= 0).
template <int kBlockBytes, int kOffD, int kOffM>
constexpr WordWindows MakeWordWindows() {
  WordWindows w;
  constexpr int kWords = kBlockBytes / 2;
  constexpr int kMaxOff = (kOffM >= 0 ? kOffM : kOffD) / 2;
  constexpr int kPer = (63 - kMaxOff) / kWords + 1;
  w.n = (kGroupBlocks + kPer - 1) / kPer;
  for (int i = 0; i < w.n; ++i) {
    const int b0 = i * kPer;
    w.first_block[i] = b0;
    for (int lane = 0; lane < 32; ++lane) {
      const int b = LaneBlock(kNaturalOrder, lane % 16);
      const bool m = lane >= 16;
      if ((m && kOffM < 0) || b < b0 || b >= b0 + kPer) continue;
      w.idx[i][lane] = static_cast<uint16_t>((b - b0) * kWords + (m ? kOffM : kOffD) / 2);
      w.lanes[i] |= 1u << lane;
    }
    for (int h = 0; h < 2; ++h) {
      for (int byte = 0; byte < 64; ++byte) {
        if (b0 * kBlockBytes + 64 * h + byte < kGroupBlocks * kBlockBytes)
          w.load_mask[i][h] |= uint64_t{1} << byte;
      }
    }
  }
  return w;
}

template <int kBlockBytes, int kOffD, int kOffM>
inline __m512i GroupWords(const uint8_t* group) {
  static constexpr WordWindows kW = MakeWordWindows<kBlockBytes, kOffD, kOffM>();
  __m512i r = _mm512_setzero_si512();
  for (int i = 0; i < kW.n; ++i) {
    const uint8_t* p = group + kW.first_block[i] * kBlockBytes;
    const __m512i t0 = _mm512_maskz_loadu_epi8(kW.load_mask[i][0], p);
    const __m512i t1 = _mm512_maskz_loadu_epi8(kW.load_mask[i][1], p + 64);
    r = _mm512_mask_mov_epi16(r, kW.lanes[i], _mm512_permutex2var_epi16(t0, Load(kW.idx[i]), t1));
  }
  return r;
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// What a format adds per token and block after the integer sums.
enum class Aux {
  kNone,   // I as it is
  kShift,  // I += offsets >> kShift (an integer offset o = -128 / 2^kShift)
  kMinA,   // T += m * A, A = -offsets / 128 (stored as float)
};

// ---- The 32-value formats: groups of 16 blocks. ----

// Q4_0, Q4_1, Q5_0, Q5_1: 16 bytes qs at kQs, low nibbles the first 16 values; Q5: 32 high bits
// at kQh (bit i for value i); f16 d at 0, m at 2 (Q4_1, Q5_1).
template <int kBB, int kQs, int kQh, bool kHasMin, int kShiftBits>
struct SmallFormat {
  static constexpr int64_t kGroupBytes = int64_t{kGroupBlocks} * kBB;
  static constexpr Aux kAux = kHasMin ? Aux::kMinA : Aux::kShift;
  static constexpr int kShift = kShiftBits;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  static constexpr QuadOrder kOrder = kNaturalOrder;
  static constexpr bool kNegativeMin = false;
  struct Scales {
    __m512 s, m;
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    constexpr int kOffM = kHasMin ? 2 : -1;
    const __m512i words = GroupWords<kBB, 0, kOffM>(g);
    Scales s;
    s.s = _mm512_cvtph_ps(_mm512_castsi512_si256(words));
    s.m = kHasMin ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(words, 1)) : _mm512_setzero_ps();
    return s;
  }
  template <int J>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m512i* f, __m512i* gv) {
    const uint8_t* b = g + 4 * J * kBB;
    if constexpr (kBB % 4 == 0 && kQs % 4 == 0) {
      // The 4 blocks' qs are whole dwords of their 80 / 96 bytes: one vpermt2d.
      static constexpr Lanes16 kIdx = [] {
        Lanes16 l{};
        for (int i = 0; i < 16; ++i) l.v[i] = (i / 4 * kBB + kQs) / 4 + i % 4;
        return l;
      }();
      const __m512i t1 = _mm512_maskz_loadu_epi32(
          static_cast<__mmask16>((1u << ((4 * kBB - 64) / 4)) - 1), b + 64);
      SplitNibbles(_mm512_permutex2var_epi32(Load(b), Load(kIdx.v), t1), f, gv);
    } else {
      SplitNibbles(Load4x16(b + kQs, kBB), f, gv);
    }
    if constexpr (kQh >= 0) {
      uint64_t hf = 0, hg = 0;
      for (int k = 0; k < 4; ++k) {
        hf |= uint64_t{LoadU16(b + k * kBB + kQh)} << (16 * k);
        hg |= uint64_t{LoadU16(b + k * kBB + kQh + 2)} << (16 * k);
      }
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      *f = _mm512_mask_add_epi8(*f, _cvtu64_mask64(hf), *f, bit4);
      *gv = _mm512_mask_add_epi8(*gv, _cvtu64_mask64(hg), *gv, bit4);
    }
  }
  template <int J>
  [[gnu::always_inline]] static __m512i Dot(const Scales&, __m512i f, __m512i g, __m512i af,
                                            __m512i ag) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), f, af), g, ag);
  }
};

// Q8_0: f16 d, 32 int8 values; weights q + 128 (unsigned), offsets added.
struct Q8_0 {
  static constexpr int kBB = 34;
  static constexpr int64_t kGroupBytes = int64_t{kGroupBlocks} * kBB;
  static constexpr Aux kAux = Aux::kShift;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  static constexpr QuadOrder kOrder = kNaturalOrder;
  static constexpr bool kNegativeMin = false;
  struct Scales {
    __m512 s, m;
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    return {_mm512_cvtph_ps(_mm512_castsi512_si256(GroupWords<kBB, 0, -1>(g))),
            _mm512_setzero_ps()};
  }
  template <int J>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m512i* f, __m512i* gv) {
    const uint8_t* b = g + 4 * J * kBB + 2;
    auto two = [](const uint8_t* p) {
      return _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBB)), 1);
    };
    const __m512i z01 = two(b), z23 = two(b + 2 * kBB);
    const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
    *f = _mm512_xor_si512(_mm512_shuffle_i64x2(z01, z23, 0x88), sign);
    *gv = _mm512_xor_si512(_mm512_shuffle_i64x2(z01, z23, 0xdd), sign);
  }
  template <int J>
  [[gnu::always_inline]] static __m512i Dot(const Scales&, __m512i f, __m512i g, __m512i af,
                                            __m512i ag) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), f, af), g, ag);
  }
};

// ---- The K-quants: groups of two 256-value super-blocks. ----

// The byte shuffles that unpack the 6-bit scales and mins of a Q4_K / Q5_K super-block from its
// first 16 bytes (f16 d, f16 dmin, scales[12]; block_formats.h): output byte p < 8 is sc_j, byte
// 8 + p m_j, for sub-block j = 4 (p % 2) + order[p / 2], so that interleaving two super-blocks'
// outputs by 16-bit words gives the lane order of a group.
struct SixBitShuffle {
  int8_t a[32], b[32], mask_lo[32], mask_hi[32];
};
constexpr SixBitShuffle MakeSixBitShuffle(QuadOrder o) {
  SixBitShuffle t{};
  for (int lane = 0; lane < 2; ++lane) {
    for (int p = 0; p < 16; ++p) {
      const int j = 4 * (p % 2) + o.k[(p % 8) / 2];
      const bool min = p >= 8;
      const int at = 16 * lane + p;
      // sc_j = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
      // m_j = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4 (s at byte 4)
      t.a[at] = static_cast<int8_t>(4 + (min || j >= 4 ? j + 4 : j));
      t.b[at] = static_cast<int8_t>(j < 4 ? -1 : 4 + (min ? j : j - 4));
      t.mask_lo[at] = static_cast<int8_t>(j < 4 ? 63 : (min ? 0 : 15));
      t.mask_hi[at] = static_cast<int8_t>(j >= 4 && min ? 15 : 0);
    }
  }
  return t;
}

// Q4_K (kQh < 0) and Q5_K: f16 d, dmin; scales[12] at 4; Q5_K qh[32] at 16; qs[128] at kQs.
// Quad J = sub-blocks 4 (J % 2) .. + 3 of super-block J / 2, i.e. qs chunks 2 (J % 2) and + 1,
// whose low nibbles are sub-blocks +0 and +2 and high nibbles +1 and +3: one vshufi64x2 each for
// F and G gives the quad order (0, 2, 1, 3).
template <int kSB, int kQs, int kQh>
struct KFormat {
  static constexpr int64_t kGroupBytes = 2 * kSB;
  static constexpr Aux kAux = Aux::kMinA;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = false;
  static constexpr int kMaxTile = kMaxTileTokens;
  static constexpr QuadOrder kOrder = {{0, 2, 1, 3}};
  static constexpr bool kNegativeMin = true;
  struct Scales {
    __m512 s, m;  // d sc_j and dmin m_j
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    static constexpr SixBitShuffle kT = MakeSixBitShuffle(kOrder);
    const __m256i y = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(g + kSB),
                                          reinterpret_cast<const __m128i*>(g));
    const __m256i a =
        _mm256_shuffle_epi8(y, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kT.a)));
    const __m256i b =
        _mm256_shuffle_epi8(y, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kT.b)));
    const __m256i lo_mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kT.mask_lo));
    const __m256i hi_mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kT.mask_hi));
    __m256i r = _mm256_and_si256(a, lo_mask);
    r = _mm256_ternarylogic_epi64(r, _mm256_srli_epi16(a, 4), hi_mask, 0xf8);
    r = _mm256_ternarylogic_epi64(r, _mm256_srli_epi16(b, 2), _mm256_set1_epi8(0x30), 0xf8);
    const __m128i r0 = _mm256_castsi256_si128(r), r1 = _mm256_extracti128_si256(r, 1);
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi16(r0, r1)));
    const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi16(r0, r1)));
    // Words 0, 1 of y are d, dmin of super-block 0, words 8, 9 those of super-block 1.
    const __m512i dd =
        _mm512_permutexvar_epi16(_mm512_set_epi16(9, 9, 1, 1, 9, 9, 1, 1, 9, 9, 1, 1, 9, 9, 1, 1, 8,
                                                  8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0, 8, 8, 0, 0),
                                 _mm512_zextsi256_si512(y));
    return {_mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dd)), sc),
            _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(dd, 1)), mn)};
  }
  template <int J>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m512i* f, __m512i* gv) {
    const uint8_t* sb = g + (J / 2) * kSB;
    constexpr int kQ = J % 2;
    __m512i lo, hi;
    SplitNibbles(Load(sb + kQs + 64 * kQ), &lo, &hi);
    *f = _mm512_shuffle_i64x2(lo, hi, 0x88);
    *gv = _mm512_shuffle_i64x2(lo, hi, 0xdd);
    if constexpr (kQh >= 0) {
      // Sub-block j takes bit j of qh[l]: rotate it to bit 4 (lanes: j = 4 kQ + 0, 2, 1, 3).
      const __m512i rot = kQ == 0 ? _mm512_setr_epi64(4, 4, 2, 2, 3, 3, 1, 1)
                                  : _mm512_setr_epi64(0, 0, 62, 62, 63, 63, 61, 61);
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      const __m512i hf =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQh)));
      const __m512i hg =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + kQh + 16)));
      *f = OrMasked(*f, _mm512_rolv_epi64(hf, rot), bit4);
      *gv = OrMasked(*gv, _mm512_rolv_epi64(hg, rot), bit4);
    }
  }
  template <int J>
  [[gnu::always_inline]] static __m512i Dot(const Scales&, __m512i f, __m512i g, __m512i af,
                                            __m512i ag) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), f, af), g, ag);
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d at 208. Quad J = half J % 2 of super-block J / 2.
struct Q6_K {
  static constexpr int kSB = 210;
  static constexpr int64_t kGroupBytes = 2 * kSB;
  static constexpr Aux kAux = Aux::kNone;
  static constexpr int kShift = 0;
  static constexpr bool kHalves = true;
  static constexpr int kMaxTile = 4;
  static constexpr QuadOrder kOrder = kNaturalOrder;
  static constexpr bool kNegativeMin = false;
  struct Scales {
    __m512 s;
    __m512i sc_f[4], sc_g[4];  // per quad: lane k of F / G's scale, a zero-extended int16
    __m512i pairs;             // lane L: block LaneBlock(L)'s two scales as int16 words
  };
  [[gnu::always_inline]] static Scales LoadScales(const uint8_t* g) {
    Scales s;
    const __m256i sc8 = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(g + kSB + 192),
                                            reinterpret_cast<const __m128i*>(g + 192));
    static constexpr Lanes16 kLanes = MakeLanes(kOrder);
    s.pairs = _mm512_permutexvar_epi32(Load(kLanes.v), _mm512_cvtepi8_epi16(sc8));
    const __m512i low16 = _mm512_set1_epi32(0xffff);
    const __m512i idx_f0 = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i one = _mm512_set1_epi32(1), eight = _mm512_set1_epi32(8);
    for (int sb = 0; sb < 2; ++sb) {
      const __m512i e =
          _mm512_and_si512(_mm512_cvtepi8_epi32(sb == 0 ? _mm256_castsi256_si128(sc8)
                                                        : _mm256_extracti128_si256(sc8, 1)),
                           low16);
      for (int n = 0; n < 2; ++n) {
        const __m512i idx = n == 0 ? idx_f0 : _mm512_add_epi32(idx_f0, eight);
        s.sc_f[2 * sb + n] = _mm512_permutexvar_epi32(idx, e);
        s.sc_g[2 * sb + n] = _mm512_permutexvar_epi32(_mm512_add_epi32(idx, one), e);
      }
    }
    uint16_t d0, d1;
    std::memcpy(&d0, g + 208, 2);
    std::memcpy(&d1, g + kSB + 208, 2);
    s.s = _mm512_mask_blend_ps(kSecondHalfLanes, _mm512_set1_ps(_cvtsh_ss(d0)),
                               _mm512_set1_ps(_cvtsh_ss(d1)));
    return s;
  }
  template <int J>
  [[gnu::always_inline]] static void Decode(const uint8_t* g, __m512i* f, __m512i* gv) {
    const uint8_t* sb = g + (J / 2) * kSB;
    const uint8_t* ql = sb + 64 * (J % 2);
    const uint8_t* qh = sb + 128 + 32 * (J % 2);
    __m512i lo, hi;
    SplitNibbles(Load(ql), &lo, &hi);
    // Blocks l, l + 32, l + 64, l + 96 of the half: low nibbles of ql[l], ql[l + 32], then high;
    // their 2 high bits are bits 0-1, 2-3, 4-5, 6-7 of qh[l], rotated to bits 4-5.
    const __m512i rot = _mm512_setr_epi64(4, 4, 2, 2, 0, 0, 62, 62);
    const __m512i bits = _mm512_set1_epi8(0x30);
    const __m512i hf =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh)));
    const __m512i hg =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16)));
    *f = OrMasked(_mm512_shuffle_i64x2(lo, hi, 0x88), _mm512_rolv_epi64(hf, rot), bits);
    *gv = OrMasked(_mm512_shuffle_i64x2(lo, hi, 0xdd), _mm512_rolv_epi64(hg, rot), bits);
  }
  // Each half's sums (4 products a lane, within int16) times its scale.
  template <int J>
  [[gnu::always_inline]] static __m512i Dot(const Scales& s, __m512i f, __m512i g, __m512i af,
                                            __m512i ag) {
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_dpbusd_epi32(zero, f, af), s.sc_f[J]),
                               _mm512_dpbusd_epi32(zero, g, ag), s.sc_g[J]);
  }
};

// ---- Activations and the float part (the row kernel and driver: blocks_simd_impl.h). ----

// One token's activations for the group kernels: per group the quads' F and G value vectors, xs
// in lane order, the format's aux values, and (Q6_K) the half sums as int16 pairs.
template <class Fmt>
void PrepareToken(const Q8Activations& x, int64_t t, int64_t n_groups, uint8_t* out) {
  const int8_t* a = x.Row(t);
  const float* xs = x.Scales(t);
  const int32_t* off = x.Offsets(t);
  const int64_t n_vectors = x.padded_cols / 64;
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  static constexpr Lanes16 kLanes = MakeLanes(Fmt::kOrder);
  static constexpr Qwords8 kArrange = MakeArrangeF(Fmt::kOrder);
  const __m512i lanes = Load(kLanes.v);
  const __m512i arrange_f = Load(kArrange.v);
  const __m512i arrange_g = _mm512_add_epi64(arrange_f, _mm512_set1_epi64(2));
  for (int64_t g = 0; g < n_groups; ++g) {
    uint8_t* dst = out + g * kTokenGroupBytes;
    __m512i v[8];
    for (int i = 0; i < 8; ++i) {
      const int64_t at = g * 8 + i;
      v[i] = at < n_vectors ? Load(a + 64 * at) : _mm512_setzero_si512();
    }
    __m512i f[4], gv[4];
    for (int j = 0; j < 4; ++j) {
      f[j] = _mm512_permutex2var_epi64(v[2 * j], arrange_f, v[2 * j + 1]);
      gv[j] = _mm512_permutex2var_epi64(v[2 * j], arrange_g, v[2 * j + 1]);
      _mm512_storeu_si512(dst + 128 * j, f[j]);
      _mm512_storeu_si512(dst + 128 * j + 64, gv[j]);
    }
    const int64_t valid = std::min<int64_t>(kGroupBlocks, n_blocks - g * kGroupBlocks);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    _mm512_storeu_ps(dst + kXsAt,
                     _mm512_permutexvar_ps(lanes, _mm512_maskz_loadu_ps(mask, xs + g * 16)));
    const __m512i o = _mm512_permutexvar_epi32(lanes, _mm512_maskz_loadu_epi32(mask, off + g * 16));
    __m512i aux = _mm512_setzero_si512();
    if constexpr (Fmt::kAux == Aux::kShift) {
      aux = _mm512_srai_epi32(o, Fmt::kShift);
    } else if constexpr (Fmt::kAux == Aux::kMinA) {
      aux = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(o), _mm512_set1_ps(-1.0f / 128)));
    }
    _mm512_storeu_si512(dst + kAuxAt, aux);
    if constexpr (Fmt::kHalves) {
      const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
      auto sums = [&](const __m512i* q) {
        return Reduce(_mm512_dpbusd_epi32(zero, ones, q[0]), _mm512_dpbusd_epi32(zero, ones, q[1]),
                      _mm512_dpbusd_epi32(zero, ones, q[2]), _mm512_dpbusd_epi32(zero, ones, q[3]));
      };
      const __m512i halves = _mm512_or_si512(_mm512_and_si512(sums(f), _mm512_set1_epi32(0xffff)),
                                             _mm512_slli_epi32(sums(gv), 16));
      _mm512_storeu_si512(dst + kHalvesAt, halves);
    }
  }
}

template <class Fmt>
[[gnu::always_inline]] inline __m512 Accumulate(const typename Fmt::Scales& s, __m512i i,
                                                const uint8_t* tg, __m512 acc) {
  if constexpr (Fmt::kAux == Aux::kShift) i = _mm512_add_epi32(i, Load(tg + kAuxAt));
  if constexpr (Fmt::kHalves) {
    i = _mm512_sub_epi32(i, _mm512_slli_epi32(_mm512_madd_epi16(s.pairs, Load(tg + kHalvesAt)), 5));
  }
  __m512 t = _mm512_mul_ps(s.s, _mm512_cvtepi32_ps(i));
  if constexpr (Fmt::kAux == Aux::kMinA) {
    const __m512 a = _mm512_loadu_ps(tg + kAuxAt);
    t = Fmt::kNegativeMin ? _mm512_fnmadd_ps(s.m, a, t) : _mm512_fmadd_ps(s.m, a, t);
  }
  return _mm512_fmadd_ps(_mm512_loadu_ps(tg + kXsAt), t, acc);
}

}  // namespace
}  // namespace mlarun::avx512

#define SIMD_NAMESPACE avx512
#include "kernels/cpu/blocks_simd_impl.h"

namespace mlarun::detail {
void MatMulRowsBlocksAvx512(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                            const Q8Activations& x, float* y, int64_t ldy) {
  avx512::MatMulRowsBlocks(w, row_begin, row_end, x, y, ldy);
}
}  // namespace mlarun::detail
