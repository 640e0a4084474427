// The kernels of one instruction-set level, as a table of function pointers resolved once at
// start-up (never inside the layer loop), and the execution context passed to every kernel call.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/scratch_arena.h"
#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

namespace mlarun {

struct WeightMatrix;
struct Q8Activations;

// A query prepared for the int8-row attention kernels (dot_rows_i8): heads in blocks of 16; each
// head's body (the values the rows hold in groups, kv_row.h) quantised to int8 per group of
// `quant_group` values, its tail (the rows' RoPE part) to int8 in `tail_groups` groups of
// `tail_group` values (the last possibly shorter), as the rows are. Scales and offsets have one
// head per vector lane. Body and tail groups are laid out for 8-byte broadcasts of a row (two
// quads of 4 int8 values): per block of 16 heads and pair of quads p, two 16-word vectors, heads
// 0-7 then heads 8-15 of the block, where word 2m + e holds head m's (resp. 8 + m's) quad 2p + e;
// a head's two lanes are added after. Built by PrepareI8Query (attention.h).
//   body word of head h (block hb = h / 16, i = h % 16) and value c:
//     ((hb * body_dim / 8 + c / 8) * 2 + i / 8) * 16 + 2 * (i % 8) + (c / 4) % 2, byte c % 4
//   tail word of head h and value c of tail group g (0 past the group's end), P = TailQuadPairs():
//     (((hb * tail_groups + g) * P + c / 8) * 2 + i / 8) * 16 + 2 * (i % 8) + (c / 4) % 2,
//     byte c % 4
struct I8Query {
  int n_heads = 0;                        // multiple of 16
  int body_dim = 0;                       // multiple of quant_group
  int quant_group = 0;                    // multiple of 64
  int tail_dim = 0;                       // any (0: no tail)
  int tail_groups = 0;                    // groups of the tail (the rows' kRopeTailGroups)
  int tail_group = 0;                     // values per tail group, ceil(tail_dim / tail_groups)
  int row_bytes = 0;                      // bytes of one cached row (KvRowFormat::RowBytes)
  const int32_t* body = nullptr;          // [blocks, body_dim / 8, 2, 16]: 4 int8 values a word
  const float* scales = nullptr;          // [blocks, groups, 16]: the int8 values' scales
  const int32_t* offsets = nullptr;       // [blocks, groups, 16]: -128 * the group's int8 sum
  const int32_t* tail = nullptr;          // [blocks, tail_groups, TailQuadPairs(), 2, 16]
  const float* tail_scales = nullptr;     // [blocks, tail_groups, 16]
  const int32_t* tail_offsets = nullptr;  // [blocks, tail_groups, 16]: -128 * the group's sum

  int TailQuadPairs() const { return (tail_group + 7) / 8; }  // per tail group
};

// y[t * ldy + (r - row_begin)] = W[r, :] . x[t, :] for packed Q8 weights (KernelTable).
using MatMulRowsQ8Fn = void (*)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                                const Q8Activations& x, float* y, int64_t ldy);

