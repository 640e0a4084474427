// The one attention core for every variant. MHA, GQA and MQA differ only in `n_head_kv`; absorbed
// MLA decode is MQA over 576-wide latent rows whose first 512 values are also V; naive MLA prefill
// is MHA 192/128 over expanded rows. Which cached rows a query sees (causal mask, sliding window,
// sinks, compressed summaries) is given as a list of spans, so the kernel knows no policy.
//
// Symbols: q [n_head_q, head_dim_qk]; row = one cached token (KvRowFormat); query head h reads
// kv head h / (n_head_q / n_head_kv); s = scale * q.k + span.score_bias;
// out[h] = sum softmax(s) * v  (online softmax, Milakov & Gimelshein 2018).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/kv_row.h"

namespace mlarun {

// Per layer, computed once from the model config; fully describes the core kernel's job.
struct AttentionSpec {
  int n_head_q = 0;
  int n_head_kv = 0;    // MHA: n_head_q; GQA: divides n_head_q; MQA and absorbed MLA: 1
  int head_dim_qk = 0;  // absorbed MLA: kv_lora_rank + rope_dim (512 + 64 = 576)
  int head_dim_v = 0;   // absorbed MLA: kv_lora_rank; V is a prefix view of K
  bool v_aliases_k = false;
  int window = 0;      // 0 = full causal; > 0 = the last `window` tokens (informs the cache)
  float scale = 1.0f;  // softmax scale; MLA: mscale^2 / sqrt(nope + rope), 192-wide even absorbed
};

// Rows of one layer: row `r` of block `b` starts at base + b * block_stride + r * row_bytes.
struct KvRows {
  const uint8_t* base = nullptr;
  size_t block_stride = 0;
  KvRowFormat format;

