// cuvmm/arena.hpp: a fragmentation-tolerant, stream-ordered allocator over one address range.
//
// The Arena reserves one large address range once and keeps a pool of physical pages (chunks of
// `page_bytes`, the granularity by default). Because addresses and pages are separate, a large
// allocation is backed by any free pages, wherever they came from ("stitching"): free memory
// never becomes unusable because it is scattered, which is what makes caching allocators fail
// with "out of memory" while plenty is free. Large requests get large pages (32 MiB) for their
// bulk, which scattered-access kernels need for speed. Small requests come from size-class slabs
// (one page each, split into equal blocks). Freed memory stays mapped ("cached") for fast reuse until it is
// needed elsewhere, trimmed, or the device runs out; then its pages are reused at other addresses. A cached
// run serves any request of its layout up to its size (the rest stays cached) and grows in place where the
// addresses next to it are free (new runs are placed with 2 GiB of free addresses behind them while
// the address space allows), so pages move between addresses only when nothing cached is close to
// the request (ArenaStats::pages_moved counts them). A page that moves keeps its old
// mapping until those addresses are needed, the page is released, or trim() (ArenaStats::bytes_stale):
// a move costs a map and an access grant, not also an unmap, and no host wait: work the freeing
// stream queued may still use the old addresses, so an event recorded there at the move is waited
// for before they are unmapped (ArenaStats::host_waits), and another stream that takes the page
// waits for it on the device.
//
// Stream contract (as for cudaFreeAsync): memory freed on a stream can be reused at once by work
// ordered after that point on the same stream. Another stream gets it only after the arena made
// that stream wait, on the device, for an event recorded on the freeing stream; before unmapping
// it, the arena waits on the host for that event. It never synchronizes the whole device. Work on
// other streams that still uses memory being freed is the caller's to order, as with cudaFreeAsync.
// A stream that freed memory into the arena must outlive that memory's reuse: call
// release_stream(s) before destroying s. While a stream captures a CUDA graph, no event can be
// recorded on it: what it freed is not handed to other streams, nor unmapped, until the capture
// ends (an allocation that would have to wait for it throws cuvmm::Unsupported instead). Nor may it
// wait for an event recorded outside its capture: memory another stream freed reaches it after a
// host wait for that stream's event (ArenaStats::host_waits), none when that work is done.
//
// Thread-safe. Each stream has a front: small blocks it freed, reused by its next requests of the
// same size class under that front's own lock; everything else takes the arena's one lock (the
// driver is called only when cached memory cannot serve a request). Threads on their own streams
// thus share no lock on the cached path. What fronts hold counts as cached (ArenaStats), serves
// only its stream, and is given back before any request would map pages anew, by trim() and by
// release_stream().
// Every operation costs O(log n) or amortized O(1) in the live allocations and streams, except
// trim() and the reclaim a request makes when the device is out of memory (they visit everything).
//
// Alignment: allocations are aligned to 256 bytes, or to `alignment` (a power of two up to the
// page size). A request of up to small_max_bytes() (page_bytes / 2) with an alignment up to
// small_max_bytes() is served from a slab whose block size is the smallest class that holds it and
// is a multiple of the alignment (so allocate(1, s, 4096) takes a 4 KiB block, not a page); larger
// requests, or larger alignments, take whole pages (page-aligned).
//
// A failed allocate() gives back every page it created for itself: the arena then holds no more
// physical memory than before the call (it may hold less: cached pages may have been unmapped into
// its pool, and idle pooled pages released).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include <cuvmm/backend.hpp>
#include <cuvmm/growth_observer.hpp>
#include <cuvmm/types.hpp>

