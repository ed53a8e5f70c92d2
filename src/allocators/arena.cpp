// Arena: how it works (the contract is in include/cuvmm/arena.hpp).
//
// What it owns: one AddressRange cut into slots of page_bytes; physical pages of two sizes, small
// (page_bytes, one slot) and large (large_page_bytes, L slots), each either mapped at a slot
// (`mapped`, keyed by its first slot) or pooled unmapped (`pool`, `large_pool`); per stream, what
// it freed: mapped free extents of small pages (`cached`), whole freed spans that hold large pages
// (`large_cached`), and small blocks (`free_blocks`, per size class).
//
// Every slot is in exactly one state:
//   unmapped-free  in `unmapped` (nothing mapped, not in use)
//   cached         mapped, free, in one stream's `cached` set or `large_cached` spans: reusable on
//                  that stream at once
//   live span      mapped, backing one allocation of whole pages (`live_spans`, keyed by address)
//   slab           mapped, split into blocks of one size class (`slabs`)
//
// Request of n slots (n < L: small layout, all small pages; n >= L: large layout, n / L large
// pages at an L-aligned address followed by small pages) on stream S, cheapest first:
//   1. S's cache: best fit in its small extents (split freely: each small page is its own
//      mapping), or a freed large-layout span of exactly n slots (large pages cannot be split);
//   2. the same in another stream's cache, after making S wait for that stream's event;
//   3. stitch: n unmapped slots and pages from the pools, else from S's own cached memory
//      (unmapped after a host wait for S's queued work), else newly created. Large pages the
//      device will not give are replaced by small ones; pooled pages of the other size are
//      released before new pages are created. When small pages cannot be had, every
//      stream is waited for, all cached memory and empty slabs are unmapped, pooled large pages are
//      released, and creation is tried again; then OutOfMemory. The pages are mapped side by side
//      and granted access with one call.
// Small request: S's free blocks of the class, else a fresh block of a slab S opened, else the
// free blocks of another stream (after the event wait), else a new slab (one page, as above).
//
// Fragmentation is bounded by construction: physical pages only grow when no pooled or cached
// page on the requesting stream can serve, so pages held exceed pages in use only by cached
// memory of other streams (until trim() or exhaustion), partly used slabs (one per class per
// stream, plus slabs whose blocks are scattered; trim() and exhaustion return empty ones), less
// than one small page per allocation, and pooled pages of the other size.
// Address space can fragment, but it is reserved twice the device's size, and exhaustion unmaps
// cached extents back into it.
#include <cuvmm/arena.hpp>

#include <algorithm>
#include <bit>
#include <map>
#include <cassert>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "allocators/extent_set.hpp"
#include "allocators/stream_order.hpp"

namespace cuvmm {
namespace {

using detail::ExtentSet;
using detail::StreamOrder;

constexpr std::size_t min_block_bytes = Arena::default_alignment;

/// Size classes up to `small_max`: multiples of 256 B below 1 KiB, then four per doubling.
std::vector<std::size_t> make_size_classes(std::size_t small_max) {
  std::vector<std::size_t> classes;
  for (std::size_t size = min_block_bytes; size < 1024 && size <= small_max; size += min_block_bytes) classes.push_back(size);
  for (std::size_t base = 1024; base <= small_max; base *= 2) {
    for (std::size_t quarter = 0; quarter < 4; ++quarter) {
      std::size_t const size = base + quarter * base / 4;
      if (size <= small_max) classes.push_back(size);
    }
  }
  return classes;
}

void bump(ArenaCounter& c, std::size_t by) noexcept {
  c.current += by;
  c.total += by;
  c.peak = std::max(c.peak, c.current);
}

void set_current(ArenaCounter& c, std::size_t now) noexcept {
  if (now > c.current) c.total += now - c.current;
  c.current = now;
  c.peak = std::max(c.peak, now);
}

}  // namespace

struct Arena::State {
  struct MappedPage {
    PhysicalChunk page;  // released after the mapping is gone (members die in reverse order)
    Mapping mapping;
  };
  struct Slab {
    std::size_t size_class = 0;     // index into size_classes
    std::size_t block_bytes = 0;    // the class's size
    std::size_t blocks = 0;         // blocks in the page
    std::size_t handed_out = 0;     // blocks [0, handed_out) have been handed out at least once
    std::size_t in_use = 0;         // blocks allocated now
    std::vector<bool> allocated;    // per block: allocated now (catches double frees)
  };
  struct LiveSpan {
    std::size_t first = 0;      // first slot
    std::size_t pages = 0;      // slots
    std::size_t bytes = 0;      // as requested
    bool large_layout = false;  // starts with large pages: cached whole, never split
  };
  struct StreamState {
    Stream stream = nullptr;
    StreamOrder::Marker marker = nullptr;
    ExtentSet cached;                                   // mapped free small pages freed on this stream
    std::multimap<std::size_t, std::size_t> large_cached;  // freed large-layout spans: slots → first slot
    std::vector<std::vector<Address>> free_blocks;      // per size class: blocks freed on this stream
    std::vector<std::vector<std::size_t>> fresh_slabs;  // per size class: this stream's slabs with unused blocks
  };

