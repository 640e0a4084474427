// The block pool's storage: every (layer, block, row) has its own bytes, and each layer's blocks
// lie back to back (layer-major regions), so a run of consecutive block ids is one contiguous run
// of a layer's rows for the decode attention to stream.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace mlarun {
namespace {

// Three layers whose rows differ in size (8, 12 and 600 bytes; the last is absorbed MLA's int8
// latent row), so the layers' block sizes differ and none is a multiple of the others.
KvLayout MixedLayout() {
  const KvRowFormat narrow{.dtype = DType::kF32, .head_dim_k = 2, .v_aliases_k = true};
  const KvRowFormat wider{.dtype = DType::kF32, .head_dim_k = 3, .v_aliases_k = true};
  const KvRowFormat latent{.dtype = DType::kI8,
                           .head_dim_k = 576,
                           .head_dim_v = 512,
                           .v_aliases_k = true,
                           .rope_tail_dim = 64};
  return KvLayout{.layers = {narrow, wider, latent}};
}

uint8_t Pattern(int layer, int32_t block, int row, size_t byte) {
  return static_cast<uint8_t>(layer * 131 + block * 29 + row * 7 + static_cast<int>(byte) * 3);
}

TEST(BlockPoolTest, EveryLayerBlockAndRowHasItsOwnBytes) {
  const KvLayout layout = MixedLayout();
  const BlockPool pool(layout, {.block_size = 5, .budget_bytes = 64 << 10});
  const BlockPoolStats stats = pool.stats();
  ASSERT_GE(stats.blocks_total, 3);
  EXPECT_EQ(stats.bytes_per_block, size_t{64} + 64 + 3008);  // 40, 60, 3,000 rounded up to 64
  const uint8_t* begin = pool.Row(0, 0, 0);
  const uint8_t* end = begin + static_cast<size_t>(stats.blocks_total) * stats.bytes_per_block;
  for (int l = 0; l < 3; ++l) {
    const size_t row_bytes = layout.layers[static_cast<size_t>(l)].RowBytes();
    const KvRows rows = pool.LayerRows(l);
    for (int32_t b = 0; b < stats.blocks_total; ++b) {
      for (int r = 0; r < pool.block_size(); ++r) {
        uint8_t* row = pool.Row(l, b, r);
        ASSERT_EQ(rows.Row(b, r), row) << "layer " << l << " block " << b << " row " << r;
        ASSERT_GE(row, begin);
        ASSERT_LE(row + row_bytes, end);
        for (size_t i = 0; i < row_bytes; ++i) row[i] = Pattern(l, b, r, i);
      }
    }
  }
  // Read back after all writes: an overlap would have overwritten an earlier row.
  for (int l = 0; l < 3; ++l) {
    const size_t row_bytes = layout.layers[static_cast<size_t>(l)].RowBytes();
    for (int32_t b = 0; b < stats.blocks_total; ++b) {
      for (int r = 0; r < pool.block_size(); ++r) {
        const uint8_t* row = pool.Row(l, b, r);
        for (size_t i = 0; i < row_bytes; ++i) {
          ASSERT_EQ(row[i], Pattern(l, b, r, i)) << "layer " << l << " block " << b << " row " << r;
        }
      }
    }
  }
}

TEST(BlockPoolTest, ALayersConsecutiveBlocksAreOneRunOfRows) {
  const KvLayout layout = MixedLayout();
  const BlockPool pool(layout, {.block_size = 64, .budget_bytes = 4 << 20});
  for (int l = 0; l < 3; ++l) {
    const size_t row_bytes = layout.layers[static_cast<size_t>(l)].RowBytes();
    for (int32_t b = 0; b + 1 < pool.stats().blocks_total; ++b) {
      const uint8_t* last_row_end = pool.Row(l, b, pool.block_size() - 1) + row_bytes;
      const uint8_t* next_block = pool.Row(l, b + 1, 0);
      // At most the padding to a cache line between a block's rows and the next block's.
      ASSERT_GE(next_block, last_row_end) << "layer " << l << " block " << b;
      ASSERT_LT(next_block - last_row_end, 64) << "layer " << l << " block " << b;
    }
  }
}

}  // namespace
}  // namespace mlarun
