// Symbols: n values per row; a value is non-finite when its exponent bits are all ones (float32
// 0x7f800000, bfloat16 0x7f80, float16 0x7c00: inf or NaN) or, for FP8 e4m3fn, when its bits
// without the sign are (0x7f: NaN).
#include "model/finite_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlarun {

namespace {

// Index of the first element of bits [n] with all the bits of `mask` set (the non-finite
// patterns), or -1: an OR of the comparisons over the row first (branch-free: and, compare, or
// per vector of values, which SSE2 has for every width; the unsigned maximum this replaced has
// no SSE2 instruction for 16 or 32 bits and made the check 10% of `quantize --weights bf16`),
// then a search only where one was seen.
template <typename Bits>
int64_t FirstWithAll(const Bits* bits, int64_t n, Bits mask) {
  Bits seen = 0;
  for (int64_t i = 0; i < n; ++i) seen |= static_cast<Bits>((bits[i] & mask) == mask);
  if (seen == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if ((bits[i] & mask) == mask) return i;
  }
  return -1;
}

// Whether the non-finite value at `value` is NaN (else inf).
bool IsNan(DType dtype, const void* value) {
  switch (dtype) {
    case DType::kF32: {
      float f = 0;
      std::memcpy(&f, value, sizeof(f));
      return std::isnan(f);
    }
    case DType::kBF16:
    case DType::kF16: {
      uint16_t h = 0;
      std::memcpy(&h, value, sizeof(h));
      return (h & (dtype == DType::kBF16 ? 0x007f : 0x03ff)) != 0;
    }
    default:
      return true;  // FP8 e4m3fn: NaN only
  }
}

// "[a]" or "[a, b]" (built by appends: GCC 12 warns wrongly on "[" + std::to_string(a)).
std::string Position(std::initializer_list<int64_t> indices) {
  std::string at = "[";
  for (const int64_t i : indices) {
    if (at.size() > 1) at.append(", ");
    at.append(std::to_string(i));
  }
  return at.append("]");
}

std::string NonFiniteMessage(const std::string& name, bool nan, const std::string& at) {
  std::string message = "tensor '";
  message.append(name).append("' holds ").append(nan ? "NaN" : "inf").append(" at ").append(at);
  message.append(": weights must be finite (`--load mmap` skips this check)");
  return message;
}

}  // namespace

int64_t FirstNonFiniteValue(DType dtype, const void* values, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return FirstWithAll(static_cast<const uint32_t*>(values), n, uint32_t{0x7f800000u});
    case DType::kBF16:
    case DType::kF16:
      return FirstWithAll(static_cast<const uint16_t*>(values), n, NonFinite16Threshold(dtype));
    case DType::kF8E4M3:
      return FirstWithAll(static_cast<const uint8_t*>(values), n, uint8_t{0x7f});
    default:
      return -1;
  }
}

bool FirstNonFiniteRow::Check(int64_t r, DType dtype, const void* values, int64_t n) {
  if (FirstNonFiniteValue(dtype, values, n) < 0) return true;
  int64_t seen = row_.load();
  while (r < seen && !row_.compare_exchange_weak(seen, r)) {
  }
  return false;
}

bool FirstNonFiniteRow::CheckDecoded(int64_t r, const WeightMatrix& m) {
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(m.cols));
  m.DecodeRow(r, row.data());
  return Check(r, DType::kF32, row.data(), m.cols);
}

Error NonFiniteWeightError(const std::string& name, const WeightMatrix& m, int64_t row) {
  if (m.dtype == DType::kBlocks) {
    std::vector<float> decoded(static_cast<size_t>(m.cols));
    m.DecodeRow(row, decoded.data());
    const int64_t col =
        std::max<int64_t>(0, FirstNonFiniteValue(DType::kF32, decoded.data(), m.cols));
    return Error(NonFiniteMessage(name, std::isnan(decoded[static_cast<size_t>(col)]),
                                  Position({row, col})));
  }
  const int64_t stride = m.row_stride > 0 ? m.row_stride : m.cols;
  const auto* values =
      static_cast<const uint8_t*>(m.data) + static_cast<size_t>(row * stride) * DTypeSize(m.dtype);
  const int64_t col = std::max<int64_t>(0, FirstNonFiniteValue(m.dtype, values, m.cols));
  return Error(
      NonFiniteMessage(name, IsNan(m.dtype, values + static_cast<size_t>(col) * DTypeSize(m.dtype)),
                       Position({row, col})));
}

void CheckWeightsFinite(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights,
                        const std::function<bool(const TensorSlot&)>& take) {
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (!take(slot)) return;
    if (slot.vector != nullptr) {
      const std::vector<float>& v = slot.vector->values;
      const int64_t i = FirstNonFiniteValue(DType::kF32, v.data(), static_cast<int64_t>(v.size()));
      if (i >= 0) {
        throw Error(
            NonFiniteMessage(slot.name, std::isnan(v[static_cast<size_t>(i)]), Position({i})));
      }
      return;
    }
    if (slot.matrix == nullptr || slot.matrix->empty() || slot.matrix->dtype == DType::kI8) return;
    const WeightMatrix& m = *slot.matrix;
    const int64_t stride = m.row_stride > 0 ? m.row_stride : m.cols;
    const auto* bytes = static_cast<const uint8_t*>(m.data);
    FirstNonFiniteRow bad(m.rows);
    ForRowsInItems(&pool, m.rows, /*rows_per_item=*/64, [&](int64_t r) {
      if (m.dtype == DType::kBlocks) {
        bad.CheckDecoded(r, m);
      } else {
        bad.Check(r, m.dtype, bytes + static_cast<size_t>(r * stride) * DTypeSize(m.dtype), m.cols);
      }
    });
    if (bad.found()) throw NonFiniteWeightError(slot.name, m, bad.row());
  });
}

}  // namespace mlarun