namespace cuvmm {

/// ArenaOptions::address_space_bytes when 0: this many times the device's memory.
inline constexpr std::size_t default_address_space_factor = 8;
/// ArenaOptions::max_lent_bytes when 0: the device's memory (or byte_limit) divided by this.
inline constexpr std::size_t default_max_lent_share = 20;

struct ArenaOptions {
  /// The device whose memory the pages are (CUDA backend) and who gets access by default.
  int device = 0;
  /// Address space reserved once. 0: default_address_space_factor (8) times the device's memory
  /// (~1.1 TiB on an H200). Address space is cheap (about 128 TiB per process); a request needs a
  /// free run of addresses as large as itself, pages moved elsewhere keep their old addresses
  /// mapped (ArenaStats::bytes_stale) until a request needs them, and new runs are spaced apart
  /// (2 GiB of free addresses behind each, for it to grow into) only while a free run of the
  /// device's size (or byte_limit) is kept: so more room means fewer unmaps and fewer pages moved.
  /// With less than the device's memory, runs are packed.
  std::size_t address_space_bytes = 0;
  /// Size of one physical page, a multiple of the granularity. 0: the granularity (2 MiB on the
  /// H200). Small requests (up to page_bytes / 2) share pages as slabs of equal blocks; larger ones
  /// take whole pages.
  std::size_t page_bytes = 0;
  /// Requests of at least this size are backed by pages this large, at addresses aligned to it,
  /// with page_bytes pages for the remainder (so no more than one small page is wasted). Memory
  /// stitched from 2 MiB pages is slow for scattered access on the H200 (thrust::sort 1.5x slower
  /// than on memory from cudaMalloc); 32 MiB pages are not. A power of two and a multiple of
  /// page_bytes; 0 turns large pages off. When the device cannot give one, small pages are used.
  std::size_t large_page_bytes = std::size_t{32} << 20;
  /// Requests of large_page_bytes or more take whole large pages (no small pages behind them), and
  /// what the last one holds beyond the request is lent to later requests of whole small pages on
  /// the same stream while the request lives. Freed memory then stays in runs of whole large
  /// pages that later large requests reuse as they lie, so far fewer pages move between addresses
  /// (ArenaStats::pages_moved). On by default: on cuvmm-plan's traces, replayed on a bookkeeping
  /// backend of the H200's size (`unit_arena_trace "[.profile]"`), it moves 2.7x fewer pages and
  /// makes about 4x fewer maps and unmaps than with it off, at a lower utilization (0.89 instead of 0.94
  /// on the quick trace, 0.91 instead of 0.98 on the full one), as lent tails are not all
  /// borrowed; `bench_arena --benchmark_filter=trace/` times both beside cudaMallocAsync. Off: a
  /// large request takes large pages then small ones, for programs that prefer memory over time.
  /// When the device cannot give the whole last large page, the request is served without it.
  bool share_large_page_tails = true;
  /// Most bytes lent (ArenaStats::bytes_lent) that lending more may bring: a large request whose
  /// tail would pass it is served as with share_large_page_tails off (large pages, then small
  /// ones), and no cached large page is lent to small requests past it. Lent slots of a large page
  /// that a live allocation uses cannot be given back to the device (they still serve requests of
  /// whole small pages on any stream before one fails), so this bounds the memory a large request
  /// may find missing. An owner freed before the borrowers of its last large page adds its part of
  /// that page to the lent slots, which may then pass the bound until the borrowers are freed.
  /// 0: default_max_lent_share (1/20) of the device's memory (or of byte_limit when that is
  /// smaller). Lower trades time for utilization: docs/DESIGN.md ("Arena: what it may lose, and
  /// the frontier it trades along") shows the measured trade and the benchmark that measures it.
  std::size_t max_lent_bytes = 0;
  /// Most bytes one large request may lend of its last large page: when the rest of that page
  /// behind the request is larger, the request is served as with share_large_page_tails off (large
  /// pages, then small ones). Lent tails of live requests are what keeps a later large request
  /// from the device's whole free memory; bounding each tail to half a large page keeps most of
  /// lending's fewer page moves: docs/DESIGN.md (the same section) shows the trade. The default,
  /// 16 MiB (half the default large page), is the largest bound that keeps the largest request
  /// after PyTorch's random traces and cuvmm-plan's at 0.985 of the memory free; it costs those
  /// traces time (about 1.8x the driver time of whole tails). 0: no bound but max_lent_bytes.
  /// Rounded down to whole pages.
  std::size_t max_lent_tail_bytes = 16 << 20;
  /// Most physical bytes the arena may hold at once. 0: as much as the device gives.
  std::size_t byte_limit = 0;
  /// Generic compression on every page: none, preferred (ordinary memory where the device does
  /// not grant it), or required (a page that is not granted compression is refused with
  /// cuvmm::Unsupported, and the request with it).
  Compression compression = Compression::none;
  /// Handle types every page must be exportable as (POSIX fd, fabric), as NCCL's own VMM memory asks.
  HandleType shareable = HandleType::none;
  /// Pages usable by GPUDirect RDMA (ChunkProperties::gpu_direct_rdma): for memory a NIC registers.
  /// Refused with cuvmm::Unsupported where the device does not report RDMA support for VMM memory.
  bool gpu_direct_rdma = false;
  /// Who may access the memory. Empty: read-write for `device`.
  std::vector<AccessGrant> access{};
  /// Largest allocation of whole small pages that a stream's front keeps for that stream's next
  /// requests without the arena's lock (small blocks always are, up to 64 MiB a stream). Larger
  /// fronts keep more threads off the arena's lock (`bench_arena --benchmark_filter=threads/`) but
  /// park runs that would otherwise merge in the stream caches, which lowers utilization a little
  /// on cuvmm-plan's traces: docs/DESIGN.md ("Arena: throughput under threads") shows both. Rounded
  /// down to whole pages, and below a large page. The default, 8 MiB, keeps the requests of up to
  /// four 2 MiB pages off the lock. 0: runs of pages are never parked.
  std::size_t stream_cache_run_bytes = 8 << 20;
  /// Most memory the arena may hold idle (mapped or pooled, beyond the bytes live), in percent of
  /// the bytes live, and still create pages for a request that nothing cached serves as it lies.
  /// Past it, such a request moves pages of its stream's cache to new addresses instead. A page
  /// created costs about what a page moved does (a map and an access grant), but the cached runs
  /// left in place serve later requests with no driver call at all, so a larger share is faster
  /// and lowers the utilization (peak live / peak held): docs/DESIGN.md ("Arena: what it may
  /// lose, and the frontier it trades along") shows the trade. Idle memory is given back whatever
  /// the share when the device runs short: a request fails only once every idle page is gone.
  /// The default, 20, is the smallest of the shares timed (0, 5, 20, 50, 100) that replayed
  /// cuvmm-plan's and PyTorch's random traces in about cudaMallocAsync's time or less (`bench_arena
  /// --benchmark_filter=trace/arena_max_idle`, with CUVMM_TRACE_FILE for the random ones:
  /// 0.57-0.85x on an H100), at a utilization of 0.84-0.89 (time comes before utilization:
  /// docs/DESIGN.md); 5 keeps it at 0.95 or more for 1.0-1.6x the time, 0 moves pages whenever
  /// the stream's cache has any (the most memory-frugal).
  std::size_t max_idle_percent = 20;
  /// Past max_idle_percent, a request that would create pages first releases pooled pages of the
  /// other page size even where the work that used them at their old addresses is still queued,
  /// waiting on the host for that work (ArenaStats::host_waits). Without it such pages stay pooled
  /// until their fence is done and new pages are created beside them, so a program that queues its
  /// work far ahead of the device (a training loop) holds both for a while. The wait drains the
  /// device's queue, so this trades time for memory: docs/DESIGN.md ("Arena: what it may lose, and
  /// the frontier it trades along") shows what it gives with max_idle_percent 5 on a decoder's
  /// training. Off by default.
  bool wait_before_create = false;
  /// Requests of at least this many bytes (beyond small_max_bytes(), with an alignment up to the
  /// page size) each get one physical chunk of their own, their size rounded up to whole pages,
  /// mapped once. Freed, the chunk stays mapped where it is, idle (ArenaStats::bytes_whole_idle),
  /// and serves a later request of its size or up to a sixteenth smaller as it lies, with no driver
  /// call; a request that no idle chunk fits creates a new one (one create, one map, one access
  /// grant, whatever its size, where pages would cost those per page). Idle chunks are given back
  /// when the device runs short (the smallest that makes room for the request, else the largest
  /// first), by trim() and when any other request would fail, so a request still fails only
  /// once nothing idle is left; until then they are held however many there are, which lowers the
  /// utilization (peak live / peak held). Chunks are never stitched or moved. 0: off (large
  /// requests take pages). Measured against the defaults (`bench_arena
  /// --benchmark_filter=trace/arena_whole_chunks`, docs/DESIGN.md): faster where the device keeps
  /// room for the idle chunks, up to 3x slower once they fill it and each new size releases one and
  /// creates another, at about half the utilization; for programs that allocate a small share of
  /// the device in a few recurring sizes.
  std::size_t whole_chunk_bytes = 0;
};

/// The name of the environment variable that cuvmm's PyTorch plug-ins read their arenas' options
/// from (parse_arena_options' format), like PyTorch's PYTORCH_CUDA_ALLOC_CONF.
inline constexpr const char* arena_conf_variable = "CUVMM_ARENA_CONF";

/// `base` with the options that `text` sets: comma-separated `key:value` pairs whose keys are the
/// fields of ArenaOptions that a text can set, e.g. "large_page_bytes:128MiB,byte_limit:64GiB".
///  - sizes (address_space_bytes, page_bytes, large_page_bytes, max_lent_bytes,
///    max_lent_tail_bytes, byte_limit, stream_cache_run_bytes, whole_chunk_bytes): a whole number of
///    bytes, or one followed by KiB, MiB, GiB or TiB;
///  - max_idle_percent: a whole number;
///  - share_large_page_tails, wait_before_create: true, false, 1 or 0;
///  - compression: none, preferred or required.
/// Spaces around keys and values, and empty pairs (",,", a trailing comma), are ignored: an empty
/// text changes nothing.
/// Throws cuvmm::Error (ErrorCode::invalid_argument) naming the text and the offending pair for an
/// unknown key, a key given twice, a pair without ':', or a value that is not of its kind or does
/// not fit in 64 bits; `base` is not changed then. The values themselves (a large page that is not
/// a power of two, ...) are checked when an Arena is made from them, as for any ArenaOptions.
ArenaOptions parse_arena_options(std::string_view text, ArenaOptions base = {});

/// A statistic as {current, peak, total}: total adds up every increase ever made.
struct ArenaCounter {
  std::size_t current = 0;
  std::size_t peak = 0;
  std::size_t total = 0;
};

/// The physical side of ArenaStats, cheap enough to read at every allocation (Arena::physical()).
struct ArenaPhysical {
  std::size_t bytes = 0;            ///< ArenaStats::bytes_physical.current
  std::size_t chunks_created = 0;   ///< ArenaStats::chunks_created
  std::size_t chunks_released = 0;  ///< ArenaStats::chunks_released
};

/// The physical bytes by what holds them at one moment (ArenaStats' bytes_live ... bytes_pooled,
/// which add up to the bytes held then), with the bytes live as asked for.
struct ArenaHeld {
  std::size_t bytes_requested = 0;  ///< live allocations, in the bytes asked for
  std::size_t bytes_live = 0;
  std::size_t bytes_pinned = 0;
  std::size_t bytes_lent = 0;
  std::size_t bytes_cached = 0;
  std::size_t bytes_pooled = 0;
};

struct ArenaStats {
  /// Live allocations, in the bytes asked for. The peak is exact when one stream allocates (or
  /// each stream reuses what it frees before another allocates); with several streams it may
  /// exceed the true peak by the bytes other streams freed through their fronts and have not
  /// allocated again since they last took the arena's lock, as threads do not meet on one counter.
  ArenaCounter bytes_requested;
  ArenaCounter allocations;      ///< live allocations, counted (the peak as for bytes_requested)
  ArenaCounter bytes_mapped;     ///< pages mapped: live allocations, slabs and cached free memory
  ArenaCounter bytes_physical;   ///< pages held: mapped plus pooled (unmapped, not yet released)
  ArenaCounter bytes_reserved;   ///< address space
  // Backend (driver) calls made, failed ones included.
  std::size_t chunks_created = 0;
  std::size_t chunks_released = 0;
  std::size_t maps = 0;
  std::size_t unmaps = 0;
  std::size_t access_calls = 0;
  // Time spent in those calls, in seconds (the driver's time, for the CUDA backend): what an
  // allocator call spends beyond them is the Arena's own bookkeeping and its lock. On the H200 a
  // new mapping's access grant is the costliest step (~20-35 us per page,
  // bench/results/h200/driver_calls.csv).
  double create_seconds = 0;   ///< in chunks_created
  double release_seconds = 0;  ///< in chunks_released
  double map_seconds = 0;      ///< in maps
  double unmap_seconds = 0;    ///< in unmaps
  double access_seconds = 0;   ///< in access_calls
  /// Memory freed on one stream handed to another, after a device-side wait (a host wait, counted in
  /// host_waits, when the taker captures a CUDA graph and the freeing stream's work still runs).
  std::size_t cross_stream_reuses = 0;
  /// Host waits for a stream's queued work: before unmapping or releasing memory it freed (a reclaim
  /// of everything, release_stream, a whole chunk given back, the old addresses of moved pages
  /// unmapped, or their pages released, while the work queued before the move still runs),
  /// and before a stream that captures a CUDA graph takes memory it freed while that work still
  /// runs; and the seconds the calling thread spent blocked in them. Where the host runs
  /// ahead of the device (a training loop), the device's queue drains and refills after each.
  std::size_t host_waits = 0;
  double host_wait_seconds = 0;
  /// Allocations served by their stream's front, without the arena's lock (the cached path): of
  /// `allocations.total`, the share that threads on their own streams make without meeting.
  std::size_t front_allocations = 0;
  /// Frees parked in their stream's front without the arena's lock: of a stream's frees, those of an
  /// allocation that stream's front handed out (served from it, or made under the lock and of a kind
  /// a front keeps, while the front records fewer than 4096 of those live), while the front has room.
  std::size_t front_frees = 0;
  std::size_t reclaims = 0;             ///< cached extents (or parts of spans) unmapped to back another request
  /// Pages mapped again at another address after being taken from where they were (stitching,
  /// remapping): each costs a map and an access grant at the new address (~30 us per page on the
  /// H200, `bench_driver_calls --benchmark_filter=driver_calls/`), the unmap at the old one being
  /// deferred (bytes_stale). Pages mapped for the first time after being created are not counted;
  /// `maps` counts both.
  std::size_t pages_moved = 0;
  /// Address space still mapped to pages that no longer back it: a page unmapped from the cache
  /// keeps its old mapping until those addresses are needed, it is released, or trim(), so that
  /// moving it costs a map and a grant but no unmap (an unmap is ~16-23 us per page on the H200,
  /// `bench_driver_calls --benchmark_filter=driver_calls/`). No
  /// physical memory beyond bytes_physical; bytes_mapped + bytes_stale is what the driver has mapped.
  std::size_t bytes_stale = 0;
  std::size_t streams = 0;              ///< streams the arena keeps state for (see release_stream)
  // Where the physical bytes are now: bytes_live + bytes_pinned + bytes_lent + bytes_cached +
  // bytes_pooled == bytes_physical.current.
  /// Backing live allocations: the whole pages of those that take pages, and the blocks (of their
  /// size class) of those served from slabs.
  std::size_t bytes_live = 0;
  /// Free blocks in slab pages that hold at least one live block: idle memory that cannot be given
  /// back while those blocks live (the one loss to fragmentation the arena allows; a slab page is
  /// page_bytes, so at most page_bytes per live small allocation, and far less in practice).
  std::size_t bytes_pinned = 0;
  /// Free slots of large pages that live allocations still use (shared tails, borrowed large
  /// pages): mapped, served to small-page requests, not given back while the large page is used.
  /// Bounded as ArenaOptions::max_lent_bytes says.
  std::size_t bytes_lent = 0;
  /// Mapped and free, given back on demand: cached runs of pages and slab pages with no live block
  /// (blocks and runs that streams' fronts keep count as freed ones: here, or pinned beside a live block).
  std::size_t bytes_cached = 0;
  /// Unmapped pages kept for reuse, given back on demand (trim(), or when the device is full).
  std::size_t bytes_pooled = 0;
  /// Where the physical bytes were the first time bytes_physical reached its peak (their sum is
  /// bytes_physical.peak): what the arena held beyond the bytes live at the moment that sets its
  /// utilization, peak live / peak held. Blocks and runs that streams' fronts park count as live
  /// here (stats() alone reads the fronts, under their locks).
  ArenaHeld at_physical_peak;
  /// Of bytes_cached: idle whole chunks (ArenaOptions::whole_chunk_bytes), mapped where they were
  /// freed, given back on demand.
  std::size_t bytes_whole_idle = 0;
  /// Requests served by an idle whole chunk as it lay (no driver call), and whole chunks created
  /// and given back, ever.
  std::size_t whole_chunk_reuses = 0;
  std::size_t whole_chunks_created = 0;
  std::size_t whole_chunks_released = 0;
  /// External fragmentation of the cached free memory: 1 - largest free extent / all free pages
  /// in extents (0 when there is none or one). Stitching makes it harmless: scattered pages still
  /// back any request; it measures how often that has to remap.
  double fragmentation = 0;
};

class Arena {
 public:
  static constexpr std::size_t default_alignment = 256;

