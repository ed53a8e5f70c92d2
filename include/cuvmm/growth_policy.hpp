// cuvmm/growth_policy.hpp: how big the next physical chunk of a growing buffer is. The one place
// this is decided (DESIGN.md invariant 6).
//
// Reasoning (numbers from the H200: bench/bench_driver_calls.cu for the driver calls,
// bench/bench_growth.cpp and bench/bench_growth_overlap.cu for growth against preallocated memory):
//  - A growth step costs ~50-100 µs of driver calls on the host (cuMemCreate ~11-37 µs, cuMemMap
//    ~1 µs, and granting access ~25 µs per newly mapped handle whatever the call shape). A step is
//    hidden behind the GPU's work only when the chunk it maps takes the GPU longer to fill than the
//    step takes. The "hide size" is a chunk whose fill takes the device about twice one step's
//    time: between two steps the host also issues the appends that fill the chunk, and a larger
//    chunk's grant costs more (~50 µs at 32 MiB, ~75 µs at 512 MiB on the H200). 4 GiB in 64 MiB
//    appends (cuvmm-plan --growth-case growable_hide_MiB_N:4294967296:67108864) took 1.46-1.83x
//    the time of a preallocated buffer with chunks of one step's fill (N = 278, 17 steps),
//    1.33-1.40x with twice that (556, 11 steps); three and four times gave no more (1.31-1.61x)
//    for more slack.
//    On an H200 (~3.5 TB/s of fill bandwidth, ~90 µs a step) that is ~600 MB. cuvmm-plan measures
//    it per GPU (2 x fill bandwidth of the preallocated baseline x step time of its chunk size) and
//    prints the value for GrowableOptions::hide_bytes. Its default is the device's memory / 256
//    (default_hide_bytes): ~140 GiB / 256 = ~556 MiB on an H200. Fast GPUs have about 25-45
//    bytes/s of bandwidth per byte of memory, so writing memory / 256 takes ~90-160 µs: about two
//    steps.
//  - Below the hide size every step is exposed, so the count of steps is what costs: 1/16 of the
//    size per chunk (~11 steps per doubling) makes 256 MiB in 4 KiB appends take 58 steps and run
//    no faster than cudaMalloc copy-and-grow. So the `fast` policy grows a buffer smaller than the
//    hide size like std::vector: each step maps at least as much as is mapped (capacity at least
//    doubles; 8 steps to 256 MiB from one 2 MiB granule). The slack this leaves is below what is
//    mapped, so below the size: never worse than copy-and-grow's, which also holds the old and the
//    new copy at once while it copies.
//  - From the hide size on, chunks are at least the hide size (each step hidden, slack at most one
//    hide size), and once 1/16 of the size is larger, 1/16 of the size (so slack stays <= 1/16 for
//    large buffers: ~11 steps per doubling there, each hidden), rounded down to whole granules.
//  - Every chunk is at most the cap (GrowableOptions::max_chunk_bytes, 2 GiB by default): it bounds
//    the cost of one call and the slack of a huge buffer; releasing a 2 GiB chunk takes ~700 µs, so
//    larger chunks buy little. ~70 chunks hold 140 GiB at the cap.
//  - A step maps what is missing in as few chunks as it can: one chunk of the missing bytes rounded
//    up to the step's unit (below the hide size: at least what is mapped), split only at the cap. A
//    big step (a 64 MiB append to a small buffer, a reserve) is one exact chunk.
//  - Bound (checked by the unit tests over a sweep of sizes): after growing to `size`, the slack
//    (mapped - size) is at most max(size / 16, min(size, hide size)) plus one granule.
//  - Mapping ahead (fast policy only, GrowableOptions::map_ahead): below the hide size a buffer
//    may hold one more step, step_ahead_bytes(), prepared off the caller's thread so that its driver
//    calls overlap the GPU's work; the slack bound then grows by that one step, less than the hide
//    size. From the hide size on, each step's chunk takes the GPU at least two steps' time to fill,
//    so the step is hidden behind the fills already queued; a step prepared ahead there only holds
//    one more (large) chunk and competes with the caller's own steps for the driver, which makes
//    these calls one at a time in a process (bench/bench_driver_calls.cu, driver_threads). Measured
//    with steps ahead at every size (bench_growth, H200, fresh processes, medians of 3, over
//    preallocated): 4 GiB in 64 MiB appends 1.83 against 1.55 without, 64 GiB 1.08 against 1.04,
//    120 GiB 1.03 against 1.02; below the hide size it gains (1 GiB in 1 MiB: 1.13 against 1.28).
//    Growing by one step ahead rather than by a larger first chunk keeps a buffer resized once at
//    its size: preparation starts from the second growth step.
//  - The `compact` policy takes 1/16 of the size at every size (slack <= 1/16 or one granule) and
//    never maps ahead, for programs that prefer memory over time.
//  - Rounding units down to powers of two averages ~1/22 of the size: more steps for the same
//    slack, so units are whole granules instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuvmm {

/// How a growable buffer sizes its chunks (GrowableOptions::growth).
enum class GrowthPolicy : std::uint8_t {
  fast,     ///< geometric below the hide size, then chunks of at least the hide size, then 1/16
  compact,  ///< 1/16 of the size at every size: least slack, more (exposed) steps for small buffers
};

