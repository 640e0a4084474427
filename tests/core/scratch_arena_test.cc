#include "core/scratch_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

namespace mlarun {
namespace {

bool Aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

TEST(ScratchArenaTest, AllocationsAreAlignedDisjointAndKeepTheirValues) {
  ScratchArena arena;
  const ScratchArena::Frame frame(arena);
  std::span<float> a = arena.Alloc<float>(3);
  std::span<int32_t> b = arena.Alloc<int32_t>(1000);
  std::span<float> c = arena.Alloc<float>(size_t{3} << 20);  // larger than a default chunk
  EXPECT_TRUE(Aligned64(a.data()) && Aligned64(b.data()) && Aligned64(c.data()));
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(c.size(), size_t{3} << 20);
  std::iota(a.begin(), a.end(), 1.0f);
  std::iota(b.begin(), b.end(), 7);
  std::iota(c.begin(), c.end(), -5.0f);
  // Writing the later buffers did not touch the earlier ones.
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[2], 3.0f);
  EXPECT_EQ(b[0], 7);
  EXPECT_EQ(b[999], 1006);
  EXPECT_EQ(c[0], -5.0f);
  EXPECT_EQ(c.back(), static_cast<float>((size_t{3} << 20) - 6));
}

TEST(ScratchArenaTest, FramesReleaseAndLaterPassesReuseOneChunk) {
  ScratchArena arena;
  const size_t big = size_t{6} << 20;  // each over the 4 MiB minimum chunk
  {
    const ScratchArena::Frame frame(arena);
    const std::byte* first = arena.Alloc<std::byte>(big).data();
    const std::byte* second = nullptr;
    {
      const ScratchArena::Frame inner(arena);
      second = arena.Alloc<std::byte>(big).data();
      EXPECT_TRUE(second < first || second >= first + big);
    }
    // The inner frame's room is handed out again.
    const ScratchArena::Frame inner(arena);
    EXPECT_EQ(arena.Alloc<std::byte>(big).data(), second);
  }
  // The pass needed two chunks; they were merged into one of the peak size, and the same pass
  // now fits in it without growing.
  const size_t merged = arena.capacity();
  EXPECT_GE(merged, 2 * big);
  for (int pass = 0; pass < 3; ++pass) {
    const ScratchArena::Frame frame(arena);
    std::byte* a = arena.Alloc<std::byte>(big).data();
    std::byte* b = arena.Alloc<std::byte>(big).data();
    EXPECT_EQ(b - a, static_cast<std::ptrdiff_t>(big));  // bumped through the single chunk
    EXPECT_EQ(arena.capacity(), merged);
  }
}

}  // namespace
}  // namespace mlarun
