// threads_pattern.hpp: the allocation pattern of `bench_arena --benchmark_filter=threads/`, one
// thread's part of it: 20000 sizes log-uniform in [4 KiB, 4 MiB], allocated and freed with 16 live,
// the oldest freed first. Header-only and free of CUDA, so that unit_arena_fronts' profile of the
// Arena's lock ("[.profile_misses]") replays exactly what the benchmark times.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cuvmm::bench {

inline constexpr int live_per_thread = 16;
inline constexpr int pairs_per_thread = 20000;

/// The sizes thread `t` allocates: log-uniform in [4 KiB, 4 MiB], the same for every allocator.
inline std::vector<std::size_t> thread_sizes(int t) {
  std::vector<std::size_t> sizes(pairs_per_thread);
  std::uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1);
  for (auto& size : sizes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int const shift = 12 + static_cast<int>(x % 11);  // 4 KiB .. 4 MiB
    size = (std::size_t{1} << shift) + (x >> 32) % (std::size_t{1} << shift);
    size = std::min(size, std::size_t{4} << 20);
  }
  return sizes;
}

/// One thread's pairs on `allocate(bytes)` / `release(p, bytes)`: 16 live, the oldest freed first.
template <class Allocate, class Release>
void churn(const std::vector<std::size_t>& sizes, Allocate&& allocate, Release&& release) {
  std::vector<std::pair<void*, std::size_t>> live(live_per_thread, {nullptr, 0});
  std::size_t k = 0;
  for (std::size_t const bytes : sizes) {
    auto& slot = live[k++ % live.size()];
    if (slot.first != nullptr) release(slot.first, slot.second);
    slot = {allocate(bytes), bytes};
  }
  for (auto& [p, bytes] : live) {
    if (p != nullptr) release(p, bytes);
  }
}

}  // namespace cuvmm::bench
