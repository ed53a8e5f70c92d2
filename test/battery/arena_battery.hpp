// The allocator test battery: one set of Arena test cases (arena_battery.cpp) that every test
// program runs on its own memory. The unit suite runs it on the host backend (so CI does), the
// gpu suite on the H200's device memory. A program provides make_battery_memory(); a program whose
// memory is absent there (no GPU) SKIPs inside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuvmm/arena.hpp>
#include <cuvmm/backend.hpp>

namespace cuvmm::test {

/// Every member is thread-safe and reports failures by throwing (never with Catch2 assertions,
/// which must not run on other threads).
class BatteryMemory {
 public:
  virtual ~BatteryMemory() = default;
  virtual Backend& backend() = 0;
  /// Options for the arenas the battery makes (the host program picks a small page).
  virtual ArenaOptions options() = 0;
  /// A stream that lives as long as this object (the host's are distinct fake handles).
  virtual Stream new_stream() = 0;
  /// Writes the 32-bit pattern of `seed` over [p, p + bytes) in order on `stream` (bytes % 4 == 0).
  virtual void write_pattern(void* p, std::size_t bytes, std::uint64_t seed, Stream stream) = 0;
  /// Words of [p, p + bytes) that differ from the pattern of `seed`, after the work on `stream`.
  virtual std::size_t mismatches(const void* p, std::size_t bytes, std::uint64_t seed, Stream stream) = 0;
  /// Free physical memory where the arena's pages come from (cuMemGetInfo on the device).
  virtual std::size_t free_bytes() = 0;
  /// Blocks until `stream`'s work is done.
  virtual void synchronize(Stream stream) = 0;
};

/// Defined once per test program.
std::unique_ptr<BatteryMemory> make_battery_memory();

/// `memory`'s options with large requests laid out as large pages then small ones (share_large_page_tails
/// off), for the cases that check that layout.
inline ArenaOptions small_tail_layout(BatteryMemory& memory) {
  ArenaOptions options = memory.options();
  options.share_large_page_tails = false;
  return options;
}

}  // namespace cuvmm::test