  State(Backend& user_backend, ArenaOptions opts);
  ~State();

  // --- helpers; all run under `lock` -----------------------------------------------------------
  StreamState& stream_state(Stream stream);
  Address slot_address(std::size_t slot) const noexcept { return range.base() + slot * page; }
  std::size_t pages_for(std::size_t bytes) const noexcept { return (bytes + page - 1) / page; }
  std::optional<std::size_t> size_class_of(std::size_t bytes, std::size_t alignment) const noexcept;

  bool large_layout(std::size_t slots) const noexcept { return slots_per_large != 0 && slots >= slots_per_large; }
  std::size_t physical_bytes() const noexcept {
    return mapped_bytes + pool.size() * page + large_pool.size() * large_page;
  }
  std::size_t take_pages(std::size_t count, StreamState& s);
  std::size_t map_new_span(std::size_t count, StreamState& s);
  std::size_t gather_large(std::size_t count, StreamState& s, std::vector<PhysicalChunk>& out);
  void gather_small(std::size_t count, StreamState& s, std::vector<PhysicalChunk>& out);
  bool create_page(std::size_t bytes, std::size_t held_in_out, std::vector<PhysicalChunk>& out);
  void unmap_slots(std::size_t first, std::size_t count);
  static std::size_t take_pooled(std::vector<PhysicalChunk>& from, std::size_t wanted, std::vector<PhysicalChunk>& out);
  void release_pooled(std::vector<PhysicalChunk>& from, std::size_t bytes);
  std::size_t unmap_cached(StreamState& s, std::size_t pages_wanted);
  void unmap_large_cached(StreamState& s);
  void unmap_all_cached();
  void wait_for(StreamState& s);  // blocks until the work queued on `s` so far is done
  void wait_for_all_streams();
  std::size_t unmap_empty_slabs();
  void make_stream_wait(StreamState& waiter, StreamState& freer);

  Address allocate_small(std::size_t size_class, StreamState& s);
  void deallocate_small(Address address, std::size_t bytes, StreamState& s);
  void update_peaks() noexcept;  // bytes_mapped and bytes_physical from the pages held now

  FaultInjectingBackend calls;  // forwards to the user's backend; counts the calls (never armed)
  ArenaOptions options;
  std::size_t page = 0;
  std::size_t large_page = 0;       // 0: no large pages
  std::size_t slots_per_large = 0;  // L; 0: no large pages
  std::size_t small_max = 0;
  std::vector<std::size_t> size_classes;
  ChunkProperties props;
  std::vector<AccessGrant> grants;
  std::unique_ptr<StreamOrder> order;

