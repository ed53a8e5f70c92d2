// Trace replay for the Arena's unit tests: cuvmm-plan's generated traces (tools/cuvmm-plan/trace.hpp)
// replayed the way cuvmm-plan's replay_trace does (measure.cpp: utilization = bytes requested /
// bytes the allocator holds, sampled after every operation when there are at most 2000 of them,
// else every ops/2000-th), with the Arena's own counters of what moved.
//
// BookkeepingBackend lets the GPU profiles' traces (8 and ~35 GiB live, up to 1 GiB per request) be
// replayed on a machine without that much memory: it hands out address numbers and chunk ids and
// backs nothing, which the Arena never notices because it never touches its memory itself. Its
// 2 MiB granularity is the H200's, so the Arena's bookkeeping (pages held, moved, driver calls) is
// what it is on the GPU, and it adds up what those calls would cost there (h200_call_cost).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/error.hpp>

#include "trace.hpp"

namespace cuvmm::test {

/// Median microseconds of one driver call on a handle of some size on the H200, from
/// bench/results/h200/driver_calls.csv (`bench_driver_calls --benchmark_filter=driver_calls/`).
/// `grant` is the first cuMemSetAccess on a newly mapped handle, paid once per handle whatever the
/// call's shape; the call costs depend on the handle far less than on its count.
struct DriverCallCost {
  double create, map, grant, unmap, release;
};

/// The costs for a handle of `bytes`: those measured for the largest size in the table not above it.
inline DriverCallCost h200_call_cost(std::size_t bytes) {
  struct Row {
    std::size_t bytes;
    DriverCallCost cost;
  };
  static constexpr Row table[] = {
      {2 * MiB, {7.4, 0.97, 19.4, 13.7, 9.3}},       {4 * MiB, {7.5, 0.94, 19.1, 13.6, 10.0}},
      {8 * MiB, {7.4, 0.90, 19.2, 13.5, 11.7}},      {16 * MiB, {7.5, 0.92, 19.5, 13.7, 15.1}},
      {32 * MiB, {13.5, 0.95, 32.8, 20.6, 16.2}},    {64 * MiB, {8.0, 0.96, 33.2, 20.7, 24.6}},
      {128 * MiB, {8.5, 0.99, 33.6, 20.6, 40.3}},    {256 * MiB, {9.5, 1.02, 34.7, 20.7, 71.8}},
      {512 * MiB, {13.4, 1.08, 45.3, 24.8, 135.8}},  {1 * GiB, {17.8, 1.20, 57.0, 28.8, 261.7}},
      {2 * GiB, {69.2, 1.63, 81.7, 37.3, 518.4}},    {4 * GiB, {134.1, 1.89, 134.5, 54.4, 1014.4}},
  };
  DriverCallCost cost = table[0].cost;
  for (Row const& row : table) {
    if (row.bytes <= bytes) cost = row.cost;
  }
  return cost;
}

/// A backend of address numbers and chunk ids: nothing is backed, nothing may be touched.
class BookkeepingBackend final : public Backend {
 public:
  explicit BookkeepingBackend(std::size_t device_bytes, std::size_t granularity = 2 * MiB)
      : device_bytes_(device_bytes), granularity_(granularity) {}

  std::string_view name() const noexcept override { return "bookkeeping"; }
  MemorySpace space() const noexcept override { return MemorySpace::host; }
  std::size_t granularity(const ChunkProperties&, GranularityKind) const override { return granularity_; }
  MemoryInfo memory_info(int) const override {
    return {device_bytes_ - std::min(device_bytes_, counts_.bytes_physical), device_bytes_};
  }
  Address reserve(std::size_t size, std::size_t alignment) override {
    std::size_t const a = alignment == 0 ? granularity_ : alignment;
    next_address_ = (next_address_ + a - 1) / a * a;
    Address const base = next_address_;
    next_address_ += size;
    ++counts_.ranges;
    counts_.bytes_reserved += size;
    return base;
  }
  void free_range(Address, std::size_t size) noexcept override {
    --counts_.ranges;
    counts_.bytes_reserved -= size;
  }
  ChunkHandle create_chunk(std::size_t size, const ChunkProperties&) override {
    if (counts_.bytes_physical + size > device_bytes_) throw_out_of_memory("create_chunk", "bookkeeping device full");
    ChunkHandle const handle{++next_chunk_};
    sizes_.emplace(handle.value, size);
    driver_us_ += h200_call_cost(size).create;
    ++created_by_size_[size];
    ++counts_.chunks;
    counts_.bytes_physical += size;
    return handle;
  }
  void release_chunk(ChunkHandle chunk) noexcept override {
    auto const it = sizes_.find(chunk.value);
    if (it == sizes_.end()) return;
    --counts_.chunks;
    counts_.bytes_physical -= it->second;
    driver_us_ += h200_call_cost(it->second).release;
    sizes_.erase(it);
  }
  ChunkInfo chunk_info(ChunkHandle chunk) const override { return {sizes_.at(chunk.value), 0, HandleType::none, false}; }
  void map(Address address, std::size_t size, ChunkHandle) override {
    ++counts_.mappings;
    counts_.bytes_mapped += size;
    mapped_.emplace(address, size);
    DriverCallCost const cost = h200_call_cost(size);
    driver_us_ += cost.map + cost.grant;  // every mapping is granted access before use
  }
  void unmap(Address address, std::size_t size) noexcept override {
    // One call may cover a run of handles, at each handle's cost.
    auto it = mapped_.lower_bound(address);
    while (it != mapped_.end() && it->first < address + size) {
      --counts_.mappings;
      counts_.bytes_mapped -= it->second;
      driver_us_ += h200_call_cost(it->second).unmap;
      it = mapped_.erase(it);
    }
  }
  void set_access(Address, std::size_t, std::span<const AccessGrant>) override {}
  UniqueFd export_posix_fd(ChunkHandle) override { throw_invalid_argument("bookkeeping", "no fds"); }
  ChunkHandle import_posix_fd(int, std::size_t) override { throw_invalid_argument("bookkeeping", "no fds"); }
  FabricHandle export_fabric(ChunkHandle) override { throw_invalid_argument("bookkeeping", "no fabric"); }
  ChunkHandle import_fabric(const FabricHandle&, std::size_t) override {
    throw_invalid_argument("bookkeeping", "no fabric");
  }
  LiveCounts live_counts() const noexcept override { return counts_; }