/// Default cap on chunk size (GrowableOptions::max_chunk_bytes).
inline constexpr std::size_t default_max_chunk_bytes = std::size_t{2} << 30;  // 2 GiB

/// The default hide size of a device with `device_memory_bytes` of memory: 1/256 of it, rounded
/// down to the granularity, at least one granule (~556 MiB on an H200, ~140 GiB; see above).
constexpr std::size_t default_hide_bytes(std::size_t device_memory_bytes, std::size_t granularity) noexcept {
  if (granularity == 0) return 0;
  std::size_t const granules = device_memory_bytes / 256 / granularity;
  return (granules == 0 ? 1 : granules) * granularity;
}

/// The cap rounded down to a multiple of the granularity, and never below one granule.
constexpr std::size_t chunk_cap_bytes(std::size_t granularity, std::size_t max_chunk_bytes) noexcept {
  std::size_t const granules = max_chunk_bytes / granularity;
  return (granules == 0 ? 1 : granules) * granularity;
}

/// 1/16 of `target_bytes`, rounded down to a multiple of `granularity`, at least one granule, at
/// most the cap: the unit of the compact policy, and of the fast one for large buffers.
constexpr std::size_t growth_unit_bytes(std::size_t target_bytes, std::size_t granularity,
                                        std::size_t max_chunk_bytes) noexcept {
  if (granularity == 0) return 0;
  std::size_t const granules = target_bytes / granularity / 16;
  std::size_t const unit = (granules == 0 ? 1 : granules) * granularity;
  std::size_t const cap = chunk_cap_bytes(granularity, max_chunk_bytes);
  return unit < cap ? unit : cap;
}

/// What next_chunk_bytes needs to know of a buffer besides its sizes.
struct GrowthShape {
  std::size_t granularity = 0;                          ///< every chunk is a multiple of it
  std::size_t max_chunk_bytes = default_max_chunk_bytes;  ///< the cap (rounded to the granularity)
  std::size_t hide_bytes = 0;  ///< the fast policy's hide size (taken in whole granules, within [granule, cap])
  GrowthPolicy policy = GrowthPolicy::fast;
};

/// The fast policy's hide size as next_chunk_bytes uses it: GrowthShape::hide_bytes in whole
/// granules, within [one granule, the cap]. 0 without a granularity.
constexpr std::size_t hide_size_bytes(const GrowthShape& shape) noexcept {
  std::size_t const g = shape.granularity;
  if (g == 0) return 0;
  std::size_t const cap = chunk_cap_bytes(g, shape.max_chunk_bytes);
  std::size_t const hide = shape.hide_bytes / g * g;
  return hide < g ? g : (hide > cap ? cap : hide);
}

/// The size of the next chunk to map for a buffer that has `mapped_bytes` mapped and needs
/// `target_bytes` (> mapped_bytes), by the policy above. 0 when nothing is missing (or no
/// granularity). A multiple of the granularity, at most the cap. The one function that decides
/// chunk sizes: GrowableStorage::reserve calls it until the target is mapped.
constexpr std::size_t next_chunk_bytes(std::size_t mapped_bytes, std::size_t target_bytes,
                                       const GrowthShape& shape) noexcept {
  std::size_t const g = shape.granularity;
  if (g == 0 || target_bytes <= mapped_bytes) return 0;
  std::size_t const cap = chunk_cap_bytes(g, shape.max_chunk_bytes);
  std::size_t const missing = target_bytes - mapped_bytes;
  if (missing >= cap) return cap;
  std::size_t const missing_granules = (missing + g - 1) / g * g;
  std::size_t unit = growth_unit_bytes(target_bytes, g, shape.max_chunk_bytes);
  if (shape.policy == GrowthPolicy::fast) {
    std::size_t const hide = hide_size_bytes(shape);
    if (mapped_bytes < hide) {
      // Geometric: at least double what is mapped (std::vector's rule), one granule at first.
      std::size_t chunk = missing_granules > mapped_bytes ? missing_granules : mapped_bytes / g * g;
      if (chunk < g) chunk = g;
      return chunk < cap ? chunk : cap;
    }
    if (unit < hide) unit = hide;
  }
  std::size_t const chunk = (missing + unit - 1) / unit * unit;
  return chunk < cap ? chunk : cap;
}

/// The compact policy's chunk (1/16 of the size at every size).
constexpr std::size_t next_chunk_bytes(std::size_t mapped_bytes, std::size_t target_bytes, std::size_t granularity,
                                       std::size_t max_chunk_bytes) noexcept {
  return next_chunk_bytes(mapped_bytes, target_bytes,
                          GrowthShape{granularity, max_chunk_bytes, 0, GrowthPolicy::compact});
}

/// The step a buffer that has `mapped_bytes` mapped may prepare ahead of need: the chunk the next
/// growth past what is mapped would map (next_chunk_bytes for one more byte), while less than the
/// hide size is mapped; 0 from the hide size on, where steps are hidden without it, and under the
/// compact policy, which never maps ahead. The caller limits it to the room left in the address range.
constexpr std::size_t step_ahead_bytes(std::size_t mapped_bytes, const GrowthShape& shape) noexcept {
  if (shape.policy != GrowthPolicy::fast || mapped_bytes >= hide_size_bytes(shape)) return 0;
  return next_chunk_bytes(mapped_bytes, mapped_bytes + 1, shape);
}

}  // namespace cuvmm