  AddressRange range;                                   // freed last: everything below maps into it
  std::vector<PhysicalChunk> pool;                      // small pages created and not mapped
  std::vector<PhysicalChunk> large_pool;                // large pages created and not mapped
  std::unordered_map<std::size_t, MappedPage> mapped;  // first slot of a page → the page mapped there
  std::size_t mapped_bytes = 0;                         // sum of the mapped pages' sizes
  ExtentSet unmapped;                                   // slots with nothing mapped, not in use
  std::vector<std::unique_ptr<StreamState>> streams;    // every stream seen (few: a linear search)
  std::unordered_map<Address, LiveSpan> live_spans;     // allocations of whole pages, by address
  std::unordered_map<std::size_t, Slab> slabs;          // slab pages by slot

  ArenaStats counters;  // bytes_requested, allocations, bytes_reserved, cross_stream_reuses, reclaims
  mutable std::mutex lock;
};

Arena::State::State(Backend& user_backend, ArenaOptions opts) : calls(user_backend), options(std::move(opts)) {
  props = ChunkProperties{.device = options.device, .compression = options.compression != Compression::none};
  std::size_t const granularity = calls.granularity(props, GranularityKind::minimum);
  page = options.page_bytes == 0 ? granularity : options.page_bytes;
  if (page % granularity != 0) {
    throw_invalid_argument("Arena", "page_bytes " + std::to_string(options.page_bytes) +
                                        " is not a multiple of the granularity " + std::to_string(granularity));
  }
  if (options.large_page_bytes != 0 && options.large_page_bytes > page) {
    if (options.large_page_bytes % page != 0 || !std::has_single_bit(options.large_page_bytes)) {
      throw_invalid_argument("Arena", "large_page_bytes " + std::to_string(options.large_page_bytes) +
                                          " is not a power of two multiple of the page size " + std::to_string(page));
    }
    large_page = options.large_page_bytes;
    slots_per_large = large_page / page;
  }
  small_max = page / 2 >= min_block_bytes ? page / 2 : 0;
  size_classes = make_size_classes(small_max);
  grants = options.access.empty() ? std::vector<AccessGrant>{{options.device, Access::read_write}} : options.access;

  std::size_t space = options.address_space_bytes;
  if (space == 0) space = 2 * calls.memory_info(options.device).total;
  std::size_t const alignment = large_page != 0 ? large_page : page;
  space = std::max(round_up(space, alignment), alignment);
  order = detail::make_stream_order(calls.space(), options.device);
  range = AddressRange(calls, space, alignment);
  unmapped.insert(0, space / page);
  set_current(counters.bytes_reserved, space);
}

Arena::State::~State() {
  try {
    wait_for_all_streams();
  } catch (...) {  // the driver may be shut down at process exit: nothing left to wait for
  }
  slabs.clear();
  mapped.clear();  // unmaps, then releases
  pool.clear();
  large_pool.clear();
  for (auto& s : streams) order->destroy_marker(s->marker);
}

Arena::State::StreamState& Arena::State::stream_state(Stream stream) {
  for (auto& s : streams) {
    if (s->stream == stream) return *s;
  }
  auto fresh = std::make_unique<StreamState>();
  fresh->stream = stream;
  fresh->free_blocks.resize(size_classes.size());
  fresh->fresh_slabs.resize(size_classes.size());
  streams.reserve(streams.size() + 1);
  fresh->marker = order->create_marker();
  streams.push_back(std::move(fresh));
  return *streams.back();
}

std::optional<std::size_t> Arena::State::size_class_of(std::size_t bytes, std::size_t alignment) const noexcept {
  if (bytes > small_max || alignment > min_block_bytes) return std::nullopt;
  auto const it = std::lower_bound(size_classes.begin(), size_classes.end(), bytes);
  return static_cast<std::size_t>(it - size_classes.begin());
}

void Arena::State::make_stream_wait(StreamState& waiter, StreamState& freer) {
  order->mark(freer.marker, freer.stream);
  order->order_after(waiter.stream, freer.marker);
  ++counters.cross_stream_reuses;
}

void Arena::State::wait_for(StreamState& s) {
  order->mark(s.marker, s.stream);
  order->wait(s.marker);
}

void Arena::State::wait_for_all_streams() {
  for (auto& s : streams) wait_for(*s);
}

// Requests of whole pages ----------------------------------------------------------------------

std::size_t Arena::State::take_pages(std::size_t count, StreamState& s) {
  bool const large = large_layout(count);
  auto const from_cache = [&](StreamState& c) -> std::optional<std::size_t> {
    if (!large) return c.cached.take(count);
    auto const it = c.large_cached.find(count);
    if (it == c.large_cached.end()) return std::nullopt;
    std::size_t const first = it->second;
    c.large_cached.erase(it);
    return first;
  };
  if (auto const first = from_cache(s)) return *first;
  for (auto& other : streams) {
    if (other.get() == &s) continue;
    if (large ? !other->large_cached.contains(count) : other->cached.largest() < count) continue;
    make_stream_wait(s, *other);
    return *from_cache(*other);
  }
  return map_new_span(count, s);
}

/// Adds one page of `bytes` to `out` unless the byte limit or the device refuses.
bool Arena::State::create_page(std::size_t bytes, std::size_t held_in_out, std::vector<PhysicalChunk>& out) {
  if (options.byte_limit != 0 && physical_bytes() + held_in_out + bytes > options.byte_limit) return false;
  PhysicalChunk created;
  try {
    created = PhysicalChunk(calls, bytes, props);
  } catch (const OutOfMemory&) {
    return false;
  }
  check_compression(created, options.compression);  // Unsupported: released as it unwinds
  out.push_back(std::move(created));
  return true;
}

/// Moves up to `count` large pages into `out`: pooled ones, then ones unmapped from `s`'s cached
/// large-layout spans (after waiting for `s`'s queued work), then new ones. Returns how many; the
/// caller backs the rest with small pages.
std::size_t Arena::State::gather_large(std::size_t count, StreamState& s, std::vector<PhysicalChunk>& out) {
  std::size_t got = take_pooled(large_pool, count, out);
  if (got < count && !s.large_cached.empty()) {
    wait_for(s);
    unmap_large_cached(s);
    got += take_pooled(large_pool, count - got, out);
  }
  // Pooled small pages are idle memory: give them back before asking the device for more.
  release_pooled(pool, (count - got) * large_page);
  for (; got < count && create_page(large_page, out.size() * large_page, out); ++got) {
  }
  return got;
}

/// Moves `count` small pages into `out`: pooled ones, then ones unmapped from `s`'s cached memory
/// (after waiting for `s`'s queued work: unmapping does not wait), then new ones; when the device
/// or the byte limit refuses, waits for every stream, unmaps all cached memory and empty slabs,
/// releases pooled large pages, and tries again. `out` may hold large pages gathered already.
void Arena::State::gather_small(std::size_t count, StreamState& s, std::vector<PhysicalChunk>& out) {
  std::size_t const large_held = out.size() * large_page;  // `out` holds only large pages so far
  std::size_t got = 0;
  auto const from_pool = [&] { got += take_pooled(pool, count - got, out); };
  auto const create = [&] {
    for (; got < count && create_page(page, large_held + got * page, out); ++got) {
    }
  };
  from_pool();
  if (got < count && !(s.cached.empty() && s.large_cached.empty())) {
    wait_for(s);
    unmap_cached(s, count - got);
    from_pool();
  }
  // Pooled large pages are idle memory: give them back before asking the device for more.
  if (got < count) release_pooled(large_pool, (count - got) * page);
  create();
  if (got < count) {
    wait_for_all_streams();
    unmap_empty_slabs();
    unmap_all_cached();
    large_pool.clear();  // released: the device needs the room for small pages
    from_pool();
    create();
  }
  if (got < count) {
    std::size_t const held = physical_bytes() + large_held + got * page;
    ErrorDetails d;
    d.call = "Arena::allocate";
    d.context = "no physical memory for " + std::to_string((count - got) * page) + " more bytes on device " +
                std::to_string(options.device) + " after reclaiming every cached page (the arena holds " +
                std::to_string(held) + " bytes" +
                (options.byte_limit != 0 ? ", byte_limit " + std::to_string(options.byte_limit) : std::string()) + ")";
    throw OutOfMemory(std::move(d));
  }
}

std::size_t Arena::State::map_new_span(std::size_t count, StreamState& s) {
  bool const large = large_layout(count);
  auto const take_address = [&] { return large ? unmapped.take_aligned(count, slots_per_large) : unmapped.take(count); };
  std::optional<std::size_t> first = take_address();
  if (!first) {
    // Cached memory holds address space too: give it back and look again.
    wait_for_all_streams();
    unmap_empty_slabs();
    unmap_all_cached();
    first = take_address();
    if (!first) {
      ErrorDetails d;
      d.call = "Arena::allocate";
      d.context = "no free run of " + std::to_string(count * page) + " bytes in the arena's " +
                  std::to_string(range.size()) + " bytes of address space (largest free run " +
                  std::to_string(unmapped.largest() * page) + " bytes); raise ArenaOptions::address_space_bytes";
      throw OutOfMemory(std::move(d));
    }
  }
  struct ReturnAddress {  // gives the slots back unless the mapping commits
    ExtentSet& set;
    std::size_t first, count;
    bool committed = false;
    ~ReturnAddress() {
      if (!committed) set.insert(first, count);
    }
  } address{unmapped, *first, count};

  // Large pages first (at the aligned start), small pages behind them. Until committed, pages go
  // back to their pools on any failure.
  std::vector<PhysicalChunk> pages;
  auto const return_pages = [&] {
    for (auto& p : pages) {
      if (p) (p.size() == page ? pool : large_pool).push_back(std::move(p));
    }
  };
  try {
    std::size_t const large_pages = large ? gather_large(count / slots_per_large, s, pages) : 0;
    gather_small(count - large_pages * slots_per_large, s, pages);
  } catch (...) {
    return_pages();
    throw;
  }
  try {
    std::vector<Mapping> mappings;
    mappings.reserve(pages.size());
    std::size_t offset = *first * page;
    for (auto const& p : pages) {
      mappings.emplace_back(range, offset, p);
      offset += p.size();
    }
    set_access(mappings, grants);
    mapped.reserve(mapped.size() + pages.size());
    std::size_t slot = *first;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      std::size_t const bytes = pages[i].size();
      mapped.emplace(slot, MappedPage{std::move(pages[i]), std::move(mappings[i])});
      mapped_bytes += bytes;
      slot += bytes / page;
    }
  } catch (...) {
    // Whatever was mapped is unmapped (by the local mappings, or here); every page goes back to
    // its pool: the arena's state is as before the call.
    for (std::size_t slot = *first; slot < *first + count; ++slot) {
      if (auto node = mapped.extract(slot); !node.empty()) {
        mapped_bytes -= node.mapped().page.size();
        node.mapped().mapping.reset();
        pages.push_back(std::move(node.mapped().page));
      }
    }
    return_pages();
    throw;
  }
  address.committed = true;
  return *first;
}

