// libFuzzer target: random operation sequences against an Arena on the host backend, with the
// arena's invariants checked after every operation. Built and run by scripts/fuzz.sh (clang).
//
// Each operation takes 4 input bytes: what to do, which of 4 streams, and a size code (sizes
// from 1 byte to 40 pages, small alignments and page alignment; 8 pages and more take large
// pages). The host backend has room for
// 48 pages, so exhaustion, reclaiming and stitching all happen. Checked after every step:
//  - live allocations never overlap and keep the byte each was filled with;
//  - the arena's counters equal the model (requested bytes, live count) and the backend's real
//    tally (mapped and physical bytes);
//  - a failed allocation is OutOfMemory and changes nothing the model can see;
// and when the arena is gone, the backend holds nothing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

namespace {

constexpr std::size_t page = 64 * 1024;

#define FUZZ_CHECK(condition)                                                              \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (false)

struct Live {
  std::size_t bytes;
  unsigned char fill;
};

std::size_t size_from(std::uint8_t code, std::uint8_t extra) {
  switch (code % 4) {
    case 0: return 1 + extra;                            // tiny
    case 1: return 1 + extra * 37;                       // up to ~9 KiB: slabs
    case 2: return page * (1 + extra % 8) - extra;       // around a few pages
    default: return page * (1 + extra % 40) + extra;     // up to 40 pages: stitching, exhaustion
  }
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
  {
    cuvmm::ArenaOptions options;
    options.address_space_bytes = 256 * page;
    options.large_page_bytes = 8 * page;  // requests of 8 pages and more use large pages
    cuvmm::Arena arena(host, options);
    cuvmm::Stream const streams[4] = {nullptr, reinterpret_cast<cuvmm::Stream>(std::uintptr_t{64}),
                                      reinterpret_cast<cuvmm::Stream>(std::uintptr_t{128}),
                                      reinterpret_cast<cuvmm::Stream>(std::uintptr_t{192})};
    std::map<std::uintptr_t, Live> live;
    std::size_t requested = 0;
    unsigned char next_fill = 1;

    for (std::size_t at = 0; at + 4 <= size; at += 4) {
      std::uint8_t const what = data[at], which = data[at + 1], code = data[at + 2], extra = data[at + 3];
      cuvmm::Stream const stream = streams[which % 4];
      switch (what % 8) {
        case 0: case 1: case 2: case 3: {  // allocate
          std::size_t const bytes = size_from(code, extra);
          std::size_t const alignment = what % 8 == 3 ? page : cuvmm::Arena::default_alignment;
          void* p = nullptr;
          try {
            p = arena.allocate(bytes, stream, alignment);
          } catch (const cuvmm::OutOfMemory&) {
            FUZZ_CHECK(arena.stats().bytes_requested.current == requested);
            break;
          }
          auto const address = reinterpret_cast<std::uintptr_t>(p);
          FUZZ_CHECK(address % alignment == 0);
          auto const after = live.lower_bound(address);
          FUZZ_CHECK(after == live.end() || address + bytes <= after->first);
          if (after != live.begin()) {
            auto const before = std::prev(after);
            FUZZ_CHECK(before->first + before->second.bytes <= address);
          }
          unsigned char const fill = next_fill++;
          std::memset(p, fill, bytes);
          live.emplace(address, Live{bytes, fill});
          requested += bytes;
          break;
        }
        case 4: case 5: {  // free one
          if (live.empty()) break;
          auto victim = live.begin();
          std::advance(victim, static_cast<std::ptrdiff_t>((code * 256u + extra) % live.size()));
          FUZZ_CHECK(holds(reinterpret_cast<void*>(victim->first), victim->second.bytes, victim->second.fill));
          arena.deallocate(reinterpret_cast<void*>(victim->first), victim->second.bytes, stream);
          requested -= victim->second.bytes;
          live.erase(victim);
          break;
        }
        case 6:
          arena.trim();
          break;
        default:
          if (stream != nullptr) arena.release_stream(stream);
          break;
      }
      cuvmm::ArenaStats const s = arena.stats();
      FUZZ_CHECK(s.bytes_requested.current == requested);
      FUZZ_CHECK(s.allocations.current == live.size());
      FUZZ_CHECK(s.bytes_mapped.current == host.live_counts().bytes_mapped);
      FUZZ_CHECK(s.bytes_physical.current == host.live_counts().bytes_physical);
    }
    for (auto const& [address, allocation] : live) {
      FUZZ_CHECK(holds(reinterpret_cast<void*>(address), allocation.bytes, allocation.fill));
    }
  }
  FUZZ_CHECK(host.live_counts() == cuvmm::LiveCounts{});
  return 0;
}