struct KernelTable {
  Isa isa = Isa::kScalar;
  // y[t * ldy + (r - row_begin)] = W[r, :] . x[t, :] for r in [row_begin, row_end), t < n_tokens.
  // Every (r, t) element is accumulated in the same order whatever n_tokens and the row range, so
  // a token's result does not depend on the batch it is in.
  void (*matmul_rows)(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t n_tokens, float* y, int64_t ldy);
  // The same for kI8 weights and Q8-quantised activations (all x.n_tokens tokens): per block an
  // exact int32 dot product, scaled by (weight scale * activation scale).
  MatMulRowsQ8Fn matmul_rows_q8;
  // Optional (null: MatMulRowsBlocksScalar, block_formats.h): the same for DType::kBlocks
  // weights (GGUF block formats, row-major blocks) against Q8 activations, any w.blocks that is
  // multipliable(); each (r, t) element summed in one fixed order whatever the batch.
  MatMulRowsQ8Fn matmul_rows_blocks;
  // Optional (null: matmul_rows): matmul_rows for kBF16 row-major weights with each token's x
  // [n_tokens, w.cols] in the pair form of bf16_pair_form, so that a bf16 row is widened by one
  // integer op per vector (pairs split into their even and odd values) instead of two. Batch
  // invariant like matmul_rows; the sums run in another order than matmul_rows's.
  void (*matmul_rows_pair_x)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                             const float* x_pairs, int64_t n_tokens, float* y, int64_t ldy);
  // Quantises one activation row for matmul_rows_q8 (quant.h, QuantizeActivationRowQ8 is the
  // reference; every version gives bitwise the same values, scales and block offsets).
  void (*quantize_row_q8)(const float* x, int64_t cols, int8_t* q, float* scales, int32_t* offsets);
  // Optional: set if matmul_rows_q8 reads the sign split of its activations (quant.h,
  // SplitQ8Row is the reference; every version gives bitwise the same), which
  // QuantizeActivationsQ8 then must be given.
  void (*split_q8_row)(const int8_t* q, int64_t padded_cols, uint8_t* magnitudes,
                       uint8_t* sign_masks, int32_t* negative_sums);
  // Quantises one weight row to Q8 blocks with float16 scales (quant.h, QuantizeWeightRowQ8 is
  // the reference; every version gives bitwise the same values and scales). Load-time work of
  // `--weights int8`.
  void (*quantize_weight_row_q8)(const float* w, int64_t cols, int8_t* q, uint16_t* scales);
  // Quantises n values (a multiple of 16) with one scale, as quantize_row_q8 does a block: stores
  // scale = max |x| / 127 and q = x / scale clamped to [-127, 127] and rounded to nearest even;
  // returns the sum of q (quant.h, QuantizeGroupI8 is the reference; every version gives bitwise
  // the same). Used per head and group by PrepareI8Query.
  int32_t (*quantize_group_i8)(const float* x, int64_t n, int8_t* q, float* scale);
  // Optional (null unless the ISA has bf16 dot products): the same for kBF16 weights with
  // activations already rounded to bf16, x_bf16 [n_tokens, w.cols].
  void (*matmul_rows_bf16)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                           const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy);
  // Optional (null: matmul_rows): matmul_rows for kF8E4M3 weights with each token's x rounded to
  // bf16 after its block scale, bf16(256 scale * x), against the weights / 256 widened exactly to
  // bf16, by bf16 dot products (cpu/f8_matmul_avx512bf16.cc). Batch invariant like matmul_rows;
  // only the activations' rounding differs from it. `--isa fast`. Packed weights go to
  // matmul_rows_f8_packed, with x rounded to bf16 before the scales.
  void (*matmul_rows_f8_bf16)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t n_tokens, float* y, int64_t ldy);
  // Optional (with matmul_rows_f8_bf16): FP8 weights in Layout16::kPacked16 against activations
  // rounded to bf16, x_bf16 [n_tokens, w.cols]: y = sum over column blocks of (256 scale) times
  // the block's bf16 dot products of the weights / 256 (cpu/f8_packed_avx512bf16.cc), batch
  // invariant. matmul_rows_f8_bf16 sends packed weights here (rounding x first), MatMulBatch
  // directly (x rounded once per input). Loads that copy the weights pack FP8 for such tables.
  void (*matmul_rows_f8_packed)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                                const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy);
  // Optional (AMX only): y = W x for kPacked16 weights and the n_tokens tokens' x rounded to bf16
  // in activation tiles (packed_bf16.h), by tile dot products (tdpbf16ps; float32 sums in the
  // hardware's order). Batch invariant among batches it takes, which MatMulBatch gives it from
  // bf16_tiles_min_tokens tokens on: smaller ones (decode; AMX there read ~15% fewer GB/s than
  // the AVX-512 FMAs on the Intel Xeon VM) go to matmul_rows_bf16 or matmul_rows, so a token's
  // result depends on its batch reaching that size, by float32 rounding.
  void (*matmul_rows_bf16_tiles)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                                 const uint16_t* x_tiles, int64_t n_tokens, float* y, int64_t ldy);
  int64_t bf16_tiles_min_tokens = 0;
  // Optional (AMX-INT8 only): matmul_rows_q8 on AMX-INT8 tiles for 16 tokens or more (fewer: the
  // VNNI kernel), bitwise the same results (cpu/amx_packed_q8.h). The AMX tables' matmul_rows_q8
  // takes it only where it measured faster (Q8TilesSpeedup, timed on the first batch of 16+
  // tokens, so processes without one never time it): its first form ran at
  // half the VNNI kernel's rate on an Emerald Rapids VM (2026-12-04, docs/performance.md), and
  // the form here, restructured after that, was not timed on AMX hardware. `kernels_bench
  // --benchmark_filter=MatMul/amx_q8` times it in matmul_rows_q8's place.
  MatMulRowsQ8Fn matmul_rows_q8_tiles;
  // c[i, j] = sum_kk a[i, kk] b[kk, j] for i < m, j < n (row-major, leading dimensions lda, ldb,
  // ldc); each element is one fused multiply-add chain over kk in order from 0, so every ISA
  // gives bitwise the scalar result.
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc);
  float (*dot)(const float* a, const float* b, int64_t n);
  // Sum of x[0, n) in an unspecified order with several independent accumulators: streams memory
  // as fast as the core can (the read-bandwidth probe; not for numerics).
  float (*stream_sum)(const float* x, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y += a x
  void (*scale)(float a, float* x, int64_t n);                 // x *= a
  void (*exp)(float* x, int64_t n);                            // x = exp(x), x <= 0 typical
  // gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] (SwiGLU), with
  // this table's exp.
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // The row-wise kernels of ops.h (the scalar table holds those functions, the references):
  // RMSNorm of one row (out may alias x). The sum of squares is taken in double in an
  // ISA-specific order (each square is exact in double), the scaling x * inv_rms * weight in
  // float32 as the reference does.
  void (*rms_norm)(const float* x, const float* weight, int64_t n, float eps, float* out);
  // ApplyRopeHeads: one token's RoPE rotation of n_heads heads in place, head h at
  // x + h * head_stride (SIMD versions may fuse a multiply with the following add or subtract).
  void (*rope)(float* x, int n_heads, int64_t head_stride, const RopeAngles& angles);
  // In-place softmax of n values: max-subtracted, with this table's exp and a float32 sum.
  void (*softmax)(float* x, int64_t n);
  // TopK (ops.h): the same indices in the same order, ties and NaN included.
  void (*top_k)(const float* scores, int n, int k, int* out);
  // Optional (null: the scalar F32ToBF16 loop): out[i] = F32ToBF16(x[i]), bitwise.
  void (*round_to_bf16)(const float* x, int64_t n, uint16_t* out);
  // w.DecodeRow(r, out): row r of `w` as float32, bitwise for finite values (NaN stays NaN,
  // perhaps with another payload); SIMD tables widen row-major bf16, f16 and FP8 rows in vectors
  // (the conversions of weights at load and by `mlarun quantize`).
  void (*decode_row)(const WeightMatrix& w, int64_t r, float* out);
  // Optional (null: PackBf16Rows itself): PackBf16Rows (packed_bf16.h), bitwise, its return value
  // included; AVX-512 transposes whole groups 16 x 16 words at a time.
  uint16_t (*pack_bf16_rows)(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                             uint32_t* dst);
  // Optional (null: PackF16Rows itself): PackF16Rows (packed_bf16.h), bitwise, its return value
  // included; AVX-512 as pack_bf16_rows, each 64-byte column pair reordered by one vpermw.
  uint16_t (*pack_f16_rows)(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                            uint16_t* dst);
  // Optional (null: PackF8Rows itself): PackF8Rows (packed_bf16.h), bitwise, its NaN flag
  // included; AVX-512 transposes whole groups 16 rows x 64 bytes at a time.
  bool (*pack_f8_rows)(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                       uint8_t* dst);
  // Optional (null: Bf16PairColumns itself, packed_bf16.h): Bf16PairColumns, bitwise; AVX-512
  // rounds 16 rows x 16 pairs and transposes them in registers at a time.
  void (*bf16_pair_columns)(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs,
                            uint32_t* out, int64_t ld_out);
  // Optional (null: Bf16PairRows itself, packed_bf16.h): Bf16PairRows, bitwise.
  void (*bf16_pair_rows)(const float* a, const float* b, int64_t n, uint32_t* out);
  // One online-softmax tile row: s[i] = s[i] * scale + bias[i] (SIMD versions may fuse the
  // multiply-add); returns max_i s[i] (-inf for n = 0).
  float (*scale_bias_max)(float* s, float scale, const float* bias, int64_t n);
  // x[i] = exp(x[i] - shift) as `exp` computes it; returns the sum of the new x (in an
  // ISA-specific order).
  float (*exp_shift_sum)(float* x, float shift, int64_t n);
  // acc[h, :] += sum_j p[j, h] v_j for h < n_heads, j < n_rows; p: [n_rows, n_heads],
  // v_j = v + j * v_stride ([dv] each), acc: [n_heads, dv]. Each acc element sums over j in
  // order.
  void (*pv_accumulate)(const float* p, int n_heads, int n_rows, const float* v, int64_t v_stride,
                        int dv, float* acc);
  void (*bf16_to_f32)(const uint16_t* in, float* out, int64_t n);
  // Optional (null in the scalar table): kernels that read bf16 rows in place, by pointer
  // (cached K/V rows of absorbed MLA decode), widening them exactly to float32.
  // out = x in the "pair form" dot_rows_bf16 reads (an ISA-specific permutation of x [n]).
  void (*bf16_pair_form)(const float* x, int64_t n, float* out);
  // s[h * lds + j] = q[h] . rows[j] for h < n_heads, j < n_rows, over `dim` values;
  // q: [n_heads, dim], each head in pair form.
  void (*dot_rows_bf16)(const uint16_t* const* rows, int n_rows, const float* q, int n_heads,
                        int dim, float* s, int lds);
  // pv_accumulate over bf16 rows given by pointer, v_j = v_rows[j] ([dv] bf16 each).
  void (*pv_accumulate_bf16)(const float* p, int n_heads, int n_rows, const uint16_t* const* v_rows,
                             int dv, float* acc);
  // Optional (AVX512-BF16 only): the two above with the query and the probabilities rounded to
  // bf16, multiplied by vdpbf16ps (32 multiply-adds per instruction, twice the float32 FMA's)
  // and accumulated in float32. Used by `--isa fast` for attention over a bf16 cache.
  // s[h * lds + j] = q_bf16[h] . rows[j]; q_bf16: [n_heads, dim].
  void (*dot_rows_bf16_rounded)(const uint16_t* const* rows, int n_rows, const uint16_t* q_bf16,
                                int n_heads, int dim, float* s, int lds);
  // Optional (AVX512-BF16): dot_rows_bf16_rounded in two steps, for n_heads a multiple of 16 and
  // dim of 4, so that a caller scoring many tiles lays the query out once: bf16_query_blocks
  // writes q_bf16 [n_heads, dim] in I8Query's body layout with a bf16 pair per word in place of a
  // quad (blocks of 16 heads, [n_heads / 16, dim / 4, 2, 16] words: BF16QueryBlockWords),
  // dot_rows_bf16_blocks scores rows against it, bitwise as dot_rows_bf16_rounded over the same
  // heads.
  void (*bf16_query_blocks)(const uint16_t* q_bf16, int n_heads, int dim, uint32_t* out);
  void (*dot_rows_bf16_blocks)(const uint16_t* const* rows, int n_rows, const uint32_t* q_blocks,
                               int n_heads, int dim, float* s, int lds);
  // acc[h, :] += sum_j bf16(p[h * ldp + j]) v_rows[j] for h < n_heads, j < n_rows (p: float32
  // [n_heads, ldp], rounded to nearest even bf16 by vcvtne2ps2bf16, which reads denormals as 0).
  void (*pv_accumulate_bf16_rounded)(const float* p, int ldp, int n_heads, int n_rows,
                                     const uint16_t* const* v_rows, int dv, float* acc);
  // Optional (AVX512-BF16 with VNNI): attention over int8 rows (KvRowFormat kI8 with one kv head,
  // rows given by pointer, read in place). s[h * lds + j] = q[h] . row j for h < q.n_heads, with
  // the products of each body group and of the tail exact in int32 (vpdpbusd) times the query's
  // and the row's scales of that group.
  void (*dot_rows_i8)(const uint8_t* const* rows, int n_rows, const I8Query& q, float* s, int lds);
  // acc[h, :] += sum_j p[h * ldp + j] v_j for h < n_heads, j < n_rows <= 512, 0 <= p <= 1, where
  // v_j is the first dv values of row j's body (dequantised with its group scales; dv a multiple
  // of 32 and quant_group of 32). p * row scale is quantised to int16 in steps of (the group's
  // largest row scale / 32767), multiplied in exact int32 (vpdpwssd), then scaled back.
  void (*pv_accumulate_i8)(const float* p, int ldp, int n_heads, int n_rows,
                           const uint8_t* const* rows, int body_dim, int quant_group, int dv,
                           float* acc);
  // Optional (AVX512-BF16 or AMX): c[i, j] = sum_kk a[i, kk] . b[kk, j] for i < m, j < n,
  // where every a and b element is a pair of bf16 values in one 32-bit word (low half first) and
  // "." is the pair's dot product, accumulated in float32 (vdpbf16ps; AMX: tdpbf16ps tiles,
  // amx_pair_gemm.h). So a: [m, 2 k_pairs] bf16 row-major, and b: [2 k_pairs, n] with rows 2kk
  // and 2kk + 1 interleaved. Leading dimensions are in words (a, b) and floats (c). Used by
  // `--isa fast` for the tiled attention of prefill.
  void (*gemm_bf16_pairs)(int64_t m, int64_t n, int64_t k_pairs, const uint32_t* a, int64_t lda,
                          const uint32_t* b, int64_t ldb, float* c, int64_t ldc);
  // Whether bf16 and f16 matrices are read fastest in Layout16::kPacked16 (packed_bf16.h), so
  // that loading should pack them where it copies the weights anyway (Pack16BitFor).
  bool packed_bf16_fastest = false;
};