/// Moves up to `wanted` pages from the pool `from` into `out`; returns how many.
std::size_t Arena::State::take_pooled(std::vector<PhysicalChunk>& from, std::size_t wanted,
                                      std::vector<PhysicalChunk>& out) {
  std::size_t const moved = std::min(wanted, from.size());
  for (std::size_t i = 0; i < moved; ++i) {
    out.push_back(std::move(from.back()));
    from.pop_back();
  }
  return moved;
}

/// Releases pooled pages from `from` until `bytes` are given back or it is empty, so that
/// memory idle in pages of one size does not stay held while pages of the other size are created.
void Arena::State::release_pooled(std::vector<PhysicalChunk>& from, std::size_t bytes) {
  for (std::size_t released = 0; released < bytes && !from.empty(); from.pop_back()) released += from.back().size();
}

/// Unmaps every page in [first, first + count) into its pool and frees the slots.
void Arena::State::unmap_slots(std::size_t first, std::size_t count) {
  for (std::size_t slot = first; slot < first + count;) {
    auto node = mapped.extract(slot);
    assert(!node.empty());
    PhysicalChunk& p = node.mapped().page;
    node.mapped().mapping.reset();
    mapped_bytes -= p.size();
    slot += p.size() / page;
    (p.size() == page ? pool : large_pool).push_back(std::move(p));
  }
  unmapped.insert(first, count);
}

