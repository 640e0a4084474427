// The byte format of one cached token row of one layer, shared by the KV cache (which stores rows)
// and the attention kernel (which reads them). Values are ordered
// [K head 0 .. K head n_head_kv-1, V head 0 .. V head n_head_kv-1]; with `v_aliases_k` there are no
// V values and V is the first `head_dim_v` values of each K head (absorbed MLA: V = c_kv).
//
// int8 rows: every value except the last `rope_tail_dim` of each K head (the "body") is quantised
// symmetrically in groups of `quant_group` consecutive body values, scale = max|x| / 127; each
// head's tail (the RoPE part) the same way in kRopeTailGroups groups of its own: its halves (with
// DeepSeek's interleaved-pair RoPE, the higher- and the lower-frequency pairs). Byte layout:
//   [int8 body values][f32 scale per body group][int8 tail values per head][f32 tail scales]
// with the tail scales head by head, each head's groups in order. For MLA (512 latent + 64 RoPE,
// groups of 128) that is 512 + 4*4 + 64 + 2*4 = 600 bytes, under the 656 of FlashMLA's FP8 row
// (512 FP8 values, 4 f32 scales, 64 bf16 RoPE values; DeepSeek's FlashMLA README). The int8 values
// q in [-127, 127] are stored excess-128, as the bytes q + 128: the unsigned operand vpdpbusd
// takes, so the VNNI scores kernel reads the rows in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mlarun {

// int8 rows: quantisation groups (scales) per K head's RoPE tail.
inline constexpr int kRopeTailGroups = 2;

struct KvRowFormat {
  DType dtype = DType::kF32;  // kF32, kBF16, kF16 or kI8
  int n_head_kv = 1;
  int head_dim_k = 0;
  int head_dim_v = 0;
  bool v_aliases_k = false;
  int rope_tail_dim = 0;  // int8 only: trailing K values per head quantised in groups of their own
  int quant_group = 128;  // int8 only: body values per f32 scale

  // Returns the number of float values one row holds, n_head_kv * (head_dim_k [+ head_dim_v]).
  int ValuesPerRow() const { return n_head_kv * (head_dim_k + (v_aliases_k ? 0 : head_dim_v)); }
  // Returns the number of body values (all but the RoPE tails), quantised in groups.
  int QuantizedValues() const { return ValuesPerRow() - n_head_kv * rope_tail_dim; }
  int QuantGroups() const { return (QuantizedValues() + quant_group - 1) / quant_group; }
  // int8 rows: values per tail group (the last group of a head's tail may be shorter, or empty),
  // and the byte offsets of the tails (head h's at TailOffset() + h * rope_tail_dim) and of their
  // scales (head h's group g at TailScaleOffset() + 4 * (h * kRopeTailGroups + g)).
  int TailGroupValues() const { return (rope_tail_dim + kRopeTailGroups - 1) / kRopeTailGroups; }
  int TailOffset() const { return QuantizedValues() + 4 * QuantGroups(); }
  int TailScaleOffset() const { return TailOffset() + n_head_kv * rope_tail_dim; }
  // Returns the bytes one row occupies.
  size_t RowBytes() const;
  // Returns the offset of V head `h` within the decoded float row.
  int VOffset(int h) const {
    return v_aliases_k ? h * head_dim_k : n_head_kv * head_dim_k + h * head_dim_v;
  }
};

// Encodes `values` [ValuesPerRow()] into `row` [RowBytes()].
void EncodeKvRow(const KvRowFormat& format, const float* values, void* row);
// Decodes `row` into `values` [ValuesPerRow()].
void DecodeKvRow(const KvRowFormat& format, const void* row, float* values);

}  // namespace mlarun
