// Portable attention core. Each cached row is decoded once and used by every query head that
// reads it (for MQA / absorbed MLA: all heads), so the cache is streamed once per query token.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "kernels/matmul.h"  // WeightMatrix views of tile rows

namespace mlarun {

void ResetPartial(const AttentionSpec& spec, AttentionPartial partial) {
  ResetPartial(spec, partial, 0, spec.n_head_q);
}

void ResetPartial(const AttentionSpec& spec, AttentionPartial partial, int h_begin, int h_end) {
  std::fill(partial.max_score + h_begin, partial.max_score + h_end, -INFINITY);
  std::fill(partial.sum_exp + h_begin, partial.sum_exp + h_end, 0.0f);
  const size_t dv = static_cast<size_t>(spec.head_dim_v);
  std::fill(partial.acc + h_begin * dv, partial.acc + h_end * dv, 0.0f);
}

bool UsesI8Kernels(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format) {
  const int body = format.head_dim_k - format.rope_tail_dim;
  return format.dtype == DType::kI8 && k.dot_rows_i8 != nullptr && format.n_head_kv == 1 &&
         format.v_aliases_k && spec.n_head_q % 16 == 0 && format.quant_group % 64 == 0 &&
         body > 0 && body % format.quant_group == 0 && spec.head_dim_v <= body &&
         spec.head_dim_v % 32 == 0;
}

void PrepareI8Query(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format,
                    const float* q, I8QueryBuffer* out) {
  SizeI8Query(spec, format, out);
  QuantiseI8QueryHeads(k, spec, format, q, 0, spec.n_head_q, out);
}

void SizeI8Query(const AttentionSpec& spec, const KvRowFormat& format, I8QueryBuffer* out) {
  const int n_heads = spec.n_head_q;
  const int body = format.head_dim_k - format.rope_tail_dim;
  const int tail = format.rope_tail_dim;
  const int group = format.quant_group;
  const int n_groups = body / group;
  const size_t blocks = static_cast<size_t>(n_heads / 16);
  // Sized, not zero-filled: QuantiseI8QueryHeads writes every element of its heads (n_heads fills
  // whole 16-lane blocks).
  out->body.resize(blocks * static_cast<size_t>(body / 4) * 16);
  out->scales.resize(blocks * static_cast<size_t>(n_groups) * 16);
  out->offsets.resize(out->scales.size());
  const int tail_groups = tail > 0 ? kRopeTailGroups : 0;
  const int tail_group = format.TailGroupValues();
  out->tail.resize(blocks * static_cast<size_t>(tail_groups * ((tail_group + 7) / 8)) * 32);
  out->tail_scales.resize(blocks * static_cast<size_t>(tail_groups) * 16);
  out->tail_offsets.resize(out->tail_scales.size());
  out->view = {.n_heads = n_heads,
               .body_dim = body,
               .quant_group = group,
               .tail_dim = tail,
               .tail_groups = tail_groups,
               .tail_group = tail_group,
               .row_bytes = static_cast<int>(format.RowBytes()),
               .body = out->body.data(),
               .scales = out->scales.data(),
               .offsets = out->offsets.data(),
               .tail = out->tail.data(),
               .tail_scales = out->tail_scales.data(),
               .tail_offsets = out->tail_offsets.data()};
}

void QuantiseI8QueryHeads(const KernelTable& k, const AttentionSpec& spec,
                          const KvRowFormat& format, const float* q, int h_begin, int h_end,
                          I8QueryBuffer* out) {
  const int dk = format.head_dim_k;
  const int body = dk - format.rope_tail_dim;
  const int tail = format.rope_tail_dim;
  const int group = format.quant_group;
  const int n_groups = body / group;
  const int tail_groups = out->view.tail_groups;
  const int tail_group = out->view.tail_group;
  const int tail_quad_pairs = out->view.TailQuadPairs();
  // Each tail group zero-padded to a multiple of 16 values (quantize_group_i8's unit): zeros
  // change neither its maximum nor its sum, and fill the group's last word of the layout.
  const int group_padded = (tail_group + 15) / 16 * 16;
  thread_local std::vector<int8_t> values;  // one head's quantised body, then a padded tail group
  thread_local std::vector<float> tail_in;
  values.resize(static_cast<size_t>(body + group_padded));
  tail_in.resize(static_cast<size_t>(group_padded));
  uint8_t* body_words = reinterpret_cast<uint8_t*>(out->body.data());
  uint8_t* tail_words = reinterpret_cast<uint8_t*>(out->tail.data());
  for (int h = h_begin; h < h_end; ++h) {
    const float* qh = q + static_cast<ptrdiff_t>(h) * dk;
    const size_t hb = static_cast<size_t>(h / 16);
    const size_t lane = static_cast<size_t>(h % 16);
    for (int g = 0; g < n_groups; ++g) {
      float scale = 0.0f;
      const int32_t sum =
          k.quantize_group_i8(qh + static_cast<ptrdiff_t>(g) * group, group,
                              values.data() + static_cast<ptrdiff_t>(g) * group, &scale);
      const size_t at = (hb * static_cast<size_t>(n_groups) + static_cast<size_t>(g)) * 16 + lane;
      out->scales[at] = scale;
      out->offsets[at] = -128 * sum;
    }
    // I8Query's body layout: [blocks, body / 8, 2, 16] words, i.e. per block and 8 columns one
    // 8-byte word per head (lane), heads in order; each tail group's likewise.
    for (int c = 0; c < body; c += 8) {
      const size_t word =
          (hb * static_cast<size_t>(body / 8) + static_cast<size_t>(c / 8)) * 16 + lane;
      std::memcpy(body_words + 8 * word, values.data() + c, 8);
    }
    for (int g = 0; g < tail_groups; ++g) {
      const int begin = std::min(tail, g * tail_group);
      const int n = std::min(tail, begin + tail_group) - begin;
      std::fill(tail_in.begin(), tail_in.end(), 0.0f);
      std::copy_n(qh + body + begin, n, tail_in.begin());
      float scale = 0.0f;
      const int32_t sum =
          k.quantize_group_i8(tail_in.data(), group_padded, values.data() + body, &scale);
      const size_t block_group = hb * static_cast<size_t>(tail_groups) + static_cast<size_t>(g);
      out->tail_scales[block_group * 16 + lane] = scale;
      out->tail_offsets[block_group * 16 + lane] = -128 * sum;
      for (int p = 0; p < tail_quad_pairs; ++p) {
        const size_t word =
            (block_group * static_cast<size_t>(tail_quad_pairs) + static_cast<size_t>(p)) * 16 +
            lane;
        std::memcpy(tail_words + 8 * word, values.data() + body + 8 * p, 8);
      }
    }
  }
}

namespace {

// Query heads [h_begin, h_end) of `q` (multiples of 16: its head blocks).
I8Query I8QueryHeads(const I8Query& q, int h_begin, int h_end) {
  const int64_t hb = h_begin / 16;
  const int64_t n_groups = q.body_dim / q.quant_group;
  I8Query out = q;
  out.n_heads = h_end - h_begin;
  out.body += hb * (q.body_dim / 4) * 16;
  out.scales += hb * n_groups * 16;
  out.offsets += hb * n_groups * 16;
  out.tail += hb * q.tail_groups * q.TailQuadPairs() * 32;
  out.tail_scales += hb * q.tail_groups * 16;
  out.tail_offsets += hb * q.tail_groups * 16;
  return out;
}

// The query the int8-row kernels read: args.i8_query if the caller prepared it, else `q`
// quantised into `buffer`; null where the kernels do not apply.
const I8Query* I8QueryFor(const KernelTable& k, const AttentionSpec& spec,
                          const KvRowFormat& format, const AttendArgs& args,
                          I8QueryBuffer* buffer) {
  if (args.i8_query != nullptr) return args.i8_query;
  if (!UsesI8Kernels(k, spec, format)) return nullptr;
  PrepareI8Query(k, spec, format, args.q, buffer);
  return &buffer->view;
}

// Heads of nq per group that the rounded bf16 scores take by dot_rows_bf16_blocks (whole blocks of
// 16 where the table has the two-step kernels), the rest by dot_rows_bf16_rounded.
int Bf16BlockedHeads(const KernelTable& k, const AttentionSpec& spec, int nq) {
  return k.dot_rows_bf16_rounded != nullptr && k.dot_rows_bf16_blocks != nullptr &&
                 spec.head_dim_qk % 4 == 0
             ? nq / 16 * 16
             : 0;
}

}  // namespace

void PrepareBf16Query(const KernelTable& k, const AttentionSpec& spec, const KvRowFormat& format,
                      const AttendArgs& args, Bf16QueryBuffer* out) {
  if (format.dtype != DType::kBF16 || k.dot_rows_bf16 == nullptr) return;
  const int group = spec.n_head_q / spec.n_head_kv;
  const int kv_end = args.kv_head_end < 0 ? spec.n_head_kv : args.kv_head_end;
  const int q0 = args.q_head_begin;
  const int q1 = args.q_head_end < 0 ? group : args.q_head_end;
  const int dk = spec.head_dim_qk;
  if (k.dot_rows_bf16_rounded != nullptr) {  // the query rounded to bf16 (`--isa fast`)
    const int blocked = Bf16BlockedHeads(k, spec, q1 - q0);
    const int64_t block_words = blocked > 0 ? BF16QueryBlockWords(blocked, dk) : 0;
    out->q_bf16.resize(static_cast<size_t>(spec.n_head_q) * dk);
    out->q_blocks.resize(static_cast<size_t>(spec.n_head_kv * block_words));
    for (int g = args.kv_head_begin; g < kv_end; ++g) {
      const int64_t q_begin = (int64_t{g} * group + q0) * dk;
      const int64_t q_end = (int64_t{g} * group + q1) * dk;
      RoundToBf16With(k, args.q + q_begin, q_end - q_begin, out->q_bf16.data() + q_begin);
      if (blocked > 0) {
        k.bf16_query_blocks(out->q_bf16.data() + q_begin, blocked, dk,
                            out->q_blocks.data() + g * block_words);
      }
    }
    return;
  }
  out->q_pairs.resize(static_cast<size_t>(spec.n_head_q) * dk);  // exact: the pair form
  for (int g = args.kv_head_begin; g < kv_end; ++g) {
    for (int h = g * group + q0; h < g * group + q1; ++h) {
      k.bf16_pair_form(args.q + static_cast<ptrdiff_t>(h) * dk, dk,
                       out->q_pairs.data() + static_cast<size_t>(h) * dk);
    }
  }
}

namespace {

// The query the bf16-row kernels read (as I8QueryFor for int8 rows): args.bf16_query if the caller
// prepared it, else args.q prepared into `buffer`; null where rows of `format` are not read in
// place as bf16.
const Bf16QueryBuffer* Bf16QueryFor(const KernelTable& k, const AttentionSpec& spec,
                                    const KvRowFormat& format, const AttendArgs& args,
                                    Bf16QueryBuffer* buffer) {
  if (args.bf16_query != nullptr) return args.bf16_query;
  if (format.dtype != DType::kBF16 || k.dot_rows_bf16 == nullptr) return nullptr;
  PrepareBf16Query(k, spec, format, args, buffer);
  return buffer;
}

}  // namespace

void AttendPartial(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
                   const AttendArgs& args, AttentionPartial partial) {
  // Rows are processed in tiles of consecutive rows of the span list (whatever blocks
  // they sit in, so paged and contiguous caches give identical results): the tile is scored
  // against every query head that reads it, then each head makes one softmax update per tile (a
  // single rescale when the maximum grows, vectorised exp) and adds the weighted V.
  // bf16 rows are read in place where the ISA has kernels for it: exact float32 products of the
  // widened rows (the query permuted once into the kernels' pair form), or, in tables with
  // vdpbf16ps attention (`--isa fast`), the query and the probabilities rounded to bf16. Other
  // rows are first decoded into a float tile.
  const KvRowFormat& format = rows.format;
  const bool in_place = format.dtype == DType::kBF16 && k.dot_rows_bf16 != nullptr;
  // int8 rows read in place by the VNNI kernels (the query quantised to int8, see kernel_table.h).
  const bool int8_rows = UsesI8Kernels(k, spec, format);
  const bool by_pointer = in_place || int8_rows;
  // Rows read in place: tiles of kAttentionTileRows, so the P V kernels load and store their
  // accumulators once per 256 rows, not once per 32 (BM_AbsorbedMlaDecode, bf16 rows at depth
  // 4096: 0.78 -> 0.55 ms with vdpbf16ps, 1.33 -> 1.04 ms in float32); the tile's rows (288 KB
  // for MLA) stay in L2 between the scores and P V. Decoded rows: 32 per tile, so the float copy
  // stays small.
  constexpr int kMaxTileRows = kAttentionTileRows;
  const int tile_rows = by_pointer ? kMaxTileRows : 32;
  // bf16 dot products (fast ISA): the query and the probabilities are rounded to bf16.
  const bool rounded = in_place && k.dot_rows_bf16_rounded != nullptr;
  const int group = spec.n_head_q / spec.n_head_kv;
  const int kv_end = args.kv_head_end < 0 ? spec.n_head_kv : args.kv_head_end;
  const int q0 = args.q_head_begin;  // query heads [q0, q1) of each group
  const int q1 = args.q_head_end < 0 ? group : args.q_head_end;
  const int nq = q1 - q0;
  const int dk = spec.head_dim_qk;
  const int dv = spec.head_dim_v;
  const int values = format.ValuesPerRow();
  thread_local std::vector<float> tile;
  thread_local std::vector<float> bias;
  thread_local std::vector<float> scores;
  thread_local std::vector<float> probs;  // [n, group]: the scores' transpose, as P V reads it
  const uint8_t* raw_rows[kMaxTileRows];
  bias.resize(tile_rows);
  scores.resize(static_cast<size_t>(group) * tile_rows);
  probs.resize(scores.size());
  // Rounded: heads [q0, q0 + blocked) of each group by dot_rows_bf16_blocks (the query laid out
  // once per call, or by the caller for all its calls), the rest by dot_rows_bf16_rounded, which
  // scores a call's first whole blocks of 16 heads the same way; so a head's kernel depends only
  // on its index from q0 (a multiple of 16 under AttendParallel's head split), as before.
  const int blocked = rounded ? Bf16BlockedHeads(k, spec, nq) : 0;
  const int64_t block_words = blocked > 0 ? BF16QueryBlockWords(blocked, dk) : 0;
  thread_local Bf16QueryBuffer own_bf16_query;
  const Bf16QueryBuffer* bf16_query = Bf16QueryFor(k, spec, format, args, &own_bf16_query);
  const uint16_t* q_bf16 = rounded ? bf16_query->q_bf16.data() : nullptr;
  const uint32_t* q_blocks = blocked > 0 ? bf16_query->q_blocks.data() : nullptr;
  const float* q_pairs = in_place && !rounded ? bf16_query->q_pairs.data() : nullptr;
  if (!in_place && !int8_rows) {
    tile.resize(static_cast<size_t>(tile_rows) * values);
  }
  thread_local I8QueryBuffer own_i8_query;
  const I8Query* i8_query = int8_rows ? I8QueryFor(k, spec, format, args, &own_i8_query) : nullptr;
  const I8Query i8_heads =
      i8_query != nullptr && nq != group ? I8QueryHeads(*i8_query, q0, q1) : I8Query{};
  if (i8_query != nullptr && nq != group) i8_query = &i8_heads;
  const size_t row_bytes = format.RowBytes();
  int n = 0;  // rows in the tile
  auto process_tile = [&] {
    for (int g = args.kv_head_begin; g < kv_end; ++g) {
      // Scores of the group's heads: S [nq, n] = Q_g [nq, dk] K^T, as a small GEMM. Row i of
      // `scores` (and column i of `probs`) is head g * group + q0 + i.
      const uint16_t* k_rows[kMaxTileRows];
      const uint16_t* v_rows[kMaxTileRows];
      const int64_t q_first = int64_t{g} * group + q0;
      if (int8_rows) {
        k.dot_rows_i8(raw_rows, n, *i8_query, scores.data(), n);
      } else if (in_place) {
        for (int j = 0; j < n; ++j) {
          const uint16_t* row = reinterpret_cast<const uint16_t*>(raw_rows[j]);
          k_rows[j] = row + static_cast<ptrdiff_t>(g) * format.head_dim_k;
          v_rows[j] = row + format.VOffset(g);
        }
        if (rounded) {
          if (blocked > 0) {
            k.dot_rows_bf16_blocks(k_rows, n, q_blocks + g * block_words, blocked, dk,
                                   scores.data(), n);
          }
          if (blocked < nq) {
            k.dot_rows_bf16_rounded(k_rows, n, q_bf16 + (q_first + blocked) * dk, nq - blocked, dk,
                                    scores.data() + int64_t{blocked} * n, n);
          }
        } else {
          k.dot_rows_bf16(k_rows, n, q_pairs + q_first * dk, nq, dk, scores.data(), n);
        }
      } else {
        const WeightMatrix keys{.dtype = DType::kF32,
                                .rows = n,
                                .cols = dk,
                                .data = tile.data() + static_cast<ptrdiff_t>(g) * format.head_dim_k,
                                .row_stride = values};
        k.matmul_rows(keys, 0, n, args.q + q_first * dk, nq, scores.data(), n);
      }
      for (int i = 0; i < nq; ++i) {
        const int h = static_cast<int>(q_first) + i;
        float* s_row = scores.data() + static_cast<size_t>(i) * n;
        const float tile_max = k.scale_bias_max(s_row, spec.scale, bias.data(), n);
        float* acc = partial.acc + static_cast<size_t>(h) * dv;
        if (tile_max > partial.max_score[h]) {
          if (partial.sum_exp[h] > 0.0f) {
            const float correction = std::exp(partial.max_score[h] - tile_max);
            partial.sum_exp[h] *= correction;
            k.scale(correction, acc, dv);
          }
          partial.max_score[h] = tile_max;
        }
        // exp and their sum in float32 (the rounded P V rounds only the weights it multiplies).
        partial.sum_exp[h] += k.exp_shift_sum(s_row, partial.max_score[h], n);
        if (!rounded && !int8_rows) {  // the f32 P V reads the probabilities transposed
          for (int j = 0; j < n; ++j)
            probs[static_cast<size_t>(j) * nq + static_cast<size_t>(i)] = s_row[j];
        }
      }
      // acc_h += sum_j p_hj v_j for the selected heads at once.
      float* heads_acc = partial.acc + static_cast<size_t>(q_first) * dv;
      if (int8_rows) {
        k.pv_accumulate_i8(scores.data(), n, nq, n, raw_rows,
                           format.head_dim_k - format.rope_tail_dim, format.quant_group, dv,
                           heads_acc);
      } else if (rounded) {
        k.pv_accumulate_bf16_rounded(scores.data(), n, nq, n, v_rows, dv, heads_acc);
      } else if (in_place) {
        k.pv_accumulate_bf16(probs.data(), nq, n, v_rows, dv, heads_acc);
      } else {
        k.pv_accumulate(probs.data(), nq, n, tile.data() + format.VOffset(g), values, dv,
                        heads_acc);
      }
    }
    n = 0;
  };
  for (const KvSpan& span : args.spans) {
    const uint8_t* span_rows = rows.Row(span.block, span.row_begin);
    for (int32_t r = 0; r < span.n_rows; ++r) {
      const uint8_t* raw = span_rows + static_cast<size_t>(r) * row_bytes;
      if (by_pointer) {
        raw_rows[n] = raw;
      } else {
        float* dst = tile.data() + static_cast<size_t>(n) * values;
        if (format.dtype == DType::kF32) {
          std::memcpy(dst, raw, static_cast<size_t>(values) * sizeof(float));
        } else if (format.dtype == DType::kBF16) {
          k.bf16_to_f32(reinterpret_cast<const uint16_t*>(raw), dst, values);
        } else {
          DecodeKvRow(format, raw, dst);
        }
      }
      bias[static_cast<size_t>(n)] = span.score_bias;
      if (++n == tile_rows) process_tile();
    }
  }
  if (n > 0) process_tile();
}

void MergePartial(const KernelTable& k, const AttentionSpec& spec, AttentionPartial into,
                  AttentionPartial other) {
  MergePartial(k, spec, into, other, 0, spec.n_head_q);
}

void MergePartial(const KernelTable& k, const AttentionSpec& spec, AttentionPartial into,
                  AttentionPartial other, int h_begin, int h_end) {
  const int dv = spec.head_dim_v;
  for (int h = h_begin; h < h_end; ++h) {
    if (other.sum_exp[h] == 0.0f) continue;
    const float m = std::max(into.max_score[h], other.max_score[h]);
    const float a = into.sum_exp[h] == 0.0f ? 0.0f : std::exp(into.max_score[h] - m);
    const float b = std::exp(other.max_score[h] - m);
    float* acc = into.acc + static_cast<size_t>(h) * dv;
    const float* other_acc = other.acc + static_cast<size_t>(h) * dv;
    // acc = acc a + other b with the table's vector kernels: as a scalar loop, the serial merge of
    // a parallel decode's pieces (then 16 of 256 rows at depth 4096) took 2.3% of the perf samples
    // of BM_AbsorbedMlaDecode (2 threads, int8 rows).
    k.scale(a, acc, dv);
    k.axpy(b, other_acc, acc, dv);
    into.sum_exp[h] = into.sum_exp[h] * a + other.sum_exp[h] * b;
    into.max_score[h] = m;
  }
}

void FinishPartial(const AttentionSpec& spec, AttentionPartial partial, int kv_head_begin,
                   int kv_head_end, float* out) {
  const int group = spec.n_head_q / spec.n_head_kv;
  const int kv_end = kv_head_end < 0 ? spec.n_head_kv : kv_head_end;
  FinishHeads(spec, partial, kv_head_begin * group, kv_end * group, out);
}

void FinishHeads(const AttentionSpec& spec, AttentionPartial partial, int h_begin, int h_end,
                 float* out) {
  const int dv = spec.head_dim_v;
  for (int h = h_begin; h < h_end; ++h) {
    const float inv = partial.sum_exp[h] > 0.0f ? 1.0f / partial.sum_exp[h] : 0.0f;
    for (int i = 0; i < dv; ++i) out[h * dv + i] = partial.acc[h * dv + i] * inv;
  }
}

int32_t AttentionChunkRows(int64_t n_rows) {
  // Few long pieces rather than many short ones: each piece costs a state reset, a merge on the
  // calling thread (reading a state the other core wrote) and a hand-off. BM_AbsorbedMlaDecode,
  // depth 4096, 2 threads, rows in cache, 3 alternating runs (AMD VM): fixed 256-row pieces
  // 308-325 us (bf16 rows) / 286-294 us (int8 rows), 512-row pieces 290-303 / 265-277, 1,024-row
  // pieces 252-269 / 249-260. Four pieces still keep 2 or 4 threads evenly busy; with more threads,
  // contexts under 4 x 1,024 rows use only some of them.
  const int64_t per_chunk = (n_rows + kAttentionTargetChunks - 1) / kAttentionTargetChunks;
  const int64_t rounded = (per_chunk + 63) / 64 * 64;
  return static_cast<int32_t>(
      std::clamp<int64_t>(rounded, kAttentionMinChunkRows, kAttentionMaxChunkRows));
}

namespace {

// The context's spans cut into pieces of AttentionChunkRows(total rows) rows: piece c is
// spans[begin[c], begin[c + 1]). Kept across calls, so that cutting allocates nothing.
struct ContextPieces {
  std::vector<KvSpan> spans;
  std::vector<size_t> begin;

