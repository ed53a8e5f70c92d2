// cuvmm/growth_policy.hpp: how big the next physical chunk of a growing buffer is. The one place
// this is decided.
//
// Reasoning (numbers from the H200, see H200.md and bench/bench_driver_calls.cu):
//  - Each chunk costs driver calls: cuMemCreate ~15-70 µs, cuMemMap ~2 µs and, per growth step,
//    one cuMemSetAccess ~35-100 µs (one call covers all the chunks of the step, side by side).
//    Measured in growth, a chunk costs ~90 µs all told. Fixed 2 MiB chunks would need ~70,000
//    chunks for 140 GiB: far too slow. So chunks grow with the buffer.
//  - Doubling (like vector capacity) would leave up to half the memory mapped but unused. cuvmm's
//    slack bound (DESIGN.md invariant 6) is one chunk of at most ~1/16 of the size.
//  - So a growth step works in units of 1/16 of the size it grows to, rounded down to a
//    multiple of the granularity. It maps what is missing in as few chunks as it can:
//    one chunk of the missing bytes rounded up to the unit, split only at the cap. Slack is what
//    the last chunk was rounded up by: less than one unit, so under 1/16 of the size. Small steps
//    (push_back) take one unit per chunk: the buffer grows by a factor 17/16 per chunk, ~11 chunks
//    per doubling, O(log n) below the cap; a big step (a 64 MiB append to a small buffer, a
//    reserve) is one chunk. Units rounded down to powers of two (tried first) averaged ~1/22 of
//    the size: 16 chunks per doubling, 112 instead of 89 chunks for 64 MiB appends up to 64 GiB.
//  - The cap bounds the cost of one call and the slack of a huge buffer; releasing a 2 GiB chunk
//    takes ~700 µs, so larger chunks buy little. ~70 chunks hold 140 GiB at the cap.
//  - Creating the next chunk ahead on a background thread was tried and measured: the driver
//    serializes it with the foreground cuMemMap/cuMemSetAccess calls, and growth to 64 GiB spent
//    31 ms in driver calls instead of 22 ms. Fewer chunks is what makes growth cheaper.
#pragma once

#include <cstddef>

namespace cuvmm {

/// Default cap on chunk size (GrowableOptions::max_chunk_bytes).
inline constexpr std::size_t default_max_chunk_bytes = std::size_t{2} << 30;  // 2 GiB

/// The cap rounded down to a multiple of the granularity, and never below one granule.
constexpr std::size_t chunk_cap_bytes(std::size_t granularity, std::size_t max_chunk_bytes) noexcept {
  std::size_t const granules = max_chunk_bytes / granularity;
  return (granules == 0 ? 1 : granules) * granularity;
}

/// The unit of a growth step towards `target_bytes`: 1/16 of the target, rounded down to a
/// multiple of `granularity`, at least one granule, at most the cap.
constexpr std::size_t growth_unit_bytes(std::size_t target_bytes, std::size_t granularity,
                                        std::size_t max_chunk_bytes) noexcept {
  if (granularity == 0) return 0;
  std::size_t const granules = target_bytes / granularity / 16;
  std::size_t const unit = (granules == 0 ? 1 : granules) * granularity;
  std::size_t const cap = chunk_cap_bytes(granularity, max_chunk_bytes);
  return unit < cap ? unit : cap;
}

/// The size of the next chunk to map for a buffer that has `mapped_bytes` mapped and needs
/// `target_bytes` (> mapped_bytes): what is missing rounded up to the step's unit, at most the cap.
/// The one function that decides chunk sizes.
constexpr std::size_t next_chunk_bytes(std::size_t mapped_bytes, std::size_t target_bytes, std::size_t granularity,
                                       std::size_t max_chunk_bytes) noexcept {
  if (granularity == 0 || target_bytes <= mapped_bytes) return 0;
  std::size_t const unit = growth_unit_bytes(target_bytes, granularity, max_chunk_bytes);
  std::size_t const missing = target_bytes - mapped_bytes;
  std::size_t const cap = chunk_cap_bytes(granularity, max_chunk_bytes);
  if (missing >= cap) return cap;
  std::size_t const chunk = (missing + unit - 1) / unit * unit;
  return chunk < cap ? chunk : cap;
}

}  // namespace cuvmm
