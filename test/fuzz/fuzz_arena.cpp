// libFuzzer target: long random operation sequences against an Arena on the host backend, with
// the arena's invariants checked after every operation. Built and run by scripts/fuzz.sh (clang).
//
// Decoding: the first 8 bytes (fewer: what there is) seed a small generator; every byte after
// them is one operation, so an input of n bytes runs n - 8 operations. libFuzzer keeps inputs short
// for a long time (about 11 bytes after 30 s), so a short input is replayed cyclically (the
// generator moving on) up to 256 operations: every run is a long sequence. A byte's low 3 bits pick
// what to do, the next 2 bits one of 4 streams, the top 3 bits a size code; the generator fills
// in the details (exact size, which allocation, how wrong a wrong size is). Sizes go from 1 byte
// to 40 pages, with alignments up to a page; 8 pages and more take large pages. The host backend
// has room for 48 pages, so exhaustion, reclaiming and stitching all happen; a backend call can be
// armed to fail, so failures in the middle of an allocation happen too. The first byte picks the
// shared-tails mode and the address space (packed runs, or runs spaced apart). Checked after every step:
//  - live allocations never overlap and keep the byte each was filled with;
//  - the arena's counters equal the model (requested bytes, live count) and the backend's real
//    tally (mapped and physical bytes);
//  - a failed allocation changes nothing the model can see and holds no more physical memory than
//    before it (pages it created were given back);
//  - a free with a wrong size (or of a pointer inside a block) is refused with cuvmm::Error and
//    changes nothing, not even the set of streams the arena knows;
// and when the arena is gone, the backend holds nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>

#include "fuzz_check.hpp"

