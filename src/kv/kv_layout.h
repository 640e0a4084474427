// What one token stores per layer, as plain data: the pool sizes blocks from this alone, without
// knowing the model (vLLM's page_size_bytes idea).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/kv_row.h"  // KvRowFormat

namespace mlarun {

struct KvLayout {
  std::vector<KvRowFormat> layers;  // [n_layers]

  // Returns sum over layers of the row bytes: the cache bytes one token costs.
  size_t BytesPerToken() const {
    size_t total = 0;
    for (const KvRowFormat& f : layers) total += f.RowBytes();
    return total;
  }
};

}  // namespace mlarun