  /// What the calls made so far would have cost on the H200, in milliseconds (h200_call_cost).
  double h200_driver_ms() const noexcept { return driver_us_ / 1000.0; }
  /// Chunks created so far, by size in bytes.
  const std::map<std::size_t, std::size_t>& created_by_size() const noexcept { return created_by_size_; }

 private:
  std::size_t device_bytes_;
  std::size_t granularity_;
  Address next_address_ = std::uintptr_t{1} << 44;
  std::uint64_t next_chunk_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> sizes_;  // chunk id -> bytes
  std::map<Address, std::size_t> mapped_;                 // address of each mapped handle -> bytes
  std::map<std::size_t, std::size_t> created_by_size_;    // bytes -> chunks created of that size
  LiveCounts counts_;
  double driver_us_ = 0;
};

/// What one replay gave: cuvmm-plan's utilization figures, the Arena's counters at the end, and
/// where the bytes held beyond those requested were, as means over the samples of a fraction of
/// the bytes held (they add up to 1 - mean_utilization).
struct ArenaReplay {
  double mean_utilization = 0;   ///< mean of requested / physical over the samples (as cuvmm-plan)
  std::size_t peak_requested = 0;
  std::size_t peak_physical = 0;  ///< ArenaStats::bytes_physical.peak
  std::size_t failed = 0;         ///< allocations that threw OutOfMemory
  ArenaStats stats;               ///< after the replay, before the survivors are freed
  double rounding_loss = 0;       ///< live allocations rounded up to their block or whole pages
  double cached_loss = 0;         ///< mapped and not live: cached runs, free slab blocks
  double pooled_loss = 0;         ///< held and not mapped: pooled pages
  /// The best mean utilization an allocator could reach that rounds as the Arena does and never
  /// gives memory back: requested / the largest rounded live bytes so far.
  double never_releasing_bound = 0;
  std::size_t live_at_end = 0;       ///< bytes requested by the allocations live at the end
  /// The largest allocation that succeeded at the end, the survivors still live (in pages; 0 when
  /// not measured): what D2's first rule bounds from below.
  std::size_t largest_after = 0;
  /// What the replay's driver calls would have cost on the H200, in milliseconds (before the
  /// largest allocation was measured; 0 when the backend was not a BookkeepingBackend).
  double h200_driver_ms = 0;
  /// Chunks the replay created, by size in bytes (before the largest allocation was measured;
  /// empty when the backend was not a BookkeepingBackend).
  std::map<std::size_t, std::size_t> created_by_size;
};

/// The largest request of whole pages that `arena` serves now (binary search over page counts up
/// to `most` bytes; each probe is freed at once).
inline std::size_t largest_allocation(Arena& arena, std::size_t most) {
  std::size_t const page = arena.page_bytes();
  std::size_t low = 0;
  std::size_t high = most / page + 1;  // low pages succeed, high pages fail
  while (high - low > 1) {
    std::size_t const mid = low + (high - low) / 2;
    try {
      arena.deallocate(arena.allocate(mid * page), mid * page);
      low = mid;
    } catch (const OutOfMemory&) {
      high = mid;
    }
  }
  return low * page;
}

/// The bytes a live allocation of `bytes` keeps mapped in `arena` (its slab block or whole pages),
/// from the size classes of slabs.hpp: multiples of 256 B below 1 KiB, then four per doubling.
inline std::size_t rounded_bytes(const Arena& arena, std::size_t bytes) {
  if (bytes > arena.small_max_bytes()) return (bytes + arena.page_bytes() - 1) / arena.page_bytes() * arena.page_bytes();
  if (bytes <= 1024) return (bytes + 255) / 256 * 256;
  std::size_t power = 1024;
  while (2 * power < bytes) power *= 2;
  std::size_t const quarter = power / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

/// Called after each free of a replay with the arena and the rounded bytes still live (a profile
/// uses it to give memory back, by trim(), when too much is held).
using AfterFree = std::function<void(Arena&, std::size_t rounded_live_bytes)>;

/// Called after each allocation of a replay that succeeded, with the bytes asked for and the pages
/// it moved (a profile uses it to see which requests move pages).
using AfterAllocate = std::function<void(std::size_t bytes, std::size_t pages_moved)>;

/// Replays `ops` on `arena` (one stream), as cuvmm-plan's replay_trace does.
/// With `largest_up_to` not 0, the largest allocation that succeeds at the end (up to that many
/// bytes) is measured before the survivors are freed. With `bookkeeping`, the backend of `arena`,
/// the replay's estimated H200 driver time is recorded.
inline ArenaReplay replay(Arena& arena, const std::vector<plan::TraceOp>& ops, std::size_t max_points = 2000,
                          const AfterFree& after_free = {}, std::size_t largest_up_to = 0,
                          const BookkeepingBackend* bookkeeping = nullptr, const AfterAllocate& after_allocate = {}) {
  ArenaReplay r;
  std::size_t const stride = std::max<std::size_t>(1, ops.size() / max_points);
  std::unordered_map<std::size_t, std::pair<void*, std::size_t>> live;
  std::size_t requested = 0;
  std::size_t rounded = 0;
  std::size_t peak_rounded = 0;
  std::size_t points = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto const& op = ops[i];
    if (op.allocate) {
      if (op.bytes != 0) {
        std::size_t const moved_before = after_allocate ? arena.stats().pages_moved : 0;
        try {
          live.emplace(op.id, std::pair{arena.allocate(op.bytes), op.bytes});
          requested += op.bytes;
          rounded += rounded_bytes(arena, op.bytes);
          if (after_allocate) after_allocate(op.bytes, arena.stats().pages_moved - moved_before);
        } catch (const OutOfMemory&) {
          ++r.failed;
        }
      }
    } else if (auto const found = live.find(op.id); found != live.end()) {
      arena.deallocate(found->second.first, found->second.second);
      requested -= found->second.second;
      rounded -= rounded_bytes(arena, found->second.second);
      live.erase(found);
      if (after_free) after_free(arena, rounded);
    }
    r.peak_requested = std::max(r.peak_requested, requested);
    peak_rounded = std::max(peak_rounded, rounded);
    if (i % stride == 0 || i + 1 == ops.size()) {
      ArenaStats const s = arena.stats();
      auto const held = static_cast<double>(s.bytes_physical.current);
      if (held != 0) {
        r.mean_utilization += static_cast<double>(requested) / held;
        r.rounding_loss += static_cast<double>(rounded - requested) / held;
        r.cached_loss += (static_cast<double>(s.bytes_mapped.current) - static_cast<double>(rounded)) / held;
        r.pooled_loss += static_cast<double>(s.bytes_physical.current - s.bytes_mapped.current) / held;
        r.never_releasing_bound += static_cast<double>(requested) / static_cast<double>(peak_rounded);
        ++points;
      }
    }
  }
  r.stats = arena.stats();
  r.peak_physical = r.stats.bytes_physical.peak;
  r.live_at_end = requested;
  if (bookkeeping != nullptr) {
    r.h200_driver_ms = bookkeeping->h200_driver_ms();
    r.created_by_size = bookkeeping->created_by_size();
  }
  if (largest_up_to != 0) r.largest_after = largest_allocation(arena, largest_up_to);
  for (auto const& [id, entry] : live) arena.deallocate(entry.first, entry.second);
  if (points != 0) {
    for (double* mean : {&r.mean_utilization, &r.rounding_loss, &r.cached_loss, &r.pooled_loss, &r.never_releasing_bound}) {
      *mean /= static_cast<double>(points);
    }
  }
  return r;
}

/// cuvmm-plan's generated traces (main.cpp, make_profile): the host profiles' (1 B .. 16 MiB,
/// 256 MiB live) and the GPU profiles' on an H200 (1 B .. 1 GiB; live min(8 or 40 GiB, free / 4):
/// 34.8 GiB for the full profile with 139.3 GiB free, as in the README's full run), all seed 1234.
inline std::vector<plan::TraceOp> host_quick_trace() { return plan::make_trace(1000, 256 * MiB, 1234, 24); }
inline std::vector<plan::TraceOp> host_full_trace() { return plan::make_trace(4000, 256 * MiB, 1234, 24); }
inline std::vector<plan::TraceOp> gpu_quick_trace() { return plan::make_trace(2000, 8 * GiB, 1234, 30); }
inline std::vector<plan::TraceOp> gpu_full_trace() { return plan::make_trace(10000, 348 * GiB / 10, 1234, 30); }

}  // namespace cuvmm::test