  size_t size() const { return begin.empty() ? 0 : begin.size() - 1; }
  std::span<const KvSpan> operator[](size_t c) const {
    return std::span(spans).subspan(begin[c], begin[c + 1] - begin[c]);
  }
};

void CutIntoPieces(std::span<const KvSpan> context, ContextPieces* pieces) {
  pieces->spans.clear();
  pieces->begin.clear();
  const int32_t piece_rows = AttentionChunkRows(TotalRows(context));
  int32_t room = 0;
  for (KvSpan span : context) {
    while (span.n_rows > 0) {
      if (room == 0) {
        pieces->begin.push_back(pieces->spans.size());
        room = piece_rows;
      }
      const int32_t take = std::min(room, span.n_rows);
      pieces->spans.push_back({.block = span.block,
                               .row_begin = span.row_begin,
                               .n_rows = take,
                               .score_bias = span.score_bias});
      span.row_begin += take;
      span.n_rows -= take;
      room -= take;
    }
  }
  if (!pieces->spans.empty()) pieces->begin.push_back(pieces->spans.size());
}

// Views `buffer` (n_head * (2 + head_dim_v) floats from `offset`) as a partial state.
AttentionPartial PartialAt(const AttentionSpec& spec, std::vector<float>& buffer, size_t offset) {
  const size_t n_head = static_cast<size_t>(spec.n_head_q);
  float* base = buffer.data() + offset;
  return {base, base + n_head, base + 2 * n_head};
}

size_t PartialFloats(const AttentionSpec& spec) {
  return static_cast<size_t>(spec.n_head_q) * (2 + static_cast<size_t>(spec.head_dim_v));
}

// How AttendParallel splits the selected heads of each context piece: into n_blocks contiguous
// ranges of kv heads or, with one kv head, of kAttentionHeadBlock query heads.
struct HeadSplit {
  int kv_begin = 0;
  int kv_end = 0;
  int q_blocks = 0;  // query head blocks of the one kv head's group (0: split kv heads)
  int group = 0;
  int n_blocks = 1;