// Words of bf16_query_blocks' output for n_heads (a multiple of 16) and dim (of 4).
inline int64_t BF16QueryBlockWords(int n_heads, int dim) { return int64_t{n_heads} / 16 * dim * 8; }

// out[i] = F32ToBF16(x[i]) for i < n: k.round_to_bf16 where the table has it, else the scalar loop.
void RoundToBf16With(const KernelTable& k, const float* x, int64_t n, uint16_t* out);

// Bf16PairColumns (packed_bf16.h) by k.bf16_pair_columns where the table has it.
void Bf16PairColumnsWith(const KernelTable& k, const float* x, int64_t ldx, int64_t n_rows,
                         int64_t n_pairs, uint32_t* out, int64_t ld_out);

// Bf16PairRows (packed_bf16.h) by k.bf16_pair_rows where the table has it.
void Bf16PairRowsWith(const KernelTable& k, const float* a, const float* b, int64_t n,
                      uint32_t* out);

// Returns the table for `isa`; the caller must check IsaSupported(isa) first.
const KernelTable& GetKernelTable(Isa isa);
// The kernels of `--isa fast`: the table of FastestIsa(), except on AVX512-BF16 CPUs whose
// vdpbf16ps is slower than f32 FMAs (Bf16DotSpeedup() <= 1). There it is the exact AVX-512 table
// with the AVX512-BF16 table's attention over int8 cache rows (vpdpbusd scores, only the
// 64-value RoPE tail by vdpbf16ps) instead of the AVX-512 table's, which decodes the rows to
// float32 (on the Intel Xeon VM, int8 weights and cache, decode at depth 4096: 33.0 -> 47.3
// tok/s), plus, where AMX is supported, the AMX table's tile products for prefill batches and
// its pair GEMM (so that the prefill's attention runs on bf16 tiles there too).
const KernelTable& FastestKernelTable();