/// Unmaps up to `pages_wanted` small pages of `s`'s cached extents, and then its large-layout
/// spans while more are wanted, into the pools; returns how many slots.
std::size_t Arena::State::unmap_cached(StreamState& s, std::size_t pages_wanted) {
  std::size_t done = 0;
  while (done < pages_wanted && !s.cached.empty()) {
    auto const [first, extent_pages] = *s.cached.extents().begin();
    std::size_t const n = std::min(extent_pages, pages_wanted - done);
    s.cached.erase(first, n);
    unmap_slots(first, n);
    done += n;
    ++counters.reclaims;
  }
  while (done < pages_wanted && !s.large_cached.empty()) {
    auto const it = s.large_cached.begin();  // the smallest: its small pages are the most use
    auto const [slots, first] = *it;
    s.large_cached.erase(it);
    unmap_slots(first, slots);
    done += slots;
    ++counters.reclaims;
  }
  return done;
}

/// Unmaps all of `s`'s cached large-layout spans into the pools.
void Arena::State::unmap_large_cached(StreamState& s) {
  for (auto const& [slots, first] : s.large_cached) {
    unmap_slots(first, slots);
    ++counters.reclaims;
  }
  s.large_cached.clear();
}

/// Unmaps every stream's cached memory (callers waited for every stream first).
void Arena::State::unmap_all_cached() {
  for (auto& s : streams) {
    unmap_cached(*s, static_cast<std::size_t>(-1));
    unmap_large_cached(*s);
  }
}