  /// An arena of device memory through the CUDA backend of `options.device`.
  explicit Arena(ArenaOptions options = {});
  /// An arena over any backend (HostBackend for host memory, FaultInjectingBackend for tests).
  explicit Arena(Backend& backend, ArenaOptions options = {});
  /// Waits for the streams that freed memory into the arena, then unmaps and releases everything.
  /// Allocations still live are freed with it.
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) = delete;
  Arena& operator=(Arena&&) = delete;

  /// `bytes` of memory usable by work ordered on `stream` from now on. 0 bytes: nullptr.
  /// Throws OutOfMemory when the device (or byte_limit) cannot back it even after every cached
  /// page was reclaimed; cuvmm::Error for an alignment that is not a power of two up to the page
  /// size. On failure nothing is allocated and every page created for the request was released
  /// (cached pages may have been unmapped into the pool).
  [[nodiscard]] void* allocate(std::size_t bytes, Stream stream = nullptr, std::size_t alignment = default_alignment);
  /// Frees `p`, which allocate(bytes, ...) returned, after the work queued on `stream` so far.
  /// An unknown pointer, a size other than the exact one allocated (even one of the same size
  /// class), or a second free of the same allocation throws cuvmm::Error and changes nothing (nor
  /// does it register `stream`).
  void deallocate(void* p, std::size_t bytes, Stream stream = nullptr);

