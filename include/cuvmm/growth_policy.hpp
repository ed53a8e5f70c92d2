// cuvmm/growth_policy.hpp: how big the next physical chunk of a growing buffer is. The one place
// this is decided.
//
// Reasoning (numbers from the H200, see H200.md):
//  - Each chunk costs driver calls: cuMemCreate ~11 µs (2 MiB) to ~37 µs (2 GiB), cuMemMap ~1 µs,
//    and its share of a cuMemSetAccess (~32 µs per call; one call covers many chunks side by side).
//    Fixed 2 MiB chunks would need ~70,000 chunks for 140 GiB: far too slow. So chunks grow with
//    the buffer.
//  - Doubling chunks (like vector capacity) would leave up to half the memory mapped but unused.
//    cuvmm's slack bound (DESIGN.md invariant 6) is one chunk of at most ~1/16 of the size.
//  - So a chunk is 1/16 of the size the buffer is growing to, rounded down to a power-of-two
//    multiple of the granularity: 16 chunks per doubling, i.e. O(16 log2(n / granularity)) chunks
//    below the cap (~160 to reach 32 GiB from 2 MiB), then n / cap after it (~70 for 140 GiB with
//    a 2 GiB cap). Powers of two keep chunk sizes few and reusable.
//  - The cap bounds the cost of one step and the slack of a huge buffer; releasing a 2 GiB chunk
//    takes ~760 µs, so larger chunks buy little.
#pragma once

#include <bit>
#include <cstddef>

namespace cuvmm {

/// Default cap on chunk size (GrowableOptions::max_chunk_bytes).
inline constexpr std::size_t default_max_chunk_bytes = std::size_t{2} << 30;  // 2 GiB

/// Size of each new chunk for a buffer growing to `target_bytes`: 1/16 of the target, rounded down
/// to a power-of-two multiple of `granularity`, at least `granularity`, at most `max_chunk_bytes`
/// (itself rounded down to a multiple of the granularity, and never below it).
constexpr std::size_t growth_chunk_bytes(std::size_t target_bytes, std::size_t granularity,
                                         std::size_t max_chunk_bytes) noexcept {
  if (granularity == 0) return 0;
  std::size_t const granules = target_bytes / granularity / 16;
  std::size_t const chunk_granules = granules == 0 ? 1 : std::bit_floor(granules);
  std::size_t const cap_granules = max_chunk_bytes / granularity == 0 ? 1 : max_chunk_bytes / granularity;
  return (chunk_granules < cap_granules ? chunk_granules : cap_granules) * granularity;
}

}  // namespace cuvmm
