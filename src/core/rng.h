// Deterministic pseudo-random numbers (SplitMix64), identical on every platform: only integer
// arithmetic, so generated models and samples are bit-reproducible from a seed.
#pragma once

#include <cstdint>
#include <string_view>

namespace mlarun {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // SplitMix64 (Steele, Lea, Flood 2014).
  uint64_t NextU64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits (exactly representable in f32).
  float NextUniform() { return static_cast<float>(NextU64() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [-1, 1).
  float NextSymmetric() { return 2.0f * NextUniform() - 1.0f; }

 private:
  uint64_t state_;
};

// FNV-1a hash of a string, used to derive per-tensor seeds from names.
inline uint64_t HashName(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace mlarun
