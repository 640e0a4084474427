// The byte format of one cached token row of one layer, shared by the KV cache (which stores rows)
// and the attention kernel (which reads them). Values are ordered
// [K head 0 .. K head n_head_kv-1, V head 0 .. V head n_head_kv-1]; with `v_aliases_k` there are no
// V values and V is the first `head_dim_v` values of each K head (absorbed MLA: V = c_kv).
//
// int8 rows: every value except the last `rope_tail_dim` of each K head is quantised symmetrically
// in groups of `quant_group` consecutive (non-tail) values, scale = max|x| / 127; the tails stay
// bf16. Byte layout: [int8 values][f32 scale per group][bf16 tails]. For MLA (512 latent + 64
// RoPE, groups of 128) that is 512 + 16 + 128 = 656 bytes, the size of FlashMLA's FP8 row. The
// int8 values q in [-127, 127] are stored excess-128, as the bytes q + 128: the unsigned operand
// vpdpbusd takes, so the VNNI scores kernel reads the rows in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace mlarun {

struct KvRowFormat {
  DType dtype = DType::kF32;  // kF32, kBF16, kF16 or kI8
  int n_head_kv = 1;
  int head_dim_k = 0;
  int head_dim_v = 0;
  bool v_aliases_k = false;
  int rope_tail_dim = 0;  // int8 only: trailing K values per head kept in bf16
  int quant_group = 128;  // int8 only: values per f32 scale

  // Returns the number of float values one row holds, n_head_kv * (head_dim_k [+ head_dim_v]).
  int ValuesPerRow() const { return n_head_kv * (head_dim_k + (v_aliases_k ? 0 : head_dim_v)); }
  // Returns the number of int8-quantised values (all but the bf16 RoPE tails).
  int QuantizedValues() const { return ValuesPerRow() - n_head_kv * rope_tail_dim; }
  int QuantGroups() const { return (QuantizedValues() + quant_group - 1) / quant_group; }
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
