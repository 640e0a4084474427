// Load-time check that floating-point weights are finite: a NaN or inf weight otherwise flows
// silently into the logits. `--load copy` checks each row as it copies or packs it (the
// streamed matrices) and scans the rest (the embedding table, the router, norms); positions are
// those of the file's [rows, cols].
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace mlarun {

// The index of the first NaN or +-inf among n values of `dtype` (kF32, kBF16, kF16: exponent
// bits all ones; kF8E4M3, e4m3fn: the NaN bytes 0x7f and 0xff, it has no inf) at `values`, or
// -1. Other dtypes (int8) have no such values: -1.
int64_t FirstNonFiniteValue(DType dtype, const void* values, int64_t n);

// The exponent bits of kBF16 (0x7f80) or kF16 (0x7c00): a value is inf or NaN when all are set,
// i.e. when its magnitude bits (value & 0x7fff) reach them.
inline uint16_t NonFinite16Threshold(DType dtype) {
  return dtype == DType::kBF16 ? uint16_t{0x7f80} : uint16_t{0x7c00};
}

// The first row, in row order, that held a NaN or inf among rows checked in any order and from
// any thread (each row with FirstNonFiniteValue).
class FirstNonFiniteRow {
 public:
  explicit FirstNonFiniteRow(int64_t rows) : rows_(rows), row_(rows) {}
  // Notes row r if one of its n values is not finite; returns whether all are finite.
  bool Check(int64_t r, DType dtype, const void* values, int64_t n);
  // The same for row r of `m` in any dtype (decoded to float32 first: GGUF blocks, whose f16
  // scales may be inf or NaN).
  bool CheckDecoded(int64_t r, const WeightMatrix& m);
  bool found() const { return row_.load() < rows_; }
  int64_t row() const { return row_.load(); }

 private:
  int64_t rows_;
  std::atomic<int64_t> row_;
};

// The error for row `row` of row-major `m` holding a NaN or inf: "tensor 'NAME' holds NaN at
// [row, col]: weights must be finite (...)", col the first such column.
Error NonFiniteWeightError(const std::string& name, const WeightMatrix& m, int64_t row);

// Throws Error naming the first tensor (in ForEachTensor order) holding NaN or inf, whether it
// is NaN or inf, and its position ([row, column] of a matrix, [i] of a vector). Rows are scanned
// in parallel on `pool`. (FP8 block scales are checked by the loader in every mode.)
// Only tensors for which `take(slot)` is true are scanned.
void CheckWeightsFinite(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights,
                        const std::function<bool(const TensorSlot&)>& take);

}  // namespace mlarun
