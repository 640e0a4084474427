// `mlarun quantize`: a checkpoint with its matrices converted once (Q8 or bf16), written as
// safetensors one tensor at a time, so that memory holds one converted matrix, never the model.
#pragma once

#include <string>

#include "core/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/quant.h"
#include "model/model.h"

namespace mlarun {

struct CheckpointWriteOptions {
  // kInt8: the matrices Model::Load quantises with `--weights int8` as Q8, bitwise what that
  // load makes of them; kBf16: the ones `--weights bf16` converts (f32, f16, FP8) in bf16.
  WeightFormat weights = WeightFormat::kInt8;
  // int8: kPacked16 stores the kernels' layout (mapped in place at load); kRowMajor stores
  // I8 [rows, cols] + F16 scales [rows, ceil(cols / 32)] (packed at load).
  Q8Layout layout = Q8Layout::kPacked16;
  ThreadPool* pool = nullptr;            // rows in parallel; a temporary pool if null
  const KernelTable* kernels = nullptr;  // quantisation kernels (all give the same bytes); scalar
};

// Reads the checkpoint in `src_dir` (mapped; each matrix's pages released once written) and
// writes `out_dir`: model.safetensors (vectors as float32; the router and embedding as stored,
// FP8 ones widened to float32 exactly; the other matrices converted), then config.json (with
// quantization_config {quant_method: mlarun_q8, block_size: 32, layout} for int8, without one
// for bf16) and the tokenizer files. Throws Error naming `src_dir` and the tensor for a NaN or
// inf weight, or for a Q8 checkpoint asked for bf16; model.safetensors is then not written.
void WriteConvertedCheckpoint(const std::string& src_dir, const std::string& out_dir,
                              const CheckpointWriteOptions& options = {});

}  // namespace mlarun