  /// Waits for every stream that freed memory into the arena, unmaps all cached memory and every
  /// stale mapping, and releases every page not backing a live allocation. Returns the bytes
  /// given back.
  std::size_t trim();
  /// Attaches a growth observer (growth_observer.hpp): told of every page mapped now and of each
  /// page the arena maps later (after the map and access grant, before the allocate() that maps it
  /// returns), and before a page leaves its addresses (unmapped, or moved elsewhere: its old
  /// mapping is then no longer in use). Each report is one page (BackedRange::offset: from the
  /// arena's range). An observer that throws fails that allocate() (the arena holds no more than
  /// before). Observers are called under the arena's lock: they must not call the arena.
  void add_observer(std::shared_ptr<GrowthObserver> observer);
  /// Withdraws every mapped page from `observer` and detaches it; false if it was not attached.
  bool remove_observer(const GrowthObserver& observer) noexcept;
  /// Hands everything `stream` freed to the arena as a whole (waiting for the stream's work on the
  /// host) and forgets the stream. Call it before destroying a stream that freed arena memory.
  void release_stream(Stream stream);

  /// Thread-safe; takes the arena's lock and visits every stream's front, in time that grows with
  /// what the fronts park (tens of microseconds for tens of thousands of blocks).
  [[nodiscard]] ArenaStats stats() const;
  /// The physical memory held and the pages created and released, without the lock: as stats()
  /// gave them when the last allocate(), trim() or release_stream() returned. For a caller that
  /// reads them at every allocation (a PyTorch allocator's reserved bytes).
  [[nodiscard]] ArenaPhysical physical() const noexcept;
  [[nodiscard]] Backend& backend() const noexcept;
  [[nodiscard]] int device() const noexcept;
  [[nodiscard]] std::size_t page_bytes() const noexcept;
  /// Size of the large pages (0: none).
  [[nodiscard]] std::size_t large_page_bytes() const noexcept;
  /// Largest request served from size-class slabs; larger ones take whole pages.
  [[nodiscard]] std::size_t small_max_bytes() const noexcept;
  [[nodiscard]] std::size_t address_space_bytes() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cuvmm