/// Unmaps slabs with no block in use (callers waited for every stream first).
std::size_t Arena::State::unmap_empty_slabs() {
  std::size_t released = 0;
  for (auto it = slabs.begin(); it != slabs.end();) {
    if (it->second.in_use != 0) {
      ++it;
      continue;
    }
    std::size_t const slot = it->first;
    std::size_t const c = it->second.size_class;
    Address const lo = slot_address(slot);
    Address const hi = lo + page;
    for (auto& s : streams) {
      std::erase_if(s->free_blocks[c], [&](Address a) { return a >= lo && a < hi; });
      std::erase(s->fresh_slabs[c], slot);
    }
    it = slabs.erase(it);
    unmap_slots(slot, 1);
    ++released;
  }
  return released;
}

// Small requests -------------------------------------------------------------------------------

Address Arena::State::allocate_small(std::size_t c, StreamState& s) {
  auto const hand_out = [&](Address a, Slab& slab) {
    std::size_t const block = (a - slot_address((a - range.base()) / page)) / slab.block_bytes;
    slab.allocated[block] = true;
    ++slab.in_use;
    return a;
  };
  auto const pop_free = [&] {
    Address const a = s.free_blocks[c].back();
    s.free_blocks[c].pop_back();
    return hand_out(a, slabs.at((a - range.base()) / page));
  };
  auto const fresh_block = [&] {
    std::size_t const slot = s.fresh_slabs[c].back();
    Slab& slab = slabs.at(slot);
    Address const a = slot_address(slot) + slab.handed_out * slab.block_bytes;
    if (++slab.handed_out == slab.blocks) s.fresh_slabs[c].pop_back();
    return hand_out(a, slab);
  };
  // 1. freed on this stream; 2. never used, in a slab this stream opened
  if (!s.free_blocks[c].empty()) return pop_free();
  if (!s.fresh_slabs[c].empty()) return fresh_block();
  // 3. freed on another stream: this stream waits for that one on the device
  for (auto& other : streams) {
    if (other.get() == &s || other->free_blocks[c].empty()) continue;
    make_stream_wait(s, *other);
    s.free_blocks[c].swap(other->free_blocks[c]);
    return pop_free();
  }
  // 4. a new slab of one page
  std::size_t const block_bytes = size_classes[c];
  std::size_t const blocks = page / block_bytes;
  Slab slab{c, block_bytes, blocks, 0, 0, std::vector<bool>(blocks, false)};
  s.fresh_slabs[c].reserve(1);
  std::size_t const slot = take_pages(1, s);
  try {
    slabs.emplace(slot, std::move(slab));
  } catch (...) {
    s.cached.insert(slot, 1);
    throw;
  }
  s.fresh_slabs[c].push_back(slot);
  return fresh_block();
}