// The AMX-INT8 tiles' rate on packed Q8 products over the AVX-512 VNNI kernel's, measured once
// per process (TimeQ8Products, a few ms; on the first call, which the AMX tables' matmul_rows_q8
// makes at its first batch of 16+ tokens) on CPUs with AMX-INT8 granted; 0 elsewhere. The AMX
// tables multiply such batches by the tiles where it exceeds kQ8TilesMinSpeedup (their results
// are bitwise the VNNI kernel's, so the choice changes speed only).
double Q8TilesSpeedup();
inline constexpr double kQ8TilesMinSpeedup = 1.1;

// Where the time of the kernels goes, for `mlarun bench` (Exec::meter): weight products
// (MatMulBatch, with the weight bytes they read) and attention over the KV cache (the model's
// attention layers between writing the cache rows and o_proj, less the products inside).
struct ExecMeter {
  double product_seconds = 0.0;
  int64_t product_weight_bytes = 0;
  int64_t product_batches = 0;  // MatMulBatch calls (parallel regions)
  double attention_seconds = 0.0;
  // MatMulBatch calls of one shape (`mlarun bench --products`): the number of jobs, the first
  // job's rows x cols and tokens, and the weight bytes of the whole call.
  struct ProductShape {
    int64_t jobs = 0;
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t tokens = 0;
    int64_t weight_bytes = 0;  // per call
    int64_t calls = 0;
    double seconds = 0.0;
  };
  bool by_shape = false;  // also fill `shapes`, in the order each shape first ran
  std::vector<ProductShape> shapes;
};

