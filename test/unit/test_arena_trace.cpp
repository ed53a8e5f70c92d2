// The Arena under churn: cuvmm-plan's generated traces replayed on the host backend (the host
// profiles) and on a bookkeeping backend of the H200's size and granularity (the GPU profiles), with
// bounds on utilization, pages moved and driver calls that were measured (each bound is the value
// measured when it was set: a change that moves more pages fails here); and the reuse rules that
// keep pages where they are mapped, each on its own.
//
// `unit_arena_trace "[.profile]"` prints the numbers of every trace (utilization, where the bytes
// held beyond those requested were, pages moved, driver calls, and an estimate of their cost on
// the H200 from docs/H200.md's per-call figures, which `bench_driver_calls` measures).
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/counting_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>

#include "arena_replay.hpp"
#include "trace_csv.hpp"

// Host memory that runs out on demand: while fail_in > 0, the fail_in-th operator new from now
// throws std::bad_alloc (one program-wide replacement; off unless a test sets it).
namespace {
thread_local long fail_in = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  if (fail_in > 0 && --fail_in == 0) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// The replacement delete frees what the replacement new took from malloc; GCC cannot see that
// the two are a pair once it inlines them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace cuvmm;
using cuvmm::test::ArenaReplay;

namespace {

constexpr std::size_t h200_bytes = 140 * GiB;

/// Peak bytes requested over peak bytes held: D2's utilization.
double peak_utilization(const ArenaReplay& r) {
  return static_cast<double>(r.peak_requested) / static_cast<double>(r.peak_physical);
}

/// The largest allocation after the replay over the device's memory less the bytes live at the end.
double largest_after_share(const ArenaReplay& r) {
  return static_cast<double>(r.largest_after) / static_cast<double>(h200_bytes - r.live_at_end);
}

/// Driver time of a replay on the H200 by docs/H200.md's per-call costs for 2 MiB chunks: create 11 us,
/// map 1 us plus ~25 us of access grant per newly mapped handle, unmap 16 us, release 12 us. (A
/// bookkeeping replay prints its backend's estimate instead, by the size of each handle.)
double driver_ms_estimate(const ArenaStats& s) {
  return 1e-3 * (11.0 * static_cast<double>(s.chunks_created) + 26.0 * static_cast<double>(s.maps) +
                 16.0 * static_cast<double>(s.unmaps) + 12.0 * static_cast<double>(s.chunks_released));
}

void print(const char* name, const ArenaReplay& r) {
  std::printf("%-10s utilization %.4f (never-releasing bound %.4f; lost to rounding %.4f, cached %.4f, pooled %.4f)\n"
              "           peak requested %.1f MiB, peak physical %.1f MiB, %zu failed\n"
              "           pages_moved %zu  creates %zu  releases %zu  maps %zu  unmaps %zu  set_access %zu  "
              "reclaims %zu  (~%.0f ms of driver calls on an H200)\n",
              name, r.mean_utilization, r.never_releasing_bound, r.rounding_loss, r.cached_loss, r.pooled_loss,
              static_cast<double>(r.peak_requested) / MiB, static_cast<double>(r.peak_physical) / MiB, r.failed,
              r.stats.pages_moved, r.stats.chunks_created, r.stats.chunks_released, r.stats.maps, r.stats.unmaps,
              r.stats.access_calls, r.stats.reclaims, r.h200_driver_ms != 0 ? r.h200_driver_ms : driver_ms_estimate(r.stats));
  std::printf("           peak requested / peak physical %.4f\n", peak_utilization(r));
}

ArenaReplay replay_on_host(const std::vector<plan::TraceOp>& ops) {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});  // cuvmm-plan's simulated device
  Arena arena(backend);
  return test::replay(arena, ops);
}

/// With `share_tails`, every tail is lent whole (max_lent_tail_bytes 0); `tail_bound` bounds them.
/// Pages move before any is created (max_idle_percent 0): the reuse ladder alone, as the bounds of
/// the tests below were measured; the defaults' own bounds have their own test.
ArenaReplay replay_on_h200_bookkeeping(const std::vector<plan::TraceOp>& ops, std::size_t large_page_bytes = 32 * MiB,
                                       bool share_tails = false, std::size_t tail_bound = 0) {
  test::BookkeepingBackend backend(h200_bytes);
  Arena arena(backend, {.large_page_bytes = large_page_bytes,
                        .share_large_page_tails = share_tails,
                        .max_lent_tail_bytes = tail_bound,
                        .max_idle_percent = 0});
  return test::replay(arena, ops, 2000, {}, 0, &backend);
}

/// `ops` replayed on an Arena with `options` over an H200's bookkeeping, the largest allocation
/// after it measured.
ArenaReplay replay_with_options(const std::vector<plan::TraceOp>& ops, const ArenaOptions& options) {
  test::BookkeepingBackend backend(h200_bytes);
  Arena arena(backend, options);
  return test::replay(arena, ops, 2000, {}, h200_bytes, &backend);
}


}  // namespace

TEST_CASE("profile: cuvmm-plan's traces on the Arena (prints the numbers)", "[.profile]") {
  print("host quick", replay_on_host(test::host_quick_trace()));
  print("host full", replay_on_host(test::host_full_trace()));
  std::printf("with ArenaOptions::share_large_page_tails off:\n");
  print("gpu quick", replay_on_h200_bookkeeping(test::gpu_quick_trace()));
  print("gpu full", replay_on_h200_bookkeeping(test::gpu_full_trace()));
  std::printf("with ArenaOptions::share_large_page_tails (the default):\n");
  print("gpu quick", replay_on_h200_bookkeeping(test::gpu_quick_trace(), 32 * MiB, true));
  print("gpu full", replay_on_h200_bookkeeping(test::gpu_full_trace(), 32 * MiB, true));
}

TEST_CASE("profile: giving memory back by trim() whenever more than a share of it is idle (prints the numbers)",
          "[.profile_trim]") {
  // What a utilization of 0.98 costs: after each free, trim() whenever the bytes held
  // exceed the rounded live bytes by more than `idle` of them. With shared tails the lent tails of
  // live large pages cannot be given back, which caps the utilization; with small tails it can
  // reach 0.98, for several times the driver calls.
  for (bool const share_tails : {true, false}) {
    for (double const idle : {0.0, 0.2, 0.1, 0.05, 0.02}) {
      std::size_t trims = 0;
      test::AfterFree const trim_when_idle = [&](Arena& arena, std::size_t rounded) {
        if (idle == 0.0) return;
        if (static_cast<double>(arena.stats().bytes_physical.current) > (1.0 + idle) * static_cast<double>(rounded)) {
          arena.trim();
          ++trims;
        }
      };
      std::printf("shared tails %s, trim when more than %.2f of the live bytes is idle:\n", share_tails ? "on" : "off", idle);
      for (bool const full : {false, true}) {
        test::BookkeepingBackend backend(h200_bytes);
        Arena arena(backend, {.share_large_page_tails = share_tails});
        trims = 0;
        ArenaReplay const r =
            test::replay(arena, full ? test::gpu_full_trace() : test::gpu_quick_trace(), 2000, trim_when_idle);
        print(full ? "gpu full" : "gpu quick", r);
        std::printf("           trims %zu\n", trims);
      }
    }
  }
}

TEST_CASE("profile: the GPU traces by ArenaOptions::max_lent_bytes (prints the numbers)", "[.profile_lent]") {
  // The frontier that docs/DESIGN.md shows: utilization against driver time as the bound on lent
  // memory falls (a share of the H200's memory; 1.0: no bound; 0: nothing is lent, as with shared
  // tails off but for the large pages a request's remainder may still take).
  for (double const share : {1.0, 0.05, 0.03, 0.02, 0.01, 0.005, 0.0}) {
    std::printf("max_lent_bytes %.3f of the device's memory:\n", share);
    for (bool const full : {false, true}) {
      test::BookkeepingBackend backend(h200_bytes);
      auto const max_lent = std::max<std::size_t>(1, static_cast<std::size_t>(share * static_cast<double>(h200_bytes)));
      Arena arena(backend, {.max_lent_bytes = max_lent, .max_lent_tail_bytes = 0});
      ArenaReplay const r = test::replay(arena, full ? test::gpu_full_trace() : test::gpu_quick_trace(), 2000, {}, h200_bytes);
      print(full ? "gpu full" : "gpu quick", r);
      std::printf("           largest allocation after: %.4f of the device's memory less the live bytes; at the end "
                  "(MiB) live %.0f (requested %.0f), pinned %.0f, lent %.0f, cached %.0f, pooled %.0f\n",
                  static_cast<double>(r.largest_after) / static_cast<double>(h200_bytes - r.live_at_end),
                  static_cast<double>(r.stats.bytes_live) / MiB, static_cast<double>(r.live_at_end) / MiB,
                  static_cast<double>(r.stats.bytes_pinned) / MiB, static_cast<double>(r.stats.bytes_lent) / MiB,
                  static_cast<double>(r.stats.bytes_cached) / MiB, static_cast<double>(r.stats.bytes_pooled) / MiB);
    }
  }
}

TEST_CASE("profile: the GPU traces by large page size (prints the numbers)", "[.profile_large]") {
  std::printf("with ArenaOptions::share_large_page_tails off:\n");
  for (std::size_t const large : {std::size_t{0}, 8 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB}) {
    std::printf("large pages %zu MiB:\n", large / MiB);
    print("gpu quick", replay_on_h200_bookkeeping(test::gpu_quick_trace(), large));
  }
  std::printf("with ArenaOptions::share_large_page_tails (the default):\n");
  for (std::size_t const large : {32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB}) {
    std::printf("large pages %zu MiB:\n", large / MiB);
    print("gpu quick", replay_on_h200_bookkeeping(test::gpu_quick_trace(), large, true));
    print("gpu full", replay_on_h200_bookkeeping(test::gpu_full_trace(), large, true));
  }
}

