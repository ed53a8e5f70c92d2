// What the host-backend growable tests write and read back: seeded random words, and a buffer's
// elements as a std::vector to compare with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <cuvmm/host_growable_buffer.hpp>

namespace cuvmm::test {

/// `n` words from a Mersenne Twister seeded with `seed`: the same for the same seed.
inline std::vector<std::uint64_t> random_words(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> v(n);
  for (auto& x : v) x = rng();
  return v;
}

/// The buffer's elements, in order.
template <class T>
std::vector<T> contents(const HostGrowableBuffer<T>& b) {
  return std::vector<T>(b.begin(), b.end());
}

}  // namespace cuvmm::test