// What a kernel call needs: the worker threads and the kernels of the chosen ISA.
struct Exec {
  ThreadPool& pool;
  const KernelTable& k;
  // Reused temporaries of the forward pass (owned by the caller, who keeps it across calls);
  // null: each forward pass uses a fresh one.
  ScratchArena* scratch = nullptr;
  // Adds up the time of the weight products and attention while set; null: not measured
  // (`mlarun bench` sets it around its decode runs).
  ExecMeter* meter = nullptr;
};

// Adds the wall time of its scope, less that of the weight products run inside it, to
// exec.meter->attention_seconds (nothing when exec.meter is null).
class AttentionMeterScope {
 public:
  explicit AttentionMeterScope(const Exec& exec)
      : meter_(exec.meter),
        start_(meter_ != nullptr ? std::chrono::steady_clock::now()
                                 : std::chrono::steady_clock::time_point{}),
        products_before_(meter_ != nullptr ? meter_->product_seconds : 0.0) {}
  ~AttentionMeterScope() {
    if (meter_ == nullptr) return;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    meter_->attention_seconds += elapsed - (meter_->product_seconds - products_before_);
  }
  AttentionMeterScope(const AttentionMeterScope&) = delete;
  AttentionMeterScope& operator=(const AttentionMeterScope&) = delete;

