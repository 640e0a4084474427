// Portable attention core. Each cached row is decoded once and used by every query head that
// reads it (for MQA / absorbed MLA: all heads), so the cache is streamed once per query token.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>


namespace mlarun {

void ResetPartial(const AttentionSpec& spec, AttentionPartial partial) {
  std::fill(partial.max_score, partial.max_score + spec.n_head_q, -INFINITY);
  std::fill(partial.sum_exp, partial.sum_exp + spec.n_head_q, 0.0f);
  std::fill(partial.acc, partial.acc + static_cast<size_t>(spec.n_head_q) * spec.head_dim_v, 0.0f);
}

void AttendPartial(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
                   const AttendArgs& args, AttentionPartial partial) {
  const KvRowFormat& format = rows.format;
  const int group = spec.n_head_q / spec.n_head_kv;
  const int kv_end = args.kv_head_end < 0 ? spec.n_head_kv : args.kv_head_end;
  const int dk = spec.head_dim_qk;
  const int dv = spec.head_dim_v;
  thread_local std::vector<float> decoded;
  decoded.resize(static_cast<size_t>(format.ValuesPerRow()));
  for (const KvSpan& span : args.spans) {
    for (int32_t r = 0; r < span.n_rows; ++r) {
      const uint8_t* raw = rows.Row(span.block, span.row_begin + r);
      const float* row = reinterpret_cast<const float*>(raw);
      if (format.dtype == DType::kBF16) {
        k.bf16_to_f32(reinterpret_cast<const uint16_t*>(raw), decoded.data(), format.ValuesPerRow());
        row = decoded.data();
      } else if (format.dtype != DType::kF32) {
        DecodeKvRow(format, raw, decoded.data());
        row = decoded.data();
      }
      for (int g = args.kv_head_begin; g < kv_end; ++g) {
        const float* key = row + g * format.head_dim_k;
        const float* v = row + format.VOffset(g);
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const float score = k.dot(args.q + h * dk, key, dk) * spec.scale + span.score_bias;
          float* acc = partial.acc + static_cast<size_t>(h) * dv;
          if (score > partial.max_score[h]) {
            const float correction = std::exp(partial.max_score[h] - score);
            partial.sum_exp[h] *= correction;
            k.scale(correction, acc, dv);
            partial.max_score[h] = score;
          }
          const float p = std::exp(score - partial.max_score[h]);
          partial.sum_exp[h] += p;
          k.axpy(p, v, acc, dv);
        }
      }
    }
  }
}

void MergePartial(const AttentionSpec& spec, AttentionPartial into, AttentionPartial other) {
  const int dv = spec.head_dim_v;
  for (int h = 0; h < spec.n_head_q; ++h) {
    if (other.sum_exp[h] == 0.0f) continue;
    const float m = std::max(into.max_score[h], other.max_score[h]);
    const float a = into.sum_exp[h] == 0.0f ? 0.0f : std::exp(into.max_score[h] - m);
    const float b = std::exp(other.max_score[h] - m);
    float* acc = into.acc + static_cast<size_t>(h) * dv;
    const float* other_acc = other.acc + static_cast<size_t>(h) * dv;
    for (int i = 0; i < dv; ++i) acc[i] = acc[i] * a + other_acc[i] * b;
    into.sum_exp[h] = into.sum_exp[h] * a + other.sum_exp[h] * b;
    into.max_score[h] = m;
  }
}

void FinishPartial(const AttentionSpec& spec, AttentionPartial partial, int kv_head_begin,
                   int kv_head_end, float* out) {
  const int group = spec.n_head_q / spec.n_head_kv;
  const int kv_end = kv_head_end < 0 ? spec.n_head_kv : kv_head_end;
  const int dv = spec.head_dim_v;
  for (int h = kv_head_begin * group; h < kv_end * group; ++h) {
    const float inv = partial.sum_exp[h] > 0.0f ? 1.0f / partial.sum_exp[h] : 0.0f;
    for (int i = 0; i < dv; ++i) out[h * dv + i] = partial.acc[h * dv + i] * inv;
  }
}

void Attend(const KernelTable& k, const AttentionSpec& spec, const KvRows& rows,
            const AttendArgs& args, float* out) {
  thread_local std::vector<float> state;
  const size_t n_head = static_cast<size_t>(spec.n_head_q);
  state.resize(n_head * (2 + static_cast<size_t>(spec.head_dim_v)));
  AttentionPartial partial{state.data(), state.data() + n_head, state.data() + 2 * n_head};
  ResetPartial(spec, partial);
  AttendPartial(k, spec, rows, args, partial);
  FinishPartial(spec, partial, args.kv_head_begin, args.kv_head_end, out);
}

}  // namespace mlarun
