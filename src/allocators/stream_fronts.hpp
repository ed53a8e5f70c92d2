// stream_fronts.hpp: per-stream caches of freed allocations that the Arena serves without its lock.
//
// Owns: one StreamFront per stream that freed memory into one (its own mutex; the blocks and runs
//   of whole pages it keeps, "parked", per key: a size class, or a number of small pages up to
//   max_pages; the allocations it handed out and that are live now, with their exact size; the
//   frees it parked that the Arena's live counters still count, `owed`), a registry from stream
//   handle to front, and a per-thread memory of the last front looked up.
// Invariants: a parked or handed address is, in the Arena's own books (live spans, slabs), a live
//   allocation held by exactly one front (the Arena's `held` map says which); its recorded size
//   there is stale while it is handed: the front's record is the one a free is checked against.
//   A front's parked bytes (the pages or blocks behind them) never exceed the bound it was made
//   with. A front with anything parked is `listed` (the Arena drains only those, so a drain costs
//   what is parked, not the number of streams met); it parks on the cached path only while listed,
//   and only the Arena lists it, under its lock. A front is never destroyed before the Arena: a released one is emptied, marked inactive
//   and reused for the next new stream, so a pointer to it stays valid; whoever locks it checks
//   that it still serves the stream it looked for (serves()).
// Locks: the Arena's lock, then the registry's, then a front's; never two fronts' at once; the
//   cached path takes only one front's (never another lock while holding it).
// Never does: touch the Arena's books, pages or stream caches (the Arena drains a front, under its
//   own lock and the front's); decide what is eligible (the Arena gives keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuvmm/types.hpp>

#include "support/node_spares.hpp"

namespace cuvmm::detail {

struct StreamFront {
  struct Handed {
    std::size_t bytes = 0;  // as requested: a free is checked against it
    std::size_t key = 0;    // where it is parked when freed on this front's stream
  };

  std::mutex lock;
  Stream stream = nullptr;                           // the stream served (when active)
  bool active = false;                               // false: released, waiting for reuse
  bool listed = false;                               // on the Arena's list of fronts to drain (set and cleared under its lock)
  std::size_t listed_at = 0;                         // where on that list, while listed
  std::vector<std::vector<Address>> parked;          // per key: free allocations, reusable at once on `stream`
  std::unordered_map<Address, Handed> handed;        // live allocations served from `parked`
  // Nodes of `handed` kept for reuse, so that a pair on the cached path makes no heap call: as many
  // as the live blocks a thread usually has from its front at once (16 in
  // `bench_arena --benchmark_filter=threads/`) and then some.
  NodeSpares<std::unordered_map<Address, Handed>> spare_nodes{32};
  std::size_t parked_bytes = 0;                      // backing bytes of everything parked
  std::size_t served = 0;                            // allocations served from `parked`, ever
  std::size_t served_bytes = 0;                      // and the bytes they asked for
  std::size_t freed = 0;                             // frees parked without the Arena's lock, ever
  // Frees parked without the Arena's lock are not taken off its shared live counters at once: they
  // are owed, and this front's next cached-path allocations are counted against them first (so a
  // thread that frees and allocates on its own stream writes no shared counter). The Arena settles
  // them under its lock.
  std::size_t owed_bytes = 0;                        // bytes (as requested) freed here and still counted live
  std::size_t owed_allocations = 0;                  // and those allocations

  /// Whether the front serves `s` now (to be asked under `lock`).
  [[nodiscard]] bool serves(Stream s) const noexcept { return active && stream == s; }
};

class StreamFronts {
 public:
  /// Fronts with `keys` bins each.
  explicit StreamFronts(std::size_t keys);
  StreamFronts(const StreamFronts&) = delete;
  StreamFronts& operator=(const StreamFronts&) = delete;

  /// The front of `stream`, or null when it has none; to be locked and checked with serves().
  /// Takes no lock when the calling thread looked up the same stream last (the common case).
  [[nodiscard]] StreamFront* find(Stream stream);
  /// The front of `stream` by the registry alone, or null. Call under the Arena's lock.
  [[nodiscard]] StreamFront* registered(Stream stream);
  /// Forgets the calling thread's memory of the last front (after serves() said no).
  void forget_last() noexcept;
  /// The front of `stream`, made (or a released one reused) if need be. Throws only
  /// std::bad_alloc, changing nothing. Call under the Arena's lock.
  StreamFront& get(Stream stream);
  /// Unregisters `front` (emptied by the Arena; not locked by the caller), keeping it for reuse.
  void retire(StreamFront& front) noexcept;
  /// Calls f(StreamFront&) for every active front, unlocked. Call under the Arena's lock.
  template <class F>
  void for_each(F&& f) {
    std::lock_guard const held(registry_);
    for (auto const& front : all_) {
      if (front->active) f(*front);
    }
  }

 private:
  std::uint64_t const serial_;                                // this registry, among all ever made
  std::size_t const keys_;
  std::mutex registry_;                                       // all_, by_stream_, spare_
  std::vector<std::unique_ptr<StreamFront>> all_;             // owner, for the Arena's lifetime
  std::unordered_map<Stream, StreamFront*> by_stream_;        // the active ones
  std::vector<StreamFront*> spare_;                           // released, to reuse
};

}  // namespace cuvmm::detail