 private:
  ExecMeter* meter_;
  std::chrono::steady_clock::time_point start_;
  double products_before_;
};

namespace detail {
const KernelTable& ScalarKernelTable();
const KernelTable& Avx2KernelTable();
const KernelTable& Avx512KernelTable();
const KernelTable& Avx512Bf16KernelTable();
const KernelTable& AmxKernelTable();
// Puts the AMX kernels (tile products of packed bf16 weights for batches of 16+ tokens, the bf16
// pair GEMM and, with AMX-INT8, matmul_rows_q8_tiles) into `t`.
void InstallAmxKernels(KernelTable* t);
// Multiply-adds per second of vdpbf16ps over 512-bit f32 FMAs on this core, timed in register
// loops (cpu/bf16_dot_rate.cc; call only where AVX512-BF16 is supported).
double MeasureBf16DotSpeedup();
// Best of 3 alternating rounds of seconds per call of `first` and `second` (each a
// matmul_rows_q8) on one product, on the calling thread: 64 tokens through 512 x 2048 packed Q8
// weights (zeros: the kernels' time does not depend on the values).
struct Q8ProductTimes {
  double first_seconds = 0.0;
  double second_seconds = 0.0;
};
Q8ProductTimes TimeQ8Products(MatMulRowsQ8Fn first, MatMulRowsQ8Fn second);
// Q8TilesSpeedup's measurement (kernels_amx.cc; call only where IsaSupported(kAmx) and the CPU
// has AMX-INT8): once per process, cached.
double MeasuredQ8TilesSpeedup();
}  // namespace detail

}  // namespace mlarun
