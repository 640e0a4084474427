// `mlarun make-model --format gguf`: a synthetic preset written straight to GGUF. Each matrix is
// generated (GenerateSyntheticValues, the values the safetensors presets round to their dtype)
// just before the tensors that read it are written, and freed after, so a 27-layer model with
// DeepSeek-V2-Lite's shapes needs the memory of one stacked expert tensor, not 31 GB.
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "core/error.h"
#include "model/gguf_export.h"
#include "model/synthetic.h"
#include "model/weights.h"

namespace mlarun {

void WriteSyntheticGguf(const SyntheticModelOptions& options, const GgufMix& mix,
                        const std::string& out_path, ThreadPool* pool) {
  namespace fs = std::filesystem;
  // config.json and the tokenizer go through a scratch directory (kilobytes).
  const fs::path scratch = fs::path(out_path).concat(".config");
  const ModelConfig config = WriteSyntheticConfig(options, scratch.string());
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } remove{scratch};
  ModelWeights weights;
  std::map<const WeightMatrix*, TensorSlot> slots;
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.vector != nullptr) {
      GenerateSyntheticValues(slot.name, slot.shape, options.seed, slot.vector->values);
      return;
    }
    *slot.matrix = {.dtype = DType::kF32, .rows = slot.shape[0], .cols = slot.shape[1]};
    slots[slot.matrix] = slot;
  });
  if (config.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
  std::map<const WeightMatrix*, std::vector<float>> generated;
  const GgufWriteHooks hooks{.materialize =
                                 [&](WeightMatrix& m) {
                                   const TensorSlot& slot = slots.at(&m);
                                   std::vector<float>& values = generated[&m];
                                   GenerateSyntheticValues(slot.name, slot.shape, options.seed,
                                                           values);
                                   m.data = values.data();
                                 },
                             .release =
                                 [&](WeightMatrix& m) {
                                   m.data = nullptr;
                                   generated.erase(&m);
                                 }};
  const std::string name = options.preset;
  WriteGgufTensors(out_path, config, weights,
                   GgufModelMetadata(name, scratch.string(), config, mix),
                   {.mix = &mix, .pool = pool}, hooks);
}

}  // namespace mlarun