  const uint8_t* Row(int32_t block, int32_t row) const {
    return base + static_cast<size_t>(block) * block_stride +
           static_cast<size_t>(row) * format.RowBytes();
  }
};

// `n_rows` consecutive rows of one block, all visible to the query, each with the same additive
// score bias (0 for ordinary tokens; ln(K) for a summary of K tokens).
struct KvSpan {
  int32_t block = 0;
  int32_t row_begin = 0;
  int32_t n_rows = 0;
  float score_bias = 0.0f;
};

// Rows a query sees through `spans`.
inline int64_t TotalRows(std::span<const KvSpan> spans) {
  int64_t total = 0;
  for (const KvSpan& span : spans) total += span.n_rows;
  return total;
}

// Running softmax state of `n_head` query heads: max score, sum of exp, weighted V sum.
struct AttentionPartial {
  float* max_score;  // [n_head]
  float* sum_exp;    // [n_head]
  float* acc;        // [n_head, head_dim_v]
};

// The query as the bf16-row kernels read it (PrepareBf16Query): rounded to bf16 and, for whole
// blocks of 16 heads, laid out by bf16_query_blocks (`--isa fast`), or in the exact kernels' pair
// form.
struct Bf16QueryBuffer {
  std::vector<uint16_t> q_bf16;    // [n_head_q, head_dim_qk]
  std::vector<uint32_t> q_blocks;  // [n_head_kv, BF16QueryBlockWords(blocked heads, head_dim_qk)]
  std::vector<float> q_pairs;      // [n_head_q, head_dim_qk]
};

// Arguments of one query token's attention over some spans.
struct AttendArgs {
  const float* q = nullptr;  // [n_head_q, head_dim_qk]
  std::span<const KvSpan> spans;
  int kv_head_begin = 0;  // only kv heads [kv_head_begin, kv_head_end) and their query groups
  int kv_head_end = -1;   // -1: all
  // Of each selected group, only query heads [q_head_begin, q_head_end) (indices within the group;
  // -1: to its end); both multiples of kAttentionHeadBlock or the group's end. Every head's
  // result is bitwise the same whichever heads are computed with it.
  int q_head_begin = 0;
  int q_head_end = -1;
  // q prepared for the int8-row kernels (UsesI8Kernels); null: prepared per call.
  const I8Query* i8_query = nullptr;
  // q prepared for the bf16-row kernels by PrepareBf16Query with these arguments' heads (so that
  // the pieces of one context prepare it once); null: prepared per call.
  const Bf16QueryBuffer* bf16_query = nullptr;
};

// Whether attention over rows of `format` uses the int8-row kernels of `k` (dot_rows_i8,
// pv_accumulate_i8): int8 rows of one kv head whose V is a prefix of the body (absorbed MLA, MQA),
// query heads a multiple of 16, groups of a multiple of 64 values.
bool UsesI8Kernels(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format);

// The storage behind an I8Query.
struct I8QueryBuffer {
  std::vector<int32_t> body;
  std::vector<float> scales;
  std::vector<int32_t> offsets;
  std::vector<int32_t> tail;
  std::vector<float> tail_scales;
  std::vector<int32_t> tail_offsets;
  I8Query view;
};

// Quantises q [n_head_q, head_dim_qk] for the int8-row kernels: per head and group of the rows'
// quant_group body values, scale = max |q| / 127 and q_int = round(q / scale) (as the rows are
// quantised, kv_row.cc) by k.quantize_group_i8; the tail likewise in the rows' kRopeTailGroups
// groups. Requires UsesI8Kernels.
void PrepareI8Query(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format,
                    const float* q, I8QueryBuffer* out);
// PrepareI8Query in two steps, so that threads can quantise disjoint heads into one buffer: size
// `out` (and set its view), then quantise query heads [h_begin, h_end) (multiples of 16 or
// n_head_q).
void SizeI8Query(const AttentionSpec& spec, const KvRowFormat& format, I8QueryBuffer* out);
void QuantiseI8QueryHeads(const KernelTable& k, const AttentionSpec& spec,
                          const KvRowFormat& format, const float* q, int h_begin, int h_end,
                          I8QueryBuffer* out);

// Prepares args.q for the bf16-row kernels of `k` (rows of `format` read in place: bf16 rows and a
// table with dot_rows_bf16), for the query heads `args` selects; does nothing for other rows.
void PrepareBf16Query(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format,
                      const AttendArgs& args, Bf16QueryBuffer* out);

// Accumulates the spans into `partial` (state for all n_head_q heads; only the selected heads
// are touched). Initialise with ResetPartial.
void AttendPartial(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
                   const AttendArgs& args, AttentionPartial partial);
void ResetPartial(const AttentionSpec& spec, AttentionPartial partial);
// The same for query heads [h_begin, h_end) only.
void ResetPartial(const AttentionSpec& spec, AttentionPartial partial, int h_begin, int h_end);
// Merges `other` into `into` (split-context attention).
void MergePartial(const KernelTable& k, const AttentionSpec& spec, AttentionPartial into,
                  AttentionPartial other);
// The same for query heads [h_begin, h_end) only.
void MergePartial(const KernelTable& k, const AttentionSpec& spec, AttentionPartial into,
                  AttentionPartial other, int h_begin, int h_end);
// Writes out[h] = acc[h] / sum_exp[h] for the selected heads; out: [n_head_q, head_dim_v].
void FinishPartial(const AttentionSpec& spec, AttentionPartial partial, int kv_head_begin,
                   int kv_head_end, float* out);
// The same for query heads [h_begin, h_end).
void FinishHeads(const AttentionSpec& spec, AttentionPartial partial, int h_begin, int h_end,
                 float* out);

// How the context is split. Attention is computed as partial softmax states of consecutive pieces
// of the context, merged in order, so the result is the same whether the pieces run on one thread
// (Attend) or many (AttendParallel). The piece length depends only on the number of rows (never
// on the thread count): about a quarter of them, a multiple of 64, at least kAttentionMinChunkRows
// and at most kAttentionMaxChunkRows. Each piece is computed in tiles of kAttentionTileRows rows.
constexpr int32_t kAttentionTileRows = 256;
constexpr int32_t kAttentionMinChunkRows = 256;
constexpr int32_t kAttentionMaxChunkRows = 1024;
constexpr int32_t kAttentionTargetChunks = 4;
// Query heads per item where AttendParallel also splits the heads of an MQA group (absorbed MLA):
// the int8-row kernels' head block, a multiple of every kernel's head tiling.
constexpr int kAttentionHeadBlock = 16;
// Returns the rows per piece for a context of `n_rows` rows.
int32_t AttentionChunkRows(int64_t n_rows);

// One query token over its spans; out: [n_head_q, head_dim_v].
void Attend(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
            const AttendArgs& args, float* out);
// The same, with the context pieces spread over the pool's threads (long-context decode); where
// the pieces alone would leave threads idle, each piece's heads are split too (kv heads, or blocks
// of kAttentionHeadBlock query heads of one kv head), which changes no result. args.q_head_begin
// and q_head_end must be left at their defaults (the split sets them).
void AttendParallel(Exec& exec, const AttentionSpec& spec, const KvRows& rows,
                    const AttendArgs& args, float* out);
// The head blocks AttendParallel splits each of `n_pieces` context pieces into on `threads`
// threads: the fewest that give every thread the same number of (piece, block) items or at least
// 4, and at most the selected kv heads (GQA, MHA) or, with one kv head, its query heads' blocks
// of kAttentionHeadBlock; so 1 where the pieces divide evenly.
int AttentionHeadBlocks(const AttentionSpec& spec, const AttendArgs& args, int64_t n_pieces,
                        int threads);

}  // namespace mlarun