namespace {

/// A trace file as cuvmm-plan reads it (its CSV, or RMM's log), each request rounded up to `round`
/// bytes (cuvmm_torch asks the Arena for multiples of 512 B).
std::vector<plan::TraceOp> read_rounded_trace(const std::string& path, std::size_t round) {
  std::vector<plan::TraceOp> ops = plan::read_trace_file(path).ops;
  for (auto& op : ops) op.bytes = (op.bytes + round - 1) / round * round;
  return ops;
}

/// The traces CUVMM_PROFILE_TRACES names (comma-separated), by name: plan:quick and plan:full are
/// cuvmm-plan's generated GPU traces (unrounded), anything else a trace file read with
/// cuvmm_torch's 512 B rounding. Empty when the variable is not set.
std::vector<std::pair<std::string, std::vector<plan::TraceOp>>> profile_traces() {
  std::vector<std::pair<std::string, std::vector<plan::TraceOp>>> traces;
  char const* list = std::getenv("CUVMM_PROFILE_TRACES");
  if (list == nullptr) return traces;
  std::string const paths = list;
  for (std::size_t start = 0; start < paths.size();) {
    std::size_t const end = std::min(paths.find(',', start), paths.size());
    std::string path = paths.substr(start, end - start);
    start = end + 1;
    std::vector<plan::TraceOp> ops = path == "plan:quick"  ? test::gpu_quick_trace()
                                     : path == "plan:full" ? test::gpu_full_trace()
                                                           : read_rounded_trace(path, 512);
    traces.emplace_back(std::move(path), std::move(ops));
  }
  return traces;
}

/// The layout a request of `bytes` takes by its size alone under `options` (the Arena's rule for whole-page
/// requests; a request that max_lent_bytes turns to large then small pages is counted by its size).
enum class Layout { slab, small_pages, whole_large_pages, lent_tail, large_then_small, count };

Layout layout_of(std::size_t bytes, const ArenaOptions& options, std::size_t page, std::size_t large) {
  if (bytes <= page / 2) return Layout::slab;
  if (large == 0 || bytes < large) return Layout::small_pages;
  std::size_t const pages_bytes = (bytes + page - 1) / page * page;
  std::size_t const tail = (bytes + large - 1) / large * large - pages_bytes;
  if (tail == 0) return Layout::whole_large_pages;
  bool const lends = options.share_large_page_tails && (options.max_lent_tail_bytes == 0 || tail <= options.max_lent_tail_bytes);
  return lends ? Layout::lent_tail : Layout::large_then_small;
}

/// Per layout (layout_of), the requests of a replay and the pages they moved: which requests the cached runs, as
/// they lie, do not serve. Its record() is a replay's AfterAllocate.
class MovesByLayout {
 public:
  MovesByLayout(const ArenaOptions& options, std::size_t page, std::size_t large)
      : options_(options), page_(page), large_(large) {}

  void record(std::size_t bytes, std::size_t moved) {
    Tally& t = tally_[static_cast<std::size_t>(layout_of(bytes, options_, page_, large_))];
    ++t.requests;
    t.moving += moved != 0 ? 1 : 0;
    t.moved += moved;
  }

  void print() const {
    static constexpr std::array<const char*, static_cast<std::size_t>(Layout::count)> names = {
        "slab blocks", "small pages", "whole large pages", "large pages, tail lent", "large pages, then small ones"};
    std::printf("           pages moved by the layout each request's size gives:");
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::printf("%s %s: %zu of %zu requests moved %zu", i == 0 ? "" : ";", names[i], tally_[i].moving,
                  tally_[i].requests, tally_[i].moved);
    }
    std::printf("\n");
  }

 private:
  struct Tally {
    std::size_t requests = 0;
    std::size_t moving = 0;  // requests that moved pages
    std::size_t moved = 0;   // pages they moved
  };
  ArenaOptions options_;
  std::size_t page_;
  std::size_t large_;
  std::array<Tally, static_cast<std::size_t>(Layout::count)> tally_{};
};

}  // namespace

TEST_CASE("profile: traces from CUVMM_PROFILE_TRACES on an H200's bookkeeping (prints the numbers)", "[.profile_csv]") {
  // CUVMM_PROFILE_TRACES: comma-separated CSV paths (or plan:quick and plan:full, cuvmm-plan's
  // generated GPU traces, unrounded), e.g. the random traces that
  // bench/torch_allocators.py replays through PyTorch (`torch_allocators.py traces --out DIR
  // --free-bytes N`), replayed here with cuvmm_torch's 512 B rounding and its defaults, or the
  // options CUVMM_PROFILE_CONF gives (CUVMM_ARENA_CONF's format).
  auto const traces = profile_traces();
  if (traces.empty()) SKIP("CUVMM_PROFILE_TRACES names no trace");
  char const* conf = std::getenv("CUVMM_PROFILE_CONF");
  ArenaOptions const options = parse_arena_options(conf != nullptr ? conf : "");
  std::printf("options: %s\n", conf != nullptr ? conf : "the defaults");
  for (auto const& [path, ops] : traces) {
    test::BookkeepingBackend backend(h200_bytes);
    Arena arena(backend, options);
    MovesByLayout moves(options, arena.page_bytes(), arena.large_page_bytes());
    ArenaReplay const r = test::replay(arena, ops, 2000, {}, h200_bytes, &backend,
                                       [&](std::size_t bytes, std::size_t moved) { moves.record(bytes, moved); });
    print(path.c_str(), r);
    std::printf("           largest allocation after: %.4f of the device's memory less the live bytes; at the end "
                "(MiB) live %.0f, pinned %.0f, lent %.0f, cached %.0f, pooled %.0f, stale %.0f\n",
                static_cast<double>(r.largest_after) / static_cast<double>(h200_bytes - r.live_at_end),
                static_cast<double>(r.stats.bytes_live) / MiB, static_cast<double>(r.stats.bytes_pinned) / MiB,
                static_cast<double>(r.stats.bytes_lent) / MiB, static_cast<double>(r.stats.bytes_cached) / MiB,
                static_cast<double>(r.stats.bytes_pooled) / MiB, static_cast<double>(r.stats.bytes_stale) / MiB);
    ArenaHeld const& peak = r.stats.at_physical_peak;
    std::printf("           at the peak held (MiB): live %.0f (requested %.0f), pinned %.0f, lent %.0f, cached %.0f, "
                "pooled %.0f\n",
                static_cast<double>(peak.bytes_live) / MiB, static_cast<double>(peak.bytes_requested) / MiB,
                static_cast<double>(peak.bytes_pinned) / MiB, static_cast<double>(peak.bytes_lent) / MiB,
                static_cast<double>(peak.bytes_cached) / MiB, static_cast<double>(peak.bytes_pooled) / MiB);
    std::printf("           chunks created by size:");
    for (auto const& [bytes, count] : r.created_by_size) std::printf(" %zu of %zu MiB", count, bytes / MiB);
    std::printf("\n");
    moves.print();
  }
}

TEST_CASE("profile: requests of 256 MiB and more on an Arena of 32 and 256 MiB pages beside the default one "
          "(prints the numbers)",
          "[.profile_split]") {
  // What larger pages for large requests would save, before the Arena has a third page size: the
  // traces of "[.profile_csv]" (CUVMM_PROFILE_TRACES, same rounding) split by request size between
  // an Arena with the defaults and one whose pages are 32 MiB and large pages 256 MiB, on one
  // bookkeeping device; a request the device cannot serve trims the other Arena and is tried again.
  // "Largest after" is the largest request the second Arena serves once the first is trimmed.
  auto const traces = profile_traces();
  if (traces.empty()) SKIP("CUVMM_PROFILE_TRACES names no trace");
  constexpr std::size_t threshold = 256 * MiB;
  for (std::size_t const idle : {std::size_t{5}, std::size_t{30}, std::size_t{100}}) {
    std::printf("max_idle_percent %zu in both:\n", idle);
    for (auto const& [path, ops] : traces) {
      test::BookkeepingBackend backend(h200_bytes);
      Arena small(backend, {.max_idle_percent = idle});
      Arena big(backend, {.page_bytes = 32 * MiB, .large_page_bytes = 256 * MiB, .max_idle_percent = idle});
      auto const arena_for = [&](std::size_t bytes) -> Arena& { return bytes >= threshold ? big : small; };
      std::unordered_map<std::size_t, std::pair<void*, std::size_t>> live;
      std::size_t requested = 0;
      std::size_t peak_requested = 0;
      std::size_t peak_physical = 0;
      std::size_t failed = 0;
      for (auto const& op : ops) {
        if (op.allocate) {
          Arena& arena = arena_for(op.bytes);
          void* p = nullptr;
          try {
            p = arena.allocate(op.bytes, nullptr);
          } catch (const OutOfMemory&) {
            (&arena == &big ? small : big).trim();
            try {
              p = arena.allocate(op.bytes, nullptr);
            } catch (const OutOfMemory&) {
              ++failed;
              continue;
            }
          }
          live[op.id] = {p, op.bytes};
          requested += op.bytes;
        } else if (auto const it = live.find(op.id); it != live.end()) {
          arena_for(it->second.second).deallocate(it->second.first, it->second.second, nullptr);
          requested -= it->second.second;
          live.erase(it);
        }
        peak_requested = std::max(peak_requested, requested);
        peak_physical = std::max(peak_physical, backend.live_counts().bytes_physical);
      }
      double const driver_ms = backend.h200_driver_ms();
      std::map<std::size_t, std::size_t> const created = backend.created_by_size();
      small.trim();
      std::size_t const largest = test::largest_allocation(big, h200_bytes);
      std::printf("%-22s ~%.0f ms of driver calls on an H200, peak requested / peak physical %.4f, %zu failed, "
                  "largest after %.4f; chunks created:",
                  path.c_str(), driver_ms, static_cast<double>(peak_requested) / static_cast<double>(peak_physical),
                  failed, static_cast<double>(largest) / static_cast<double>(h200_bytes - requested));
      for (auto const& [bytes, count] : created) std::printf(" %zu of %zu MiB", count, bytes / MiB);
      std::printf("\n");
    }
  }
}

