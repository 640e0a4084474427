// Encoding and decoding of cache rows (see kv_row.h for the byte layout).
#include "kernels/kv_row.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace mlarun {

namespace {

// Quantises x [n] symmetrically to q (excess-128, kv_row.h); returns the scale max|x| / 127.
float QuantizeExcess128(const float* x, int n, uint8_t* q) {
  float max_abs = 0.0f;
  for (int i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
  const float scale = max_abs / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = static_cast<uint8_t>(128 + std::lrint(std::clamp(x[i] * inv, -127.0f, 127.0f)));
  }
  return scale;
}

// Visits the values of a row split into quantised part and RoPE tails: fn(value_index,
// is_tail, index_within_part).
template <typename Fn>
void ForEachValue(const KvRowFormat& f, Fn fn) {
  int quantized = 0;
  int tail = 0;
  const int k_body = f.head_dim_k - f.rope_tail_dim;
  for (int h = 0; h < f.n_head_kv; ++h) {
    for (int i = 0; i < f.head_dim_k; ++i) {
      const int index = h * f.head_dim_k + i;
      if (i < k_body) {
        fn(index, false, quantized++);
      } else {
        fn(index, true, tail++);
      }
    }
  }
  if (!f.v_aliases_k) {
    for (int i = 0; i < f.n_head_kv * f.head_dim_v; ++i) {
      fn(f.n_head_kv * f.head_dim_k + i, false, quantized++);
    }
  }
}

}  // namespace

size_t KvRowFormat::RowBytes() const {
  const size_t n = static_cast<size_t>(ValuesPerRow());
  if (dtype == DType::kI8) {
    return static_cast<size_t>(TailScaleOffset()) +
           (rope_tail_dim > 0 ? 4u * kRopeTailGroups * n_head_kv : 0u);
  }
  return n * DTypeSize(dtype);
}

void EncodeKvRow(const KvRowFormat& format, const float* values, void* row) {
  const int n = format.ValuesPerRow();
  switch (format.dtype) {
    case DType::kF32:
      std::memcpy(row, values, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(row);
      for (int i = 0; i < n; ++i) out[i] = F32ToBF16(values[i]);
      return;
    }
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(row);
      for (int i = 0; i < n; ++i) out[i] = F32ToF16(values[i]);
      return;
    }
    case DType::kI8: {
      const int n_quantized = format.QuantizedValues();
      const int n_groups = format.QuantGroups();
      const int tail_dim = format.rope_tail_dim;
      auto* bytes = static_cast<uint8_t*>(row);
      // Scales may be unaligned: written with memcpy.
      uint8_t* scales = bytes + n_quantized;
      uint8_t* tails = bytes + format.TailOffset();
      uint8_t* tail_scales = bytes + format.TailScaleOffset();
      thread_local std::vector<float> gathered;  // [body values, then each head's tail]
      gathered.resize(static_cast<size_t>(format.ValuesPerRow()));
      float* body = gathered.data();
      float* tail_values = body + n_quantized;
      ForEachValue(format, [&](int index, bool is_tail, int part_index) {
        (is_tail ? tail_values : body)[part_index] = values[index];
      });
      for (int g = 0; g < n_groups; ++g) {
        const int begin = g * format.quant_group;
        const int end = std::min(n_quantized, begin + format.quant_group);
        const float scale = QuantizeExcess128(body + begin, end - begin, bytes + begin);
        std::memcpy(scales + int64_t{4} * g, &scale, sizeof(float));
      }
      const int tail_group = format.TailGroupValues();
      for (int h = 0; tail_dim > 0 && h < format.n_head_kv; ++h) {
        for (int g = 0; g < kRopeTailGroups; ++g) {
          const int begin = std::min(tail_dim, g * tail_group);
          const int end = std::min(tail_dim, begin + tail_group);
          const int64_t at = int64_t{h} * tail_dim + begin;
          const float scale = QuantizeExcess128(tail_values + at, end - begin, tails + at);
          std::memcpy(tail_scales + int64_t{4} * (h * kRopeTailGroups + g), &scale, sizeof(float));
        }
      }
      return;
    }
    default:
      return;
  }
}

void DecodeKvRow(const KvRowFormat& format, const void* row, float* values) {
  const int n = format.ValuesPerRow();
  switch (format.dtype) {
    case DType::kF32:
      std::memcpy(values, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(row);
      for (int i = 0; i < n; ++i) values[i] = BF16ToF32(in[i]);
      return;
    }
    case DType::kF16: {
      const auto* in = static_cast<const uint16_t*>(row);
      for (int i = 0; i < n; ++i) values[i] = F16ToF32(in[i]);
      return;
    }
    case DType::kI8: {
      // The row in runs of consecutive values (ForEachValue's order): each K head's body, then
      // its tail, then the V values. Loops over plain runs, which the compiler vectorises (a
      // per-value visitor with a division per value took ~5 ns per value, 65% of int8-cache
      // decode attention where no in-place kernel applies).
      const int n_quantized = format.QuantizedValues();
      const auto* bytes = static_cast<const uint8_t*>(row);
      const uint8_t* scales = bytes + n_quantized;
      const int group = format.quant_group;
      // Quantised values [q, q + count) into out, group by group.
      auto body_run = [&](int q, int count, float* out) {
        while (count > 0) {
          const int g = q / group;
          const int take = std::min(count, (g + 1) * group - q);
          float scale;
          std::memcpy(&scale, scales + ptrdiff_t{4} * g, sizeof(float));
          for (int i = 0; i < take; ++i)
            out[i] = static_cast<float>(static_cast<int>(bytes[q + i]) - 128) * scale;
          q += take;
          count -= take;
          out += take;
        }
      };
      const int k_body = format.head_dim_k - format.rope_tail_dim;
      const uint8_t* tails = bytes + format.TailOffset();
      const uint8_t* tail_scales = bytes + format.TailScaleOffset();
      const int tail_group = format.TailGroupValues();
      int quantized = 0;
      for (int h = 0; h < format.n_head_kv; ++h) {
        float* head = values + static_cast<ptrdiff_t>(h) * format.head_dim_k;
        body_run(quantized, k_body, head);
        quantized += k_body;
        if (format.rope_tail_dim == 0) continue;  // no tail, no tail scales
        const uint8_t* tail = tails + ptrdiff_t{h} * format.rope_tail_dim;
        for (int g = 0; g < kRopeTailGroups; ++g) {
          const int begin = std::min(format.rope_tail_dim, g * tail_group);
          const int end = std::min(format.rope_tail_dim, begin + tail_group);
          float scale;
          std::memcpy(&scale, tail_scales + ptrdiff_t{4} * (h * kRopeTailGroups + g),
                      sizeof(scale));
          for (int i = begin; i < end; ++i)
            head[k_body + i] = static_cast<float>(static_cast<int>(tail[i]) - 128) * scale;
        }
      }
      if (!format.v_aliases_k) {
        body_run(quantized, format.n_head_kv * format.head_dim_v,
                 values + static_cast<ptrdiff_t>(format.n_head_kv) * format.head_dim_k);
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace mlarun