  // The query heads [first, second) of block b (contiguous: all of some kv heads' groups, or
  // part of the one kv head's).
  std::pair<int, int> Heads(int b) const {
    const AttendArgs a = Block(AttendArgs{}, b);
    const int q_end = a.q_head_end < 0 ? group : a.q_head_end;
    if (q_blocks == 0) return {a.kv_head_begin * group, a.kv_head_end * group};
    return {kv_begin * group + a.q_head_begin, kv_begin * group + q_end};
  }

  // The arguments of block b.
  AttendArgs Block(const AttendArgs& args, int b) const {
    AttendArgs out = args;
    out.kv_head_begin = kv_begin;
    out.kv_head_end = kv_end;
    if (n_blocks == 1) return out;
    if (q_blocks == 0) {
      const int n = kv_end - kv_begin;
      out.kv_head_begin = kv_begin + b * n / n_blocks;
      out.kv_head_end = kv_begin + (b + 1) * n / n_blocks;
    } else {
      out.q_head_begin = kAttentionHeadBlock * (b * q_blocks / n_blocks);
      out.q_head_end =
          b + 1 == n_blocks ? group : kAttentionHeadBlock * ((b + 1) * q_blocks / n_blocks);
    }
    return out;
  }
};

// Head blocks per piece: the fewest (at most one per kv head, or per 16 query heads of one kv
// head) that give the threads equal numbers of items, or at least 4 items each; one where the
// pieces already do. Per head the same operations run in the same order, so the split changes
// no result.
HeadSplit SplitHeads(const AttentionSpec& spec, const AttendArgs& args, int64_t n_pieces,
                     int threads) {
  HeadSplit split;
  split.group = spec.n_head_q / spec.n_head_kv;
  split.kv_begin = args.kv_head_begin;
  split.kv_end = args.kv_head_end < 0 ? spec.n_head_kv : args.kv_head_end;
  const int n_kv = split.kv_end - split.kv_begin;
  split.q_blocks = n_kv == 1 ? (split.group + kAttentionHeadBlock - 1) / kAttentionHeadBlock : 0;
  const int most = n_kv == 1 ? split.q_blocks : n_kv;
  if (n_pieces == 0) return split;
  int blocks = 1;
  while (blocks < most && (n_pieces * blocks) % threads != 0 &&
         n_pieces * blocks < int64_t{4} * threads)
    ++blocks;
  split.n_blocks = blocks;
  return split;
}

}  // namespace

int AttentionHeadBlocks(const AttentionSpec& spec, const AttendArgs& args, int64_t n_pieces,
                        int threads) {
  return SplitHeads(spec, args, n_pieces, threads).n_blocks;
}

void Attend(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
            const AttendArgs& args, float* out) {
  thread_local ContextPieces chunks;
  thread_local std::vector<float> state;
  CutIntoPieces(args.spans, &chunks);
  const size_t floats = PartialFloats(spec);
  state.resize(2 * floats);
  const AttentionPartial total = PartialAt(spec, state, 0);
  const AttentionPartial piece = PartialAt(spec, state, floats);
  ResetPartial(spec, total);
  thread_local I8QueryBuffer i8_query;  // the query prepared once for all chunks
  thread_local Bf16QueryBuffer bf16_query;
  AttendArgs chunk_args = args;
  chunk_args.i8_query = I8QueryFor(k, spec, rows.format, args, &i8_query);
  chunk_args.bf16_query = Bf16QueryFor(k, spec, rows.format, args, &bf16_query);
  // The first piece is computed in `total`, the others merged into it in order (as AttendParallel
  // merges its pieces into the first).
  for (size_t c = 0; c < chunks.size(); ++c) {
    chunk_args.spans = chunks[c];
    if (c == 0) {
      AttendPartial(k, spec, rows, chunk_args, total);
      continue;
    }
    ResetPartial(spec, piece);
    AttendPartial(k, spec, rows, chunk_args, piece);
    MergePartial(k, spec, total, piece);
  }
  FinishPartial(spec, total, args.kv_head_begin, args.kv_head_end, out);
}

void AttendParallel(Exec& exec, const AttentionSpec& spec, const KvRows& rows,
                    const AttendArgs& args, float* out) {
  // Reused across calls (a zero-filled vector per call took 2% of the perf samples of
  // BM_AbsorbedMlaDecode); every piece is reset before use. The workers read the caller's buffers
  // through these references (a thread_local named inside the lambda would be each worker's own
  // instance).
  thread_local ContextPieces chunks_buffer;
  thread_local std::vector<float> state_buffer;
  thread_local I8QueryBuffer i8_query_buffer;  // the query prepared once for all chunks
  thread_local Bf16QueryBuffer bf16_query_buffer;
  ContextPieces& chunks = chunks_buffer;
  std::vector<float>& state = state_buffer;
  I8QueryBuffer& i8_query = i8_query_buffer;
  Bf16QueryBuffer& bf16_query = bf16_query_buffer;
  CutIntoPieces(args.spans, &chunks);
  const size_t floats = PartialFloats(spec);
  state.resize(std::max<size_t>(1, chunks.size()) * floats);  // an empty context: one zero state
  const HeadSplit split =
      SplitHeads(spec, args, static_cast<int64_t>(chunks.size()), exec.pool.size());
  const I8Query* prepared = nullptr;
  const Bf16QueryBuffer* prepared_bf16 = nullptr;  // with head blocks, each block's pieces prepare
  if (split.n_blocks == 1) {
    prepared = I8QueryFor(exec.k, spec, rows.format, args, &i8_query);
    prepared_bf16 = Bf16QueryFor(exec.k, spec, rows.format, args, &bf16_query);
  } else if (args.i8_query != nullptr) {
    prepared = args.i8_query;
  } else if (UsesI8Kernels(exec.k, spec, rows.format)) {  // each block quantises its heads
    SizeI8Query(spec, rows.format, &i8_query);
    exec.pool.ParallelFor(split.n_blocks, [&](int64_t b, int) {
      const auto [h_begin, h_end] = split.Heads(static_cast<int>(b));
      QuantiseI8QueryHeads(exec.k, spec, rows.format, args.q, h_begin, h_end, &i8_query);
    });
    prepared = &i8_query.view;
  }
  exec.pool.ParallelFor(
      static_cast<int64_t>(chunks.size()) * split.n_blocks, [&](int64_t item, int) {
        const int64_t c = item / split.n_blocks;
        const int b = static_cast<int>(item % split.n_blocks);
        const AttentionPartial piece = PartialAt(spec, state, static_cast<size_t>(c) * floats);
        const auto [h_begin, h_end] = split.Heads(b);
        ResetPartial(spec, piece, h_begin, h_end);
        AttendArgs chunk_args = split.Block(args, b);
        chunk_args.spans = chunks[static_cast<size_t>(c)];
        chunk_args.i8_query = prepared;
        chunk_args.bf16_query = prepared_bf16;
        AttendPartial(exec.k, spec, rows, chunk_args, piece);
      });
  // The pieces merged in order per head into the first, each block's heads on one thread (with
  // one block on the calling thread: spreading 16 heads over 2 threads was 1% slower, the hand-off
  // costing more than the halved merge).
  const AttentionPartial first = PartialAt(spec, state, 0);
  auto merge_block = [&](int64_t b, int) {
    const auto [h_begin, h_end] = split.Heads(static_cast<int>(b));
    if (chunks.size() == 0) ResetPartial(spec, first, h_begin, h_end);
    for (size_t c = 1; c < chunks.size(); ++c) {
      MergePartial(exec.k, spec, first, PartialAt(spec, state, c * floats), h_begin, h_end);
    }
    FinishHeads(spec, first, h_begin, h_end, out);
  };
  if (split.n_blocks == 1 || chunks.size() <= 1) {
    for (int b = 0; b < split.n_blocks; ++b) merge_block(b, 0);
  } else {
    exec.pool.ParallelFor(split.n_blocks, merge_block);
  }
}

}  // namespace mlarun