namespace {

constexpr std::size_t page = 64 * 1024;


struct Live {
  std::size_t bytes;
  unsigned char fill;
};

/// splitmix64: the details of each operation.
struct Generator {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

std::size_t size_from(unsigned code, Generator& g) {
  switch (code) {
    case 0: return 1 + g.below(256);                     // tiny
    case 1: return 1 + g.below(9 * 1024);                // slabs
    case 2: return 256 * (1 + g.below(128));             // exactly a class size, or between classes
    case 3: return page / 2 - g.below(2) + g.below(2);   // around the slab limit
    case 4: return page * (1 + g.below(8)) - g.below(page);  // a few pages
    case 5: return page * (1 + g.below(40)) + g.below(page);  // up to 40 pages: stitching, exhaustion
    case 6: return page * 8 * (1 + g.below(3));          // whole large pages
    default: return 1 + g.below(64);                     // tiny, with large alignments (see below)
  }
}

std::size_t alignment_from(unsigned code, Generator& g) {
  if (code != 7 && g.below(4) != 0) return cuvmm::Arena::default_alignment;
  constexpr std::size_t choices[] = {256, 512, 4096, 8192, page / 4, page / 2, page};
  return choices[g.below(std::size(choices))];
}

bool holds(const void* p, std::size_t bytes, unsigned char fill) {
  auto const* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (c[i] != fill) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cuvmm::HostBackend host({.granularity = page, .physical_limit = 48 * page});
  std::size_t const seed_bytes = size < 8 ? size : 8;
  Generator g{0};
  for (std::size_t i = 0; i < seed_bytes; ++i) g.state = g.state << 8 | data[i];
  {
    cuvmm::FaultInjectingBackend faulty(host);
    cuvmm::ArenaOptions options;
    // 256 pages of addresses (runs packed), or 64 GiB (the first ~31 runs of several pages spaced
    // apart with 2 GiB behind each, as on a GPU's default address space), chosen by the input.
    options.address_space_bytes = size > 0 && (data[0] & 2) != 0 ? std::size_t{64} << 30 : 256 * page;
    options.large_page_bytes = 8 * page;  // requests of 8 pages and more use large pages
    options.share_large_page_tails = size > 0 && (data[0] & 1) != 0;  // both modes, chosen by the input
    cuvmm::Arena arena(faulty, options);
    cuvmm::Stream const streams[4] = {nullptr, reinterpret_cast<cuvmm::Stream>(std::uintptr_t{64}),
                                      reinterpret_cast<cuvmm::Stream>(std::uintptr_t{128}),
                                      reinterpret_cast<cuvmm::Stream>(std::uintptr_t{192})};
    std::map<std::uintptr_t, Live> live;
    std::size_t requested = 0;
    unsigned char next_fill = 1;

    std::size_t const op_bytes = size - seed_bytes;
    std::size_t const operations = op_bytes == 0 ? 0 : std::max(op_bytes, std::min<std::size_t>(256, 32 * op_bytes));
    for (std::size_t step = 0; step < operations; ++step) {
      std::size_t const at = seed_bytes + step % op_bytes;
      std::uint8_t const op = data[at];
      unsigned const what = op & 7u;
      cuvmm::Stream const stream = streams[(op >> 3) & 3u];
      unsigned const code = op >> 5;
      switch (what) {
        case 0: case 1: case 2: {  // allocate
          std::size_t const bytes = size_from(code, g);
          std::size_t const alignment = alignment_from(code, g);
          cuvmm::ArenaStats const before = arena.stats();
          void* p = nullptr;
          try {
            p = arena.allocate(bytes, stream, alignment);
          } catch (const cuvmm::OutOfMemory&) {
          } catch (const cuvmm::Error&) {
            FUZZ_CHECK(faulty.fired());  // only an injected fault fails otherwise
          }
          if (p == nullptr) {
            cuvmm::ArenaStats const after = arena.stats();
            FUZZ_CHECK(after.bytes_requested.current == requested);
            FUZZ_CHECK(after.allocations.current == live.size());
            FUZZ_CHECK(after.bytes_physical.current <= before.bytes_physical.current);
            FUZZ_CHECK(after.bytes_physical.current == host.live_counts().bytes_physical);
            break;
          }
          auto const address = reinterpret_cast<std::uintptr_t>(p);
          FUZZ_CHECK(address % alignment == 0);
          auto const after = live.lower_bound(address);
          FUZZ_CHECK(after == live.end() || address + bytes <= after->first);
          if (after != live.begin()) {
            auto const previous = std::prev(after);
            FUZZ_CHECK(previous->first + previous->second.bytes <= address);
          }
          unsigned char const fill = next_fill++;
          std::memset(p, fill, bytes);
          live.emplace(address, Live{bytes, fill});
          requested += bytes;
          break;
        }
        case 3: case 4: {  // free one
          if (live.empty()) break;
          auto victim = live.begin();
          std::advance(victim, static_cast<std::ptrdiff_t>(g.below(live.size())));
          FUZZ_CHECK(holds(reinterpret_cast<void*>(victim->first), victim->second.bytes, victim->second.fill));
          arena.deallocate(reinterpret_cast<void*>(victim->first), victim->second.bytes, stream);
          requested -= victim->second.bytes;
          live.erase(victim);
          break;
        }
        case 5: {  // a wrong free: another size, or a pointer inside the block; on a maybe-new stream
          if (live.empty()) break;
          auto victim = live.begin();
          std::advance(victim, static_cast<std::ptrdiff_t>(g.below(live.size())));
          std::size_t const bytes = victim->second.bytes;
          bool const inside = bytes > 256 && g.below(4) == 0;
          std::size_t wrong = bytes + 1 + g.below(256);
          if (g.below(2) == 0 && bytes > 1) wrong = bytes - 1 - g.below(bytes - 1 < 256 ? bytes - 1 : 256);
          auto const address = victim->first + (inside ? 256 : 0);
          cuvmm::Stream const where = g.below(2) == 0 ? stream : reinterpret_cast<cuvmm::Stream>(std::uintptr_t{4096 + step * 64});
          cuvmm::ArenaStats const before = arena.stats();
          bool refused = false;
          try {
            arena.deallocate(reinterpret_cast<void*>(address), inside ? bytes : wrong, where);
          } catch (const cuvmm::Error&) {
            refused = true;
          }
          FUZZ_CHECK(refused);
          cuvmm::ArenaStats const after = arena.stats();
          FUZZ_CHECK(after.streams == before.streams);
          FUZZ_CHECK(after.bytes_mapped.current == before.bytes_mapped.current);
          FUZZ_CHECK(holds(reinterpret_cast<void*>(victim->first), bytes, victim->second.fill));
          break;
        }
        case 6:
          if (code == 0) {
            arena.trim();
          } else if (code == 1 && stream != nullptr) {
            arena.release_stream(stream);
          } else if (code >= 6) {  // arm a failure of one of the next few acquiring backend calls
            faulty.fail_nth(1 + g.below(6), {}, g.below(2) == 0 ? cuvmm::FaultInjectingBackend::Failure::out_of_memory
                                                                  : cuvmm::FaultInjectingBackend::Failure::error);
          }
          break;
        default:  // free the most recent allocation (LIFO churn, the common pattern of real programs)
          if (live.empty()) break;
          {
            auto victim = std::prev(live.end());
            arena.deallocate(reinterpret_cast<void*>(victim->first), victim->second.bytes, stream);
            requested -= victim->second.bytes;
            live.erase(victim);
          }
          break;
      }
      cuvmm::ArenaStats const s = arena.stats();
      FUZZ_CHECK(s.bytes_requested.current == requested);
      FUZZ_CHECK(s.allocations.current == live.size());
      FUZZ_CHECK(s.bytes_mapped.current + s.bytes_stale == host.live_counts().bytes_mapped);  // stale: moved pages' old addresses
      FUZZ_CHECK(s.bytes_physical.current == host.live_counts().bytes_physical);
      FUZZ_CHECK(s.pages_moved <= s.maps);  // a page moved is mapped again: one map each
    }
    faulty.disarm();
    for (auto const& [address, allocation] : live) {
      FUZZ_CHECK(holds(reinterpret_cast<void*>(address), allocation.bytes, allocation.fill));
    }
  }
  FUZZ_CHECK(host.live_counts() == cuvmm::LiveCounts{});
  return 0;
}