// --- the reuse rules, each on its own (host backend, the H200's 2 MiB pages and 32 MiB large pages) ----

namespace {

/// An Arena over a 1 GiB host backend. With `share_tails`, every tail is lent whatever its length
/// (max_lent_tail_bytes 0), so that the tests of lending see whole tails.
struct HostArena {
  explicit HostArena(bool share_tails = false, std::size_t byte_limit = 0, std::size_t address_space = 4 * GiB)
      : arena(backend, {.address_space_bytes = address_space,
                        .share_large_page_tails = share_tails,
                        .max_lent_tail_bytes = 0,
                        .byte_limit = byte_limit}) {}
  HostBackend backend{{.granularity = 2 * MiB, .physical_limit = 1 * GiB}};
  Arena arena;
};

/// Nothing between `before` and `after` reached the driver: no map, unmap or create, no page moved.
void check_no_driver_call(const ArenaStats& before, const ArenaStats& after) {
  CHECK(after.maps == before.maps);
  CHECK(after.unmaps == before.unmaps);
  CHECK(after.chunks_created == before.chunks_created);
  CHECK(after.pages_moved == before.pages_moved);
}

}  // namespace

TEST_CASE("a small request that no cached extent holds takes the small tail of a cached large span, with no driver call",
          "[arena][churn]") {
  HostArena h;
  Arena& arena = h.arena;
  std::size_t const span_bytes = 32 * MiB + 4 * MiB;  // one large page, then two small ones
  void* span = arena.allocate(span_bytes);
  arena.deallocate(span, span_bytes);
  ArenaStats const before = arena.stats();
  void* p = arena.allocate(3 * MiB);  // two small pages, mapped at the span's end
  CHECK(p == static_cast<std::byte*>(span) + 32 * MiB);
  check_no_driver_call(before, arena.stats());
  std::memset(p, 0x5a, 3 * MiB);
  // The large page stays cached: a request of its size takes it as it lies.
  void* q = arena.allocate(32 * MiB);
  CHECK(q == span);
  CHECK(arena.stats().maps == before.maps);
  arena.deallocate(q, 32 * MiB);
  arena.deallocate(p, 3 * MiB);
}

TEST_CASE("a small request with only a cached span of whole large pages borrows its last large page where it is mapped, "
          "with no driver call",
          "[arena][churn]") {
  bool const share_tails = GENERATE(false, true);
  CAPTURE(share_tails);
  HostArena h(share_tails);
  Arena& arena = h.arena;
  void* span = arena.allocate(64 * MiB);  // two large pages
  std::memset(span, 0x11, 64 * MiB);
  arena.deallocate(span, 64 * MiB);
  ArenaStats const before = arena.stats();
  CHECK(before.bytes_physical.current == 64 * MiB);
  void* p = arena.allocate(4 * MiB);  // two small pages' worth: the front of the second large page
  void* q = arena.allocate(6 * MiB);  // and right behind it
  CHECK(p == static_cast<std::byte*>(span) + 32 * MiB);
  CHECK(q == static_cast<std::byte*>(span) + 36 * MiB);
  check_no_driver_call(before, arena.stats());
  CHECK(arena.stats().bytes_physical.current == 64 * MiB);
  std::memset(p, 0x5a, 4 * MiB);
  std::memset(q, 0x6b, 6 * MiB);
  // The first large page stays cached as a span: a request of its size takes it as it lies.
  void* large = arena.allocate(32 * MiB);
  CHECK(large == span);
  check_no_driver_call(before, arena.stats());
  std::memset(large, 0x7c, 32 * MiB);
  CHECK(static_cast<unsigned char*>(p)[4 * MiB - 1] == 0x5a);
  CHECK(static_cast<unsigned char*>(q)[0] == 0x6b);
  arena.deallocate(q, 6 * MiB);
  arena.deallocate(p, 4 * MiB);
  arena.deallocate(large, 32 * MiB);
  // Every slot of the borrowed page is free again on one stream: it is a large page again, and the
  // two join into the span they were, which a request of both takes as it lies.
  void* again = arena.allocate(64 * MiB);
  CHECK(again == span);
  check_no_driver_call(before, arena.stats());
  arena.deallocate(again, 64 * MiB);
}

TEST_CASE("a large request whose small pages a cached span's tail holds takes the span's end, with no driver call",
          "[arena][churn]") {
  HostArena h;
  Arena& arena = h.arena;
  std::size_t const span_bytes = 3 * 32 * MiB + 6 * MiB;  // three large pages, then three small ones
  void* span = arena.allocate(span_bytes);
  arena.deallocate(span, span_bytes);
  ArenaStats const before = arena.stats();
  std::size_t const bytes = 2 * 32 * MiB + 3 * MiB;  // two large pages and two small ones
  void* p = arena.allocate(bytes);
  CHECK(p == static_cast<std::byte*>(span) + 32 * MiB);
  check_no_driver_call(before, arena.stats());
  std::memset(p, 0x5a, bytes);
  // What it left stays cached where it lies: the front large page and the last small page.
  void* front = arena.allocate(32 * MiB);
  void* last = arena.allocate(2 * MiB);
  CHECK(front == span);
  CHECK(last == static_cast<std::byte*>(span) + 3 * 32 * MiB + 4 * MiB);
  CHECK(arena.stats().maps == before.maps);
  for (auto [q, n] : {std::pair{p, bytes}, std::pair{front, 32 * MiB}, std::pair{last, 2 * MiB}}) arena.deallocate(q, n);
}

TEST_CASE("a request stitched from cached spans unmaps only the smallest spans it needs", "[arena][churn]") {
  // 1 GiB of address space, the device's size: no room to space runs apart, so they are packed.
  HostArena h(false, 0, 1 * GiB);
  Arena& arena = h.arena;
  std::size_t const large = 32 * MiB;
  // Three cached one-large-page spans, each with a live allocation right behind it (so none grows
  // in place), then a request of two large pages: two spans are retired (their addresses stay
  // mapped, stale, so no unmap call) and their pages move.
  std::vector<void*> spans;
  std::vector<void*> walls;
  for (int i = 0; i < 3; ++i) {
    spans.push_back(arena.allocate(large));
    walls.push_back(arena.allocate(large));
  }
  for (void* s : spans) arena.deallocate(s, large);
  ArenaStats const before = arena.stats();
  void* p = arena.allocate(2 * large);
  ArenaStats const after = arena.stats();
  CHECK(after.unmaps == before.unmaps);
  CHECK(after.bytes_stale - before.bytes_stale == 2 * large);
  CHECK(after.maps - before.maps == 2);
  CHECK(after.pages_moved - before.pages_moved == 2);
  CHECK(after.chunks_created == before.chunks_created);
  // The third span is still mapped: a one-large-page request takes it with no driver call.
  void* q = arena.allocate(large);
  CHECK(arena.stats().maps == after.maps);
  CHECK(arena.stats().unmaps == after.unmaps);
  arena.deallocate(q, large);
  arena.deallocate(p, 2 * large);
  for (void* w : walls) arena.deallocate(w, large);
}

