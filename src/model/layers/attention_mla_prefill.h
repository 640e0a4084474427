// Naive MLA attention of a prefill under the full cache policy, as tiled GEMMs (the path of
// long prompts; decode and the bounded policies use the attention core instead).
#pragma once

#include "model/layers/layer_context.h"

namespace mlarun {

// Writes o [n_tokens, n_head, v] for the tokens of `slice` from their queries
// q [n_tokens, n_head, nope + rope] and the cached latent rows of positions [0, n_written).
void AttendNaiveFull(const LayerContext& ctx, const MlaWeights& w, const float* q,
                     const SequenceSlice& slice, float* o);

}  // namespace mlarun
