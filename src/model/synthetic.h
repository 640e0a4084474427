// Random models in the exact Hugging Face layout (config.json + safetensors), deterministic from a
// seed, for tests and benchmarks (`mlarun make-model`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "model/config.h"

namespace mlarun {

struct GgufMix;

struct SyntheticModelOptions {
  std::string preset;         // see SyntheticPresetNames()
  DType dtype = DType::kF32;  // kF32, kBF16, kF16 or kF8E4M3 (linear layers; others bf16)
  uint64_t seed = 1;
  int layers = 0;                // 0: the preset's default
  uint64_t max_shard_bytes = 0;  // > 0: split into model-0000x-of-0000y.safetensors + index
  // A JSON merge patch (RFC 7386) applied to the preset's config.json, e.g. {"qk_nope_head_dim":
  // 15}: shapes no preset has (tests); the tensors follow the patched config.
  std::string config_patch;
};

// Names of the available presets.
std::vector<std::string> SyntheticPresetNames();
// Returns the preset's config.json text; throws Error naming `--preset` for an unknown name.
std::string SyntheticConfigJson(const SyntheticModelOptions& options);
// Writes config.json and the weights to `out_dir` (created if needed).
void WriteSyntheticModel(const SyntheticModelOptions& options, const std::string& out_dir);
// Writes config.json and the tokenizer files (not the weights) to `out_dir`; returns the config.
ModelConfig WriteSyntheticConfig(const SyntheticModelOptions& options, const std::string& out_dir);
// The float32 values of tensor `name` of `shape` (outermost first) in every synthetic model of
// `seed` (before any rounding to the written dtype).
void GenerateSyntheticValues(const std::string& name, const std::vector<int64_t>& shape,
                             uint64_t seed, std::vector<float>& values);
// Writes the preset as a GGUF file of `mix` (options.dtype is ignored: the float32 values are
// quantised directly), generating one tensor's matrices at a time: a model of any size in the
// memory of its largest tensor (synthetic_gguf.cc).
void WriteSyntheticGguf(const SyntheticModelOptions& options, const GgufMix& mix,
                        const std::string& out_path, ThreadPool* pool = nullptr);

}  // namespace mlarun