TEST_CASE("new runs are spaced apart, so a cached run shorter than a request grows in place and no page moves",
          "[arena][churn]") {
  // 8 GiB of address space and 1 GiB of memory: each new run of several pages gets 2 GiB of free
  // addresses behind it while 1 GiB stays free in one piece.
  HostArena h(false, 0, 8 * GiB);
  Arena& arena = h.arena;
  std::size_t const large = 32 * MiB;
  void* a = arena.allocate(2 * large);
  void* wall = arena.allocate(2 * large);  // packed, it would lie right behind `a`
  CHECK(static_cast<std::byte*>(a) - static_cast<std::byte*>(wall) == 2 * GiB + 2 * large);
  std::memset(a, 0x3c, 2 * large);
  arena.deallocate(a, 2 * large);
  ArenaStats const before = arena.stats();
  void* p = arena.allocate(3 * large + 4 * MiB);  // `a`'s two large pages, then one large and two small behind
  ArenaStats const after = arena.stats();
  CHECK(p == a);
  CHECK(after.pages_moved == before.pages_moved);
  CHECK(after.maps - before.maps == 3);
  CHECK(after.chunks_created - before.chunks_created == 3);
  CHECK(after.unmaps == before.unmaps);
  auto const* bytes = static_cast<const unsigned char*>(p);
  CHECK(bytes[0] == 0x3c);  // the cached pages stayed where they were, with their contents
  CHECK(bytes[2 * large - 1] == 0x3c);
  arena.deallocate(p, 3 * large + 4 * MiB);
  arena.deallocate(wall, 2 * large);
  CHECK(arena.trim() == 5 * large + 4 * MiB);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

TEST_CASE("a failure while a cached large span grows in place keeps its large page cached where it is",
          "[arena][churn][failure]") {
  HostBackend host({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  FaultInjectingBackend faulty(host);
  Arena arena(faulty, {.address_space_bytes = 8 * GiB, .share_large_page_tails = false});
  std::size_t const large = 32 * MiB;
  void* p = arena.allocate(large + 4 * MiB);  // one large page, two small ones, free addresses behind
  std::memset(p, 0x3c, large);
  arena.deallocate(p, large + 4 * MiB);
  // Two large pages: the span's small tail is unmapped (and released: the request needs a large
  // page), then the new large page behind it fails to map.
  faulty.fail_nth(1, {BackendOp::map});
  CHECK_THROWS_AS(arena.allocate(2 * large), Error);
  CHECK(faulty.fired());
  faulty.disarm();
  ArenaStats const failed = arena.stats();
  CHECK(failed.bytes_cached == large);
  CHECK(failed.bytes_pooled == 0);
  CHECK(failed.bytes_physical.current == large);
  CHECK(failed.chunks_released == 3);  // the two small pages, then the large page created for the request
  CHECK(host.live_counts().bytes_mapped == large);
  void* q = arena.allocate(large);  // still cached, still mapped, with its contents
  CHECK(q == p);
  CHECK(arena.stats().maps == failed.maps);
  CHECK(static_cast<const unsigned char*>(q)[large - 1] == 0x3c);
  arena.deallocate(q, large);
  CHECK(arena.trim() == large);
  CHECK(host.live_counts().bytes_physical == 0);
}

TEST_CASE("spacing runs apart keeps the device's size of addresses free in one piece", "[arena][churn]") {
  // The H200's size (bookkeeping, no memory behind it) and the default 8x address space: a run
  // spaced apart takes 2 GiB of addresses beyond itself, so 600 of them would leave no free run
  // longer than 2 GiB; spacing stops while 140 GiB stay free in one piece, and a request of
  // 100 GiB still finds its addresses with 37.5 GiB live in 600 runs.
  test::BookkeepingBackend backend(h200_bytes);
  Arena arena(backend);
  std::vector<void*> live;
  for (int i = 0; i < 600; ++i) live.push_back(arena.allocate(64 * MiB));
  void* big = arena.allocate(100 * GiB);
  CHECK(big != nullptr);
  CHECK(arena.stats().pages_moved == 0);
  arena.deallocate(big, 100 * GiB);
  for (void* p : live) arena.deallocate(p, 64 * MiB);
}

// --- cuvmm-plan's traces: measured bounds ---------------------------------------------------------------

TEST_CASE("cuvmm-plan's host traces replay on the host backend within the measured utilization and pages moved",
          "[arena][churn][trace]") {
  ArenaReplay const quick = replay_on_host(test::host_quick_trace());
  CHECK(quick.failed == 0);
  // Runs of pages parked in the stream's front (stream_cache_run_bytes, 8 MiB by default) cost
  // these traces a little: 0.651 and 0.637 with none parked.
  CHECK(quick.mean_utilization >= 0.643);
  CHECK(quick.stats.pages_moved <= 121);
  ArenaReplay const full = replay_on_host(test::host_full_trace());
  CHECK(full.failed == 0);
  CHECK(full.mean_utilization >= 0.631);
  CHECK(full.stats.pages_moved <= 556);
}

TEST_CASE("cuvmm-plan's H200 traces replay on a bookkeeping backend within the measured utilization and pages moved",
          "[arena][churn][trace]") {
  ArenaReplay const quick = replay_on_h200_bookkeeping(test::gpu_quick_trace());
  CHECK(quick.failed == 0);
  CHECK(quick.mean_utilization >= 0.9378);  // 0.938 with no runs parked (as above)
  CHECK(quick.stats.pages_moved <= 2880);
  CHECK(quick.stats.maps + quick.stats.unmaps <= 3987 + 1627);
  ArenaReplay const full = replay_on_h200_bookkeeping(test::gpu_full_trace());
  CHECK(full.failed == 0);
  CHECK(full.mean_utilization >= 0.977);
  CHECK(full.stats.pages_moved <= 13876);
  CHECK(full.stats.maps + full.stats.unmaps <= 26480);  // 18282 + 8057 with no runs parked
}

// --- shared tails (ArenaOptions::share_large_page_tails) ------------------------------------------------

TEST_CASE("with shared tails a large request takes whole large pages and lends the last one's tail to small requests "
          "of its stream, with no driver call",
          "[arena][churn][tails]") {
  HostArena h(true);
  Arena& arena = h.arena;
  void* owner = arena.allocate(32 * MiB + 4 * MiB);
  ArenaStats const made = arena.stats();
  CHECK(reinterpret_cast<std::uintptr_t>(owner) % (32 * MiB) == 0);
  CHECK(made.chunks_created == 2);  // two large pages, no small one
  CHECK(made.maps == 2);
  CHECK(made.bytes_physical.current == 64 * MiB);
  void* borrower = arena.allocate(6 * MiB);  // three small pages' worth of the lent tail
  CHECK(borrower == static_cast<std::byte*>(owner) + 36 * MiB);
  void* second = arena.allocate(22 * MiB);  // the rest of the tail, exactly
  CHECK(second == static_cast<std::byte*>(owner) + 42 * MiB);
  ArenaStats const after = arena.stats();
  CHECK(after.maps == made.maps);
  CHECK(after.chunks_created == made.chunks_created);
  CHECK(after.bytes_physical.current == 64 * MiB);
  std::memset(owner, 1, 36 * MiB);
  std::memset(borrower, 2, 6 * MiB);
  std::memset(second, 3, 22 * MiB);
  CHECK(static_cast<unsigned char*>(owner)[36 * MiB - 1] == 1);
  CHECK(static_cast<unsigned char*>(borrower)[0] == 2);
  void* next = arena.allocate(2 * MiB);  // the tail is all borrowed: a new small page
  CHECK(arena.stats().chunks_created == made.chunks_created + 1);
  arena.deallocate(next, 2 * MiB);
  arena.deallocate(second, 22 * MiB);
  arena.deallocate(borrower, 6 * MiB);
  arena.deallocate(owner, 32 * MiB + 4 * MiB);
}

TEST_CASE("with shared tails a large page whose owner and borrowers are freed on one stream is cached whole and "
          "reused as it lies",
          "[arena][churn][tails]") {
  HostArena h(true);
  Arena& arena = h.arena;
  bool const owner_first = GENERATE(true, false);
  CAPTURE(owner_first);
  void* owner = arena.allocate(32 * MiB + 4 * MiB);
  void* borrower = arena.allocate(6 * MiB);
  if (owner_first) {
    arena.deallocate(owner, 32 * MiB + 4 * MiB);
    arena.deallocate(borrower, 6 * MiB);
  } else {
    arena.deallocate(borrower, 6 * MiB);
    arena.deallocate(owner, 32 * MiB + 4 * MiB);
  }
  ArenaStats const before = arena.stats();
  void* whole = arena.allocate(64 * MiB);  // both large pages, where they are
  CHECK(whole == owner);
  check_no_driver_call(before, arena.stats());
  arena.deallocate(whole, 64 * MiB);
  CHECK(arena.trim() == 64 * MiB);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

TEST_CASE("with shared tails a tail freed on two streams is gathered by trim, which gives every page back",
          "[arena][churn][tails]") {
  HostArena h(true);
  Arena& arena = h.arena;
  auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
  auto* const b = reinterpret_cast<Stream>(std::uintptr_t{128});
  void* owner = arena.allocate(32 * MiB + 4 * MiB, a);
  void* borrower = arena.allocate(6 * MiB, a);
  arena.deallocate(borrower, 6 * MiB, b);  // lent slots of the last large page now on two streams
  arena.deallocate(owner, 32 * MiB + 4 * MiB, a);
  CHECK(arena.stats().bytes_physical.current == 64 * MiB);
  CHECK(arena.trim() == 64 * MiB);
  CHECK(arena.stats().bytes_physical.current == 0);
  CHECK(h.backend.live_counts().bytes_physical == 0);
  CHECK(h.backend.live_counts().mappings == 0);
}

TEST_CASE("with shared tails release_stream hands a stream's lent slots to the default stream", "[arena][churn][tails]") {
  HostArena h(true);
  Arena& arena = h.arena;
  auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
  void* owner = arena.allocate(32 * MiB + 4 * MiB, a);
  void* borrower = arena.allocate(6 * MiB, a);
  arena.deallocate(owner, 32 * MiB + 4 * MiB, a);  // its first large page cached on `a`, its part of the last lent
  arena.release_stream(a);                          // the cached page unmapped; the lent slots to the default stream
  CHECK(arena.stats().streams == 1);
  arena.deallocate(borrower, 6 * MiB);  // on the default stream: the last large page is whole again
  ArenaStats const before = arena.stats();
  void* again = arena.allocate(32 * MiB);
  CHECK(again == static_cast<std::byte*>(owner) + 32 * MiB);
  CHECK(arena.stats().maps == before.maps);
  arena.deallocate(again, 32 * MiB);
  CHECK(arena.trim() == 64 * MiB);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

TEST_CASE("with shared tails a request with no room for its whole last large page is served without it",
          "[arena][churn][tails][failure]") {
  HostArena h(true, 40 * MiB);  // room for one large page and four small ones, not for two large pages
  Arena& arena = h.arena;
  void* p = arena.allocate(32 * MiB + 4 * MiB);
  REQUIRE(p != nullptr);
  CHECK(arena.stats().bytes_physical.current == 36 * MiB);  // one large page, two small ones
  CHECK(h.backend.live_counts().bytes_physical == 36 * MiB);
  std::memset(p, 7, 36 * MiB);
  CHECK_THROWS_AS(arena.allocate(6 * MiB), OutOfMemory);  // no tail was lent: nothing to borrow
  CHECK(h.backend.live_counts().bytes_physical == 36 * MiB);
  arena.deallocate(p, 32 * MiB + 4 * MiB);
  CHECK(arena.trim() == 36 * MiB);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

TEST_CASE("with shared tails cuvmm-plan's H200 traces move far fewer pages, within the measured bounds",
          "[arena][churn][trace][tails]") {
  ArenaReplay const quick = replay_on_h200_bookkeeping(test::gpu_quick_trace(), 32 * MiB, true);
  CHECK(quick.failed == 0);
  CHECK(quick.mean_utilization >= 0.885);
  CHECK(quick.stats.pages_moved <= 1075);
  CHECK(quick.stats.maps + quick.stats.unmaps <= 1418 + 29);
  ArenaReplay const full = replay_on_h200_bookkeeping(test::gpu_full_trace(), 32 * MiB, true);
  CHECK(full.failed == 0);
  CHECK(full.mean_utilization >= 0.914);
  CHECK(full.stats.pages_moved <= 5256);
  CHECK(full.stats.maps + full.stats.unmaps <= 6573 + 36);
}

TEST_CASE("with tails of at most half a large page lent (the default) cuvmm-plan's H200 traces stay within the "
          "measured bounds, about twice the driver calls of whole tails",
          "[arena][churn][trace][tails]") {
  ArenaReplay const quick = replay_on_h200_bookkeeping(test::gpu_quick_trace(), 32 * MiB, true, 16 * MiB);
  CHECK(quick.failed == 0);
  CHECK(quick.mean_utilization >= 0.928);
  CHECK(quick.stats.pages_moved <= 1410);
  CHECK(quick.stats.maps + quick.stats.unmaps <= 2541);
  ArenaReplay const full = replay_on_h200_bookkeeping(test::gpu_full_trace(), 32 * MiB, true, 16 * MiB);
  CHECK(full.failed == 0);
  CHECK(full.mean_utilization >= 0.962);
  CHECK(full.stats.pages_moved <= 7103);
  CHECK(full.stats.maps + full.stats.unmaps <= 12187);
}

// --- idle memory: creating pages rather than moving them (ArenaOptions::max_idle_percent) --------

namespace {

/// An Arena over a 1 GiB host backend with large pages off and no runs parked in fronts, so that a
/// request's pages come from the reuse ladder alone.
struct IdleArena {
  explicit IdleArena(std::size_t max_idle_percent)
      : arena(backend, {.large_page_bytes = 0, .stream_cache_run_bytes = 0, .max_idle_percent = max_idle_percent}) {}
  HostBackend backend{{.granularity = 2 * MiB, .physical_limit = 1 * GiB}};
  Arena arena;
};

}  // namespace

TEST_CASE("a request that nothing cached serves creates its pages while the memory idle stays within "
          "max_idle_percent of the bytes live, and moves cached pages past it",
          "[arena][churn][idle]") {
  // Three pages side by side, the middle one freed: boxed in, it cannot serve two pages as it lies
  // or grow in place. Asking for two then holds 5 pages for 4 live (the request's own counted):
  // 25% idle, which 25 allows and 24 does not.
  std::size_t const percent = GENERATE(24, 25);
  CAPTURE(percent);
  IdleArena h(percent);
  Arena& arena = h.arena;
  std::size_t const page = arena.page_bytes();
  void* const before = arena.allocate(page);
  void* const middle = arena.allocate(page);
  void* const after = arena.allocate(page);
  REQUIRE(middle == static_cast<std::byte*>(before) + page);
  REQUIRE(after == static_cast<std::byte*>(middle) + page);
  arena.deallocate(middle, page);
  ArenaStats const freed = arena.stats();
  void* const pair = arena.allocate(2 * page);
  ArenaStats const served = arena.stats();
  std::memset(pair, 5, 2 * page);
  if (percent == 25) {
    CHECK(served.chunks_created == freed.chunks_created + 2);
    CHECK(served.pages_moved == freed.pages_moved);
    CHECK(served.bytes_physical.current == 5 * page);
    void* const again = arena.allocate(page);  // the middle page, where it is mapped
    CHECK(again == middle);
    check_no_driver_call(served, arena.stats());
    arena.deallocate(again, page);
  } else {
    CHECK(served.chunks_created == freed.chunks_created + 1);
    CHECK(served.pages_moved == freed.pages_moved + 1);
    CHECK(served.bytes_physical.current == 4 * page);
  }
  CHECK(static_cast<unsigned char*>(pair)[2 * page - 1] == 5);
  arena.deallocate(pair, 2 * page);
  arena.deallocate(before, page);
  arena.deallocate(after, page);
  CHECK(arena.trim() == arena.stats().bytes_physical.peak);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

TEST_CASE("however much idle memory max_idle_percent allows, a request the device cannot create pages for takes "
          "them from the cache",
          "[arena][churn][idle][failure]") {
  // The device full of single pages, every other one freed: the 256 cached pages are all boxed
  // in, so a request of 256 pages is served only by moving them (D2's first rule).
  std::size_t const percent = GENERATE(std::size_t{0}, std::size_t{5}, std::size_t{1} << 40);
  CAPTURE(percent);
  IdleArena h(percent);
  Arena& arena = h.arena;
  std::size_t const page = arena.page_bytes();
  std::vector<void*> pages;
  for (std::size_t i = 0; i < GiB / page; ++i) pages.push_back(arena.allocate(page));
  REQUIRE(h.backend.live_counts().bytes_physical == GiB);
  for (std::size_t i = 0; i < pages.size(); i += 2) arena.deallocate(pages[i], page);
  ArenaStats const freed = arena.stats();
  void* const half = arena.allocate(GiB / 2);
  ArenaStats const served = arena.stats();
  CHECK(served.pages_moved == freed.pages_moved + GiB / 2 / page);
  // Only the share that allows 512 MiB idle above 1 GiB live tries to create a page first; the full
  // device refuses it (counted: ArenaStats counts failed calls too).
  CHECK(served.chunks_created == freed.chunks_created + (percent >= 50 ? 1 : 0));
  CHECK(h.backend.live_counts().bytes_physical == GiB);
  std::memset(half, 9, GiB / 2);
  CHECK(static_cast<unsigned char*>(half)[GiB / 2 - 1] == 9);
  arena.deallocate(half, GiB / 2);
  for (std::size_t i = 1; i < pages.size(); i += 2) arena.deallocate(pages[i], page);
  CHECK(arena.trim() == GiB);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

namespace {

/// What a replay measured when its bounds were set: a change that does worse fails.
struct Measured {
  double peak_utilization = 0;
  double mean_utilization = 0;
  double largest_after = 0;
  std::size_t pages_moved = 0;
  std::size_t maps_and_unmaps = 0;
};

void check_measured(const ArenaReplay& r, const Measured& m) {
  CHECK(r.failed == 0);
  CHECK(peak_utilization(r) >= m.peak_utilization);
  CHECK(r.mean_utilization >= m.mean_utilization);
  CHECK(largest_after_share(r) >= m.largest_after);
  CHECK(r.stats.pages_moved <= m.pages_moved);
  CHECK(r.stats.maps + r.stats.unmaps <= m.maps_and_unmaps);
}

}  // namespace

TEST_CASE("with the defaults (idle memory up to 20% of the bytes live) cuvmm-plan's H200 traces cost about half "
          "the driver time of pages moved first, within the measured bounds; 5% keeps the utilization at 0.95",
          "[arena][churn][trace][idle]") {
  ArenaReplay const quick = replay_with_options(test::gpu_quick_trace(), {});
  check_measured(quick, {.peak_utilization = 0.858, .mean_utilization = 0.853, .largest_after = 0.998,
                         .pages_moved = 926, .maps_and_unmaps = 1433 + 189});
  ArenaReplay const full = replay_with_options(test::gpu_full_trace(), {});
  check_measured(full, {.peak_utilization = 0.837, .mean_utilization = 0.846, .largest_after = 0.9918,
                        .pages_moved = 2790, .maps_and_unmaps = 5118 + 514});
  // Measured: 179 ms against 354 ms moving first and 262 ms at 5% (estimated from each call's H200
  // cost by handle size).
  ArenaReplay const moving_first = replay_with_options(test::gpu_full_trace(), {.max_idle_percent = 0});
  ArenaReplay const frugal = replay_with_options(test::gpu_full_trace(), {.max_idle_percent = 5});
  check_measured(frugal, {.peak_utilization = 0.953, .mean_utilization = 0.950, .largest_after = 0.9916,
                          .pages_moved = 5688, .maps_and_unmaps = 7647 + 1055});
  CHECK(full.h200_driver_ms <= 0.55 * moving_first.h200_driver_ms);
  CHECK(full.h200_driver_ms <= 0.7 * frugal.h200_driver_ms);
  CHECK(peak_utilization(moving_first) >= peak_utilization(frugal));
}

// --- where the bytes are (ArenaStats' breakdown) and what lent memory may cost -------------------

namespace {

/// The breakdown of `s` in MiB-exact values; the five parts add up to bytes_physical.
void check_breakdown(const ArenaStats& s, std::size_t live, std::size_t pinned, std::size_t lent, std::size_t cached,
                     std::size_t pooled) {
  CHECK(s.bytes_live == live);
  CHECK(s.bytes_pinned == pinned);
  CHECK(s.bytes_lent == lent);
  CHECK(s.bytes_cached == cached);
  CHECK(s.bytes_pooled == pooled);
  CHECK(s.bytes_live + s.bytes_pinned + s.bytes_lent + s.bytes_cached + s.bytes_pooled == s.bytes_physical.current);
}

}  // namespace

namespace {

/// A host backend whose access grants take 2 ms each.
class SlowGrants final : public CountingBackend {
 public:
  using CountingBackend::CountingBackend;

 protected:
  void before_call(BackendOp op) const override {
    if (op == BackendOp::set_access) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

}  // namespace

TEST_CASE("Arena::physical() gives stats()' physical bytes and page counts, without its lock", "[arena][stats]") {
  HostArena h(true);
  Arena& arena = h.arena;
  auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
  auto const same = [&] {
    ArenaStats const s = arena.stats();
    ArenaPhysical const p = arena.physical();
    CHECK(p.bytes == s.bytes_physical.current);
    CHECK(p.bytes == h.backend.live_counts().bytes_physical);
    CHECK(p.chunks_created == s.chunks_created);
    CHECK(p.chunks_released == s.chunks_released);
  };
  same();
  void* big = arena.allocate(32 * MiB + 4 * MiB, a);  // two large pages
  void* block = arena.allocate(3000, a);             // a slab page
  CHECK(arena.physical().bytes == 64 * MiB + 2 * MiB);
  same();
  arena.deallocate(block, 3000, a);
  arena.deallocate(big, 32 * MiB + 4 * MiB, a);
  same();
  arena.release_stream(a);  // its cache unmapped into the pools
  same();
  CHECK(arena.trim() == 64 * MiB + 2 * MiB);
  CHECK(arena.physical().bytes == 0);
  CHECK(arena.physical().chunks_released == 3);
  same();
}

TEST_CASE("profile: what stats() and physical() cost with blocks parked in a front (prints the numbers)",
          "[.profile_stats_cost]") {
  // stats() visits every front and what it parks; physical() reads three atomics. And what reading
  // either after every allocation of the traces in CUVMM_PROFILE_TRACES costs in host time (as
  // cuvmm_torch reads the reserved bytes), on an H200's bookkeeping with cuvmm_torch's rounding.
  using clock = std::chrono::steady_clock;
  auto const us_per_call = [](auto&& read, int calls) {
    auto const start = clock::now();
    for (int k = 0; k < calls; ++k) read();
    return std::chrono::duration<double, std::micro>(clock::now() - start).count() / calls;
  };
  HostBackend host({.granularity = 2 * MiB, .physical_limit = 8 * GiB});
  Arena arena(host);
  for (std::size_t const blocks : {std::size_t{10}, std::size_t{1000}, std::size_t{20000}}) {
    std::vector<void*> live;
    for (std::size_t i = 0; i < blocks; ++i) live.push_back(arena.allocate(512 + i % 7 * 512));
    for (std::size_t i = 0; i < blocks; ++i) arena.deallocate(live[i], 512 + i % 7 * 512);
    std::size_t sink = 0;
    double const stats_us = us_per_call([&] { sink += arena.stats().bytes_physical.current; }, 1000);
    double const physical_us = us_per_call([&] { sink += arena.physical().bytes; }, 1000);
    [[maybe_unused]] std::size_t volatile kept = sink;  // the reads are not optimized away
    std::printf("%zu blocks freed and parked: stats() %.2f us, physical() %.3f us\n", blocks, stats_us, physical_us);
  }
  for (auto const& [path, ops] : profile_traces()) {
    for (bool const whole_stats : {true, false}) {
      test::BookkeepingBackend backend(h200_bytes);
      Arena replayed(backend);
      std::unordered_map<std::size_t, std::pair<void*, std::size_t>> live;
      double reading = 0;
      std::size_t sink = 0;
      auto const started = clock::now();
      for (auto const& op : ops) {
        if (op.allocate) {
          live.emplace(op.id, std::pair{replayed.allocate(op.bytes), op.bytes});
          auto const before = clock::now();
          sink += whole_stats ? replayed.stats().bytes_physical.current : replayed.physical().bytes;
          reading += std::chrono::duration<double, std::milli>(clock::now() - before).count();
        } else if (auto const found = live.find(op.id); found != live.end()) {
          replayed.deallocate(found->second.first, found->second.second);
          live.erase(found);
        }
      }
      double const total = std::chrono::duration<double, std::milli>(clock::now() - started).count();
      [[maybe_unused]] std::size_t volatile kept = sink;
      std::printf("%s: reading %s after each allocation took %.1f ms of %.1f ms of host time\n", path.c_str(),
                  whole_stats ? "stats()" : "physical()", reading, total);
      for (auto const& [id, entry] : live) replayed.deallocate(entry.first, entry.second);
    }
  }
}

TEST_CASE("ArenaStats adds up the time spent in the driver's calls, by call", "[arena][stats]") {
  HostBackend host({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  SlowGrants slow(host);
  Arena arena(slow);
  void* const run = arena.allocate(6 * MiB);  // three pages, one grant
  void* const other = arena.allocate(4 * MiB);
  ArenaStats const s = arena.stats();
  CHECK(s.access_calls == 2);
  CHECK(s.access_seconds >= 0.004);
  CHECK(s.unmap_seconds == 0.0);
  CHECK(s.release_seconds == 0.0);
  arena.deallocate(run, 6 * MiB);
  arena.deallocate(other, 4 * MiB);
  CHECK(arena.trim() == 10 * MiB);
  ArenaStats const trimmed = arena.stats();
  CHECK(trimmed.unmaps > 0);
  CHECK(trimmed.access_seconds == s.access_seconds);  // trimming grants nothing
}

TEST_CASE("ArenaStats splits the bytes held into live, pinned by live small blocks, lent, cached and pooled",
          "[arena][stats][tails]") {
  HostArena h(true);
  Arena& arena = h.arena;
  auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
  check_breakdown(arena.stats(), 0, 0, 0, 0, 0);
  void* owner = arena.allocate(32 * MiB + 4 * MiB);  // two large pages, 28 MiB behind it lent
  check_breakdown(arena.stats(), 36 * MiB, 0, 28 * MiB, 0, 0);
  void* block = arena.allocate(1000);  // a 1 KiB block in a new slab page: the rest of the page is pinned
  check_breakdown(arena.stats(), 36 * MiB + 1024, 2 * MiB - 1024, 28 * MiB, 0, 0);
  void* borrower = arena.allocate(4 * MiB);  // from the lent tail
  check_breakdown(arena.stats(), 40 * MiB + 1024, 2 * MiB - 1024, 24 * MiB, 0, 0);
  void* other = arena.allocate(6 * MiB, a);  // three new small pages for stream a
  check_breakdown(arena.stats(), 46 * MiB + 1024, 2 * MiB - 1024, 24 * MiB, 0, 0);
  arena.deallocate(other, 6 * MiB, a);  // cached on a
  check_breakdown(arena.stats(), 40 * MiB + 1024, 2 * MiB - 1024, 24 * MiB, 6 * MiB, 0);
  arena.release_stream(a);  // a's cache unmapped into the pool
  check_breakdown(arena.stats(), 40 * MiB + 1024, 2 * MiB - 1024, 24 * MiB, 0, 6 * MiB);
  // The owner goes: its first large page is cached, its part of the last one is lent with the
  // rest of that page (the borrower still uses it).
  arena.deallocate(owner, 32 * MiB + 4 * MiB);
  check_breakdown(arena.stats(), 4 * MiB + 1024, 2 * MiB - 1024, 28 * MiB, 32 * MiB, 6 * MiB);
  arena.deallocate(borrower, 4 * MiB);  // the last large page is whole again: cached
  check_breakdown(arena.stats(), 1024, 2 * MiB - 1024, 0, 64 * MiB, 6 * MiB);
  arena.deallocate(block, 1000);  // an empty slab page is cached memory
  check_breakdown(arena.stats(), 0, 0, 0, 66 * MiB, 6 * MiB);
  CHECK(arena.trim() == 72 * MiB);
  check_breakdown(arena.stats(), 0, 0, 0, 0, 0);
}

TEST_CASE("a request of whole pages that nothing else can back takes another stream's lent slots, after an event wait",
          "[arena][churn][tails][failure]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  // Room for two large pages, nothing more; lending up to 32 MiB allowed.
  Arena arena(backend, {.address_space_bytes = 4 * GiB, .max_lent_bytes = 32 * MiB, .max_lent_tail_bytes = 0, .byte_limit = 64 * MiB});
  auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
  void* owner = arena.allocate(32 * MiB + 4 * MiB);  // both large pages; 28 MiB lent on the default stream
  ArenaStats const before = arena.stats();
  REQUIRE(before.bytes_lent == 28 * MiB);
  void* p = arena.allocate(6 * MiB, a);  // no page can be created: the default stream's lent slots
  CHECK(p == static_cast<std::byte*>(owner) + 36 * MiB);
  ArenaStats const after = arena.stats();
  CHECK(after.chunks_created == before.chunks_created);
  CHECK(after.cross_stream_reuses == before.cross_stream_reuses + 1);
  CHECK(after.bytes_lent == 22 * MiB);
  CHECK(backend.live_counts().bytes_physical == 64 * MiB);
  std::memset(owner, 1, 36 * MiB);
  std::memset(p, 2, 6 * MiB);
  CHECK(static_cast<unsigned char*>(owner)[36 * MiB - 1] == 1);
  CHECK(static_cast<unsigned char*>(p)[0] == 2);
  CHECK_THROWS_AS(arena.allocate(24 * MiB, a), OutOfMemory);  // 22 MiB are lent: not enough
  CHECK(backend.live_counts().bytes_physical == 64 * MiB);
  arena.deallocate(p, 6 * MiB, a);
  arena.deallocate(owner, 32 * MiB + 4 * MiB);
  CHECK(arena.trim() == 64 * MiB);
  CHECK(backend.live_counts().bytes_physical == 0);
}

TEST_CASE("max_lent_bytes bounds the memory lent: a large request that would lend more takes small pages behind "
          "its large ones, and no cached large page is lent",
          "[arena][churn][tails]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  Arena arena(backend, {.address_space_bytes = 4 * GiB, .share_large_page_tails = true, .max_lent_bytes = 36 * MiB, .max_lent_tail_bytes = 0});
  void* first = arena.allocate(32 * MiB + 4 * MiB);  // lends 28 MiB: within the bound
  CHECK(arena.stats().bytes_lent == 28 * MiB);
  CHECK(arena.stats().bytes_physical.current == 64 * MiB);
  void* second = arena.allocate(32 * MiB + 4 * MiB);  // 28 MiB more would pass 36: one large page, two small ones
  ArenaStats const s = arena.stats();
  CHECK(s.bytes_lent == 28 * MiB);
  CHECK(s.bytes_physical.current == 100 * MiB);
  CHECK(s.chunks_created == 5);
  arena.deallocate(second, 32 * MiB + 4 * MiB);
  void* whole = arena.allocate(64 * MiB);  // two new large pages, nothing lent; then cached as they are
  arena.deallocate(whole, 64 * MiB);
  void* borrower = arena.allocate(22 * MiB);  // from the lent tail of `first`: 6 MiB stay lent
  ArenaStats const before = arena.stats();
  CHECK(before.bytes_lent == 6 * MiB);
  // 8 MiB: the lent slots are too few, and lending a cached large page would pass the bound
  // (6 + 32 MiB): the request does not take the last large page of the cached 64 MiB.
  void* small = arena.allocate(8 * MiB);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_lent == 6 * MiB);
  auto const at = reinterpret_cast<std::uintptr_t>(small);
  auto const cached_at = reinterpret_cast<std::uintptr_t>(whole);
  CHECK((at + 8 * MiB <= cached_at || at >= cached_at + 64 * MiB));
  arena.deallocate(small, 8 * MiB);
  arena.deallocate(borrower, 22 * MiB);
  arena.deallocate(first, 32 * MiB + 4 * MiB);
  arena.trim();
  CHECK(arena.stats().bytes_physical.current == 0);
}

TEST_CASE("max_lent_tail_bytes bounds each request's tail: a larger one takes small pages behind its large page",
          "[arena][tails]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  Arena arena(backend, {.address_space_bytes = 4 * GiB, .share_large_page_tails = true, .max_lent_tail_bytes = 16 * MiB});
  // 36 MiB would lend 28 MiB of its second large page: it takes one large page and two small ones.
  void* wide_tail = arena.allocate(32 * MiB + 4 * MiB);
  CHECK(arena.stats().bytes_lent == 0);
  CHECK(arena.stats().bytes_physical.current == 36 * MiB);
  // 52 MiB lends 12 MiB (within the bound): two whole large pages, the tail lent as before.
  auto* const narrow_tail = static_cast<std::byte*>(arena.allocate(32 * MiB + 20 * MiB));
  CHECK(arena.stats().bytes_lent == 12 * MiB);
  CHECK(arena.stats().bytes_physical.current == 36 * MiB + 64 * MiB);
  void* borrower = arena.allocate(8 * MiB);  // from that tail, mapped where it is
  CHECK(borrower == narrow_tail + 52 * MiB);
  CHECK(arena.stats().bytes_lent == 4 * MiB);
  CHECK(arena.stats().bytes_physical.current == 100 * MiB);
  arena.deallocate(borrower, 8 * MiB);
  arena.deallocate(narrow_tail, 32 * MiB + 20 * MiB);
  arena.deallocate(wide_tail, 32 * MiB + 4 * MiB);
  arena.trim();
  CHECK(arena.stats().bytes_physical.current == 0);
}

TEST_CASE("the default max_lent_bytes is a twentieth of the device's memory, or of byte_limit", "[arena][tails]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  {
    // byte_limit 640 MiB: at most 32 MiB lent. A 36 MiB request lends 28; a second would pass 32.
    Arena arena(backend, {.address_space_bytes = 4 * GiB, .max_lent_tail_bytes = 0, .byte_limit = 640 * MiB});
    void* p = arena.allocate(32 * MiB + 4 * MiB);
    void* q = arena.allocate(32 * MiB + 4 * MiB);
    CHECK(arena.stats().bytes_lent == 28 * MiB);
    CHECK(arena.stats().bytes_physical.current == 100 * MiB);
    arena.deallocate(q, 32 * MiB + 4 * MiB);
    arena.deallocate(p, 32 * MiB + 4 * MiB);
  }
  {
    // No byte_limit: the device's 1 GiB, so 51 MiB; two tails of 28 MiB pass it, one with 20 does not.
    Arena arena(backend, {.address_space_bytes = 4 * GiB, .max_lent_tail_bytes = 0});
    void* p = arena.allocate(32 * MiB + 4 * MiB);
    void* q = arena.allocate(32 * MiB + 12 * MiB);
    CHECK(arena.stats().bytes_lent == 28 * MiB + 20 * MiB);
    void* r = arena.allocate(32 * MiB + 4 * MiB);
    CHECK(arena.stats().bytes_lent == 48 * MiB);
    arena.deallocate(r, 32 * MiB + 4 * MiB);
    arena.deallocate(q, 32 * MiB + 12 * MiB);
    arena.deallocate(p, 32 * MiB + 4 * MiB);
  }
}

TEST_CASE("a request that runs out of host memory at any step of its hand-out leaves the arena as it was",
          "[arena][tails][failure]") {
  HostArena h(true);
  Arena& arena = h.arena;
  auto const idle = [&] {  // nothing live, every byte held given back on demand
    ArenaStats const s = arena.stats();
    CHECK(s.allocations.current == 0);
    CHECK(s.bytes_live == 0);
    CHECK(s.bytes_lent + s.bytes_cached + s.bytes_pooled == s.bytes_physical.current);
  };
  // The owner of two large pages (tail lent), then a borrower of its tail: each allocation is
  // tried with its k-th host allocation failing, for every k until one succeeds.
  int failures = 0;
  void* owner = nullptr;
  for (long k = 1; owner == nullptr; ++k) {
    REQUIRE(k < 1000);
    fail_in = k;
    try {
      owner = arena.allocate(32 * MiB + 4 * MiB);
    } catch (const std::bad_alloc& e) {  // host memory, or cuvmm::OutOfMemory from a backend out of it
      fail_in = 0;
      INFO("failure " << k << ": " << e.what());
      REQUIRE(dynamic_cast<const OutOfMemory*>(&e) == nullptr);  // never address space or pages lost
      ++failures;
      idle();
    }
    fail_in = 0;
  }
  CHECK(failures > 0);
  CHECK(arena.stats().bytes_lent == 28 * MiB);
  CHECK(arena.stats().bytes_physical.current == 64 * MiB);  // what failed attempts mapped was reused
  void* borrower = nullptr;
  for (long k = 1; borrower == nullptr; ++k) {
    REQUIRE(k < 1000);
    fail_in = k;
    try {
      borrower = arena.allocate(4 * MiB);
    } catch (const std::bad_alloc& e) {
      fail_in = 0;
      INFO("failure " << k << ": " << e.what());
      REQUIRE(dynamic_cast<const OutOfMemory*>(&e) == nullptr);
      CHECK(arena.stats().allocations.current == 1);
      CHECK(arena.stats().bytes_lent == 28 * MiB);
    }
    fail_in = 0;
  }
  CHECK(borrower == static_cast<std::byte*>(owner) + 36 * MiB);
  CHECK(arena.stats().bytes_lent == 24 * MiB);
  arena.deallocate(borrower, 4 * MiB);
  arena.deallocate(owner, 32 * MiB + 4 * MiB);
  idle();
  std::size_t const held = arena.stats().bytes_physical.current;
  CHECK(arena.trim() == held);
  CHECK(h.backend.live_counts().bytes_physical == 0);
}

namespace {

/// What ArenaStats says of the bytes held, where they are and the driver calls made: equal before
/// and after a call that failed, the call changed nothing.
struct Books {
  std::size_t allocations, requested, live, pinned, lent, cached, pooled, physical, stale, maps, unmaps, created;
  double fragmentation;
  bool operator==(const Books&) const = default;
};

Books books(const ArenaStats& s) {
  return {s.allocations.current, s.bytes_requested.current, s.bytes_live, s.bytes_pinned, s.bytes_lent,
          s.bytes_cached, s.bytes_pooled, s.bytes_physical.current, s.bytes_stale, s.maps, s.unmaps,
          s.chunks_created, s.fragmentation};
}

std::ostream& operator<<(std::ostream& out, const Books& b) {
  return out << "{allocations " << b.allocations << ", requested " << b.requested << ", live " << b.live
             << ", pinned " << b.pinned << ", lent " << b.lent << ", cached " << b.cached << ", pooled " << b.pooled
             << ", physical " << b.physical << ", stale " << b.stale << ", maps " << b.maps << ", unmaps " << b.unmaps
             << ", created " << b.created << ", fragmentation " << b.fragmentation << "}";
}

/// Runs `call` with its k-th host allocation failing, for k = 1, 2, ... until it succeeds, and
/// checks after each failure that the arena's books are exactly what they were before. Returns
/// how many attempts failed.
template <class Call>
int fail_each_host_allocation(Arena& arena, Call&& call) {
  int failures = 0;
  for (long k = 1;; ++k) {
    REQUIRE(k < 1000);
    Books const before = books(arena.stats());
    fail_in = k;
    try {
      call();
      fail_in = 0;
      return failures;
    } catch (const std::bad_alloc& e) {
      fail_in = 0;
      INFO("host allocation " << k << " failed: " << e.what());
      REQUIRE(dynamic_cast<const OutOfMemory*>(&e) == nullptr);  // host memory, not the device's
      ++failures;
      CHECK(books(arena.stats()) == before);
    }
  }
}

}  // namespace

TEST_CASE("a call that runs out of host memory while it cuts a cached span, lends a cached large page or frees "
          "into lent slots changes nothing",
          "[arena][tails][failure]") {
  std::size_t const large = 32 * MiB;
  SECTION("a small request from the small tail of a cached span") {
    HostArena h;
    Arena& arena = h.arena;
    void* span = arena.allocate(large + 4 * MiB);
    arena.deallocate(span, large + 4 * MiB);
    // The free kept the node of its live record, and cutting the span keeps the nodes of its cache
    // entries for the large page it caches again: the request needs none from the heap, unless
    // later allocations took the kept record nodes first (two spans cached on streams of their own,
    // freed before the span and taken again after it).
    bool const record_nodes_taken = GENERATE(false, true);
    auto* const a = reinterpret_cast<Stream>(std::uintptr_t{64});
    auto* const b = reinterpret_cast<Stream>(std::uintptr_t{128});
    if (record_nodes_taken) {
      REQUIRE(arena.allocate(large + 4 * MiB) == span);  // to be cached again, after the others
      arena.deallocate(arena.allocate(2 * large, a), 2 * large, a);
      arena.deallocate(arena.allocate(2 * large, b), 2 * large, b);
      arena.deallocate(span, large + 4 * MiB);
      arena.allocate(2 * large, a);
      arena.allocate(2 * large, b);
    }
    void* p = nullptr;
    int const failures = fail_each_host_allocation(arena, [&] { p = arena.allocate(3 * MiB); });
    if (record_nodes_taken) {
      CHECK(failures > 0);
    } else {
      CHECK(failures == 0);
    }
    CHECK(p == static_cast<std::byte*>(span) + large);
    void* q = arena.allocate(large);  // the large page stayed cached as a span
    CHECK(q == span);
    arena.deallocate(q, large);
    arena.deallocate(p, 3 * MiB);
  }
  SECTION("a large request from the end of a cached span, its front and the rest of its tail cached apart") {
    HostArena h;
    Arena& arena = h.arena;
    void* span = arena.allocate(3 * large + 6 * MiB);
    arena.deallocate(span, 3 * large + 6 * MiB);
    void* p = nullptr;
    CHECK(fail_each_host_allocation(arena, [&] { p = arena.allocate(2 * large + 3 * MiB); }) > 0);
    CHECK(p == static_cast<std::byte*>(span) + large);
    void* front = arena.allocate(large);
    void* last = arena.allocate(2 * MiB);
    CHECK(front == span);
    CHECK(last == static_cast<std::byte*>(span) + 3 * large + 4 * MiB);
    for (auto [q, n] : {std::pair{p, 2 * large + 3 * MiB}, std::pair{front, large}, std::pair{last, 2 * MiB}}) {
      arena.deallocate(q, n);
    }
  }
  SECTION("a small request that borrows the last large page of a cached span") {
    HostArena h;
    Arena& arena = h.arena;
    void* span = arena.allocate(2 * large);
    arena.deallocate(span, 2 * large);
    void* p = nullptr;
    CHECK(fail_each_host_allocation(arena, [&] { p = arena.allocate(4 * MiB); }) > 0);
    CHECK(p == static_cast<std::byte*>(span) + large);
    CHECK(arena.stats().bytes_lent == large - 4 * MiB);
    void* q = arena.allocate(large);  // the first large page stayed cached as a span
    CHECK(q == span);
    arena.deallocate(q, large);
    arena.deallocate(p, 4 * MiB);
  }
  SECTION("a small block that opens a slab on a cached page") {
    HostArena h;
    Arena& arena = h.arena;
    // Two blocks of the largest class fill a slab (and the stream's books of blocks are made).
    void* a = arena.allocate(1 * MiB);
    void* b = arena.allocate(1 * MiB);
    void* page = arena.allocate(2 * MiB);
    arena.deallocate(page, 2 * MiB);
    void* p = nullptr;
    CHECK(fail_each_host_allocation(arena, [&] { p = arena.allocate(1 * MiB); }) > 0);
    CHECK(p == page);  // a new slab on the cached page
    CHECK(arena.stats().bytes_physical.current == 4 * MiB);
    for (void* q : {a, b, p}) arena.deallocate(q, 1 * MiB);
  }
  SECTION("a free of a large request whose lent tail a borrower still uses, then of the borrower") {
    HostArena h(true);
    Arena& arena = h.arena;
    void* owner = arena.allocate(large + 4 * MiB);  // two large pages, 28 MiB of the last lent
    void* borrower = arena.allocate(6 * MiB);
    REQUIRE(borrower == static_cast<std::byte*>(owner) + large + 4 * MiB);
    // The owner's part of its last large page is lent (the borrower is still there), its first cached.
    CHECK(fail_each_host_allocation(arena, [&] { arena.deallocate(owner, large + 4 * MiB); }) > 0);
    CHECK(arena.stats().bytes_lent == large - 6 * MiB);
    CHECK(arena.stats().bytes_cached == large);
    // Every slot of the last large page is free again. Caching it is best effort: with its first
    // host allocation (the span's) failing, the free succeeds and the page stays lent, whole.
    fail_in = 1;
    arena.deallocate(borrower, 6 * MiB);
    fail_in = 0;
    ArenaStats const s = arena.stats();
    CHECK(s.allocations.current == 0);
    CHECK(s.bytes_lent == large);
    CHECK(s.bytes_cached == large);
    CHECK(s.bytes_lent + s.bytes_cached == s.bytes_physical.current);
    CHECK(arena.trim() == 2 * large);  // gathered from the lent slots, given back
    CHECK(h.backend.live_counts().bytes_physical == 0);
  }
  SECTION("a free of a large request whose lent tail is all free") {
    HostArena h(true);
    Arena& arena = h.arena;
    void* owner = arena.allocate(large + 4 * MiB);
    CHECK(fail_each_host_allocation(arena, [&] { arena.deallocate(owner, large + 4 * MiB); }) > 0);
    CHECK(arena.stats().bytes_lent == 0);
    CHECK(arena.stats().bytes_cached == 2 * large);
    void* whole = arena.allocate(2 * large);  // both large pages, cached as one span where they are
    CHECK(whole == owner);
    arena.deallocate(whole, 2 * large);
  }
}

TEST_CASE("after cuvmm-plan's H200 full trace the largest allocation that succeeds is bounded below by what is lent",
          "[arena][trace][tails]") {
  // The first rule asks for 0.985 of the device's memory less the live bytes. Lent slots of live
  // large pages are what falls short: with every tail lent whole (max_lent_tail_bytes 0) and the
  // default total bound (5%) the replay lends 2.7 GiB that the end cannot use (measured 0.972: a
  // regression bound, not the rule); with max_lent_bytes at 0.5% of the device the rule holds
  // (measured 0.990).
  auto const largest_share = [](std::size_t max_lent) {
    test::BookkeepingBackend backend(h200_bytes);
    Arena arena(backend, {.max_lent_bytes = max_lent, .max_lent_tail_bytes = 0});
    ArenaReplay const r = test::replay(arena, test::gpu_full_trace(), 2000, {}, h200_bytes);
    CHECK(r.failed == 0);
    CHECK(r.largest_after + r.stats.bytes_live + r.stats.bytes_pinned + r.stats.bytes_lent <= h200_bytes);
    return static_cast<double>(r.largest_after) / static_cast<double>(h200_bytes - r.live_at_end);
  };
  CHECK(largest_share(h200_bytes / 200) >= 0.985);
  CHECK(largest_share(0) >= 0.972);
  // Each tail bounded to half a large page instead (max_lent_tail_bytes, 16 MiB: the default): the
  // rule holds too (measured 0.9896), for fewer page moves than the total bound needs.
  test::BookkeepingBackend backend(h200_bytes);
  Arena arena(backend, ArenaOptions{});
  REQUIRE(arena.stats().bytes_physical.current == 0);
  CHECK(ArenaOptions{}.max_lent_tail_bytes == 16 * MiB);
  ArenaReplay const r = test::replay(arena, test::gpu_full_trace(), 2000, {}, h200_bytes);
  CHECK(r.failed == 0);
  CHECK(static_cast<double>(r.largest_after) / static_cast<double>(h200_bytes - r.live_at_end) >= 0.985);
}