void Arena::State::deallocate_small(Address a, std::size_t bytes, StreamState& s) {
  auto const it = slabs.find((a - range.base()) / page);
  if (it == slabs.end()) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(a) + " was not allocated by this arena");
  }
  Slab& slab = it->second;
  std::size_t const offset = a - slot_address(it->first);
  std::size_t const block = offset / slab.block_bytes;
  if (offset % slab.block_bytes != 0 || block >= slab.handed_out || !slab.allocated[block]) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(a) +
                                                    " is not a live allocation of this arena (freed twice?)");
  }
  if (bytes > slab.block_bytes || size_class_of(bytes, min_block_bytes) != slab.size_class) {
    throw_invalid_argument("Arena::deallocate", std::to_string(bytes) + " bytes is not the size that was allocated at " +
                                                    std::to_string(a));
  }
  s.free_blocks[slab.size_class].reserve(s.free_blocks[slab.size_class].size() + 1);
  slab.allocated[block] = false;
  --slab.in_use;
  s.free_blocks[slab.size_class].push_back(a);
}

void Arena::State::update_peaks() noexcept {
  set_current(counters.bytes_mapped, mapped_bytes);
  set_current(counters.bytes_physical, physical_bytes());
}

// The public face ------------------------------------------------------------------------------

Arena::Arena(ArenaOptions options) : Arena(cuda_backend(options.device), std::move(options)) {}

Arena::Arena(Backend& backend, ArenaOptions options) : state_(std::make_unique<State>(backend, std::move(options))) {}

Arena::~Arena() = default;

void* Arena::allocate(std::size_t bytes, Stream stream, std::size_t alignment) {
  State& st = *state_;
  if (alignment == 0 || !std::has_single_bit(alignment) || alignment > st.page) {
    throw_invalid_argument("Arena::allocate", "alignment " + std::to_string(alignment) +
                                                  " is not a power of two up to the page size " + std::to_string(st.page));
  }
  if (bytes == 0) return nullptr;
  if (bytes > st.range.size()) {
    ErrorDetails d;
    d.call = "Arena::allocate";
    d.context = std::to_string(bytes) + " bytes is more than the arena's whole address space (" +
                std::to_string(st.range.size()) + " bytes)";
    throw OutOfMemory(std::move(d));
  }
  std::lock_guard const held(st.lock);
  struct RefreshMappedBytes {  // on success and failure alike: pages may have moved either way
    State& st;
    ~RefreshMappedBytes() { st.update_peaks(); }
  } const refresh{st};
  State::StreamState& s = st.stream_state(stream);
  Address address = 0;
  if (auto const c = st.size_class_of(bytes, alignment)) {
    address = st.allocate_small(*c, s);
  } else {
    std::size_t const pages = st.pages_for(bytes);
    st.live_spans.reserve(st.live_spans.size() + 1);
    std::size_t const first = st.take_pages(pages, s);
    address = st.slot_address(first);
    bool const large = st.large_layout(pages);
    try {
      st.live_spans.emplace(address, State::LiveSpan{first, pages, bytes, large});
    } catch (...) {
      if (large) {
        s.large_cached.emplace(pages, first);
      } else {
        s.cached.insert(first, pages);
      }
      throw;
    }
  }
  bump(st.counters.bytes_requested, bytes);
  bump(st.counters.allocations, 1);
  return reinterpret_cast<void*>(address);
}

