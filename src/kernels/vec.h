// Small vector helpers shared by the portable kernels. Summation orders are fixed (no
// thread-count or alignment dependence).
#pragma once

#include <cmath>
#include <cstdint>

namespace mlarun {

// Returns sum_i a[i] * b[i] with 8 interleaved float32 partial sums (vectorisable; fixed order).
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (; i < n; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// y[i] += a * x[i].
inline void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// x[i] *= a.
inline void Scale(float a, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

}  // namespace mlarun
