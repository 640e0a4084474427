// Weight formats made at load: 8-bit quantisation (`--weights int8`), bf16 conversion
// (`--weights bf16`), the packed and copied layouts of `--load copy`; binding the Q8 tensors
// that `mlarun quantize` writes (checkpoint_writer.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_table.h"
#include "model/config.h"
#include "model/finite_check.h"
#include "model/weights.h"

namespace mlarun {

// Returns true for tensors that stay in their loaded dtype under int8 weights: the router
// (`mlp.gate.weight`, kept exact as routing is discontinuous) and the embedding table (one row is
// read per token). Norms and biases are float32 vectors anyway.
bool KeepsLoadedDtype(const std::string& tensor_name);

// Returns a Q8 copy of `source`, packed for the kernels (Q8Layout::kPacked16; storage owned by
// `weights`); rows in parallel if `pool` is set, each by kernels.quantize_weight_row_q8 (every
// table gives bitwise the same). Throws Error naming `name` and the first [row, column] if
// `source` holds NaN or inf.
WeightMatrix QuantizeMatrixQ8(ThreadPool* pool, const KernelTable& kernels,
                              const WeightMatrix& source, ModelWeights& weights,
                              const std::string& name);

// Quantises every other matrix of `weights` to Q8 blocks (kernels/quant.h), rows in parallel.
// `replaced` (optional) hears of each quantised matrix's former bytes (not of a tied embedding's).
void QuantizeWeightsQ8(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                       ModelWeights& weights,
                       const std::function<void(const void*, size_t)>& replaced = {});

// Row r of `m` rounded to bf16 (F32ToBF16 of each decoded value: round to nearest even) into
// out[m.cols], `row` (m.cols floats) as scratch; false, with the row noted in `bad`, if it holds
// NaN or inf. The rounding of ConvertWeightsBf16 and of `mlarun quantize --weights bf16`, by the
// kernels' decode_row and round_to_bf16 (bitwise the scalar DecodeRow and F32ToBF16).
bool RoundRowToBf16(const KernelTable& kernels, const WeightMatrix& m, int64_t r, float* row,
                    uint16_t* out, FirstNonFiniteRow& bad);

// Replaces every f32, f16 or FP8 matrix the matmul kernels stream (as Pack16BitWeights selects
// them: not the embedding table, not the router; a tied lm_head gets its own copy) by a bf16
// copy (F32ToBF16 of each decoded value: round to nearest even), all in one huge-page buffer,
// rows in parallel; `packed`: straight into Layout16::kPacked16 where the columns are even (what
// Pack16BitWeights would make of it, without a row-major copy in between). bf16 matrices stay as
// they are. `replaced` (optional) hears of each matrix's former bytes. Throws Error naming the
// tensor and the first [row, column] holding NaN or inf, as the other copying loads do.
void ConvertWeightsBf16(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                        ModelWeights& weights, bool packed,
                        const std::function<void(const void*, size_t)>& replaced = {});

// Binds an I8 tensor of a row-major Q8 checkpoint (weight + F16 `<name>_q8_scale`) to `m`: a
// view of the file when rows have the padded stride (packed later by PackQ8Weights), else a
// packed copy. Throws Error naming the file and tensor.
class WeightSource;
struct TensorInfo;
void BindQ8Tensor(const WeightSource& archive, const TensorInfo& t, const std::string& model_dir,
                  WeightMatrix& m, ModelWeights& weights);

// Binds a packed Q8 tensor (U8 [groups * 16, padded cols] + F16 `<name>_q8_scale`
// [groups * 16, padded cols / 32], quant.h's layout) of logical shape `shape` to `m`, in place in
// the mapped file. Throws Error naming the file and tensor.
void BindPackedQ8Tensor(const WeightSource& archive, const TensorInfo& t,
                        const std::vector<int64_t>& shape, const std::string& model_dir,
                        WeightMatrix& m);

// Returns a copy of a row-major Q8 matrix packed for the kernels (Q8Layout::kPacked16).
WeightMatrix PackQ8Matrix(ThreadPool* pool, const WeightMatrix& row_major, ModelWeights& weights);
// Packs every row-major Q8 matrix of `weights` (rows in parallel): the matmul kernels read only
// the packed layout. One copy at load; files keep the portable row-major layout.
void PackQ8Weights(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights);

// Replaces every row-major bf16 or f16 matrix the matmul kernels read (not the embedding table,
// not the router; a tied lm_head gets its own copy) that has an even number of columns by a copy
// in Layout16::kPacked16 (packed_bf16.h), all in one huge-page buffer, rows in parallel. For the
// SIMD tables' outer-product kernels, which read that layout fastest (docs/performance.md).
// Where `kernels` has matmul_rows_f8_packed, FP8 matrices too (even columns and block_cols,
// block_rows a multiple of 16; PackF8Rows), which that kernel multiplies 20-70% faster than the
// row-major kernel (docs/performance.md).
// `replaced` (optional) is called with each replaced matrix's former bytes. Rows are packed by
// `kernels.pack_bf16_rows` / `pack_f16_rows` where the table has them. Throws Error naming the
// tensor and the first [row, column] holding NaN or inf.
void Pack16BitWeights(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                      ModelWeights& weights,
                      const std::function<void(const void*, size_t)>& replaced = {});
// Copies every other matrix the kernels stream (f32, fp8, 16-bit ones left row-major) as it is
// into one huge-page buffer, rows in parallel: with `--load copy` and packing the files are
// mapped, and those matrices would otherwise stream from 4 KiB page-cache pages.
// `replaced` as for Pack16BitWeights.
void CopyStreamedWeights(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights,
                         const std::function<void(const void*, size_t)>& replaced = {});

}  // namespace mlarun