void Arena::deallocate(void* p, std::size_t bytes, Stream stream) {
  if (p == nullptr) return;
  State& st = *state_;
  auto const address = reinterpret_cast<Address>(p);
  if (address < st.range.base() || address >= st.range.end()) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(address) + " is outside the arena");
  }
  std::lock_guard const held(st.lock);
  State::StreamState& s = st.stream_state(stream);
  if (auto const span = st.live_spans.find(address); span != st.live_spans.end()) {
    if (span->second.bytes != bytes) {
      throw_invalid_argument("Arena::deallocate", std::to_string(bytes) + " bytes is not the size allocated at " +
                                                      std::to_string(address) + " (" +
                                                      std::to_string(span->second.bytes) + ")");
    }
    if (span->second.large_layout) {
      s.large_cached.emplace(span->second.pages, span->second.first);
    } else {
      s.cached.insert(span->second.first, span->second.pages);
    }
    st.live_spans.erase(span);
  } else {
    st.deallocate_small(address, bytes, s);
  }
  st.counters.bytes_requested.current -= bytes;
  st.counters.allocations.current -= 1;
}

std::size_t Arena::trim() {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  st.wait_for_all_streams();
  st.unmap_empty_slabs();
  st.unmap_all_cached();
  std::size_t const released = st.pool.size() * st.page + st.large_pool.size() * st.large_page;
  st.pool.clear();
  st.large_pool.clear();
  st.update_peaks();
  return released;
}

void Arena::release_stream(Stream stream) {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  auto const known = [&] {
    return std::find_if(st.streams.begin(), st.streams.end(), [&](auto const& s) { return s->stream == stream; });
  };
  if (known() == st.streams.end()) return;
  // The default stream never goes away; what other streams leave behind goes to it.
  State::StreamState& heir = st.stream_state(nullptr);
  auto const it = known();
  State::StreamState& gone = **it;
  st.wait_for(gone);
  // Its work is done, so what it freed is safe for any stream: cached extents are unmapped (any
  // stream may stitch their pages), free blocks and open slabs pass to the heir.
  st.unmap_cached(gone, static_cast<std::size_t>(-1));
  st.unmap_large_cached(gone);
  if (&gone == &heir) {
    st.update_peaks();
    return;
  }
  for (std::size_t c = 0; c < st.size_classes.size(); ++c) {
    auto& blocks = heir.free_blocks[c];
    blocks.insert(blocks.end(), gone.free_blocks[c].begin(), gone.free_blocks[c].end());
    auto& fresh = heir.fresh_slabs[c];
    fresh.insert(fresh.end(), gone.fresh_slabs[c].begin(), gone.fresh_slabs[c].end());
  }
  st.order->destroy_marker(gone.marker);
  st.streams.erase(it);
  st.update_peaks();
}

ArenaStats Arena::stats() const {
  State const& st = *state_;
  std::lock_guard const held(st.lock);
  ArenaStats s = st.counters;
  s.chunks_created = st.calls.calls(BackendOp::create_chunk);
  s.chunks_released = st.calls.calls(BackendOp::release_chunk);
  s.maps = st.calls.calls(BackendOp::map);
  s.unmaps = st.calls.calls(BackendOp::unmap);
  s.access_calls = st.calls.calls(BackendOp::set_access);
  std::size_t cached_pages = 0;
  std::size_t largest = 0;
  for (auto const& stream : st.streams) {
    cached_pages += stream->cached.pages();
    largest = std::max(largest, stream->cached.largest());
  }
  s.fragmentation = cached_pages == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(cached_pages);
  return s;
}

Backend& Arena::backend() const noexcept { return state_->calls.inner(); }
int Arena::device() const noexcept { return state_->options.device; }
std::size_t Arena::page_bytes() const noexcept { return state_->page; }
std::size_t Arena::large_page_bytes() const noexcept { return state_->large_page; }
std::size_t Arena::small_max_bytes() const noexcept { return state_->small_max; }
std::size_t Arena::address_space_bytes() const noexcept { return state_->range.size(); }

}  // namespace cuvmm
