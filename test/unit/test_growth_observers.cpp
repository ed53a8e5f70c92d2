// Growth observers (growth_observer.hpp) on the host backend: every chunk is reported after it is
// mapped and before the growth returns, and withdrawn before it is unmapped, in pairs; an observer
// that throws undoes the growth; failures of the backend at every call and steps prepared ahead
// never show an observer a range it was not told of; attaching, detaching and moves. Also: the
// chunk properties that NCCL and RDMA ask for reach the backend from GrowableOptions. The Arena
// tells observers of its pages the same way.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/generators/catch_generators_range.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/counting_backend.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growth_observer.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>

#include "growable_contents.hpp"

using namespace cuvmm;
using cuvmm::test::contents;
using cuvmm::test::random_words;

namespace {

constexpr std::size_t granule = 64 * KiB;
constexpr unsigned char poison = 0xAB;

HostBackend::Options small_granules() { return {.granularity = granule}; }

/// 64 MiB of range, chunks of at most `max_chunk` bytes (one granule: a growth maps many chunks).
GrowableOptions options(std::size_t max_chunk = granule, MapAhead map_ahead = MapAhead::off) {
  GrowableOptions o;
  o.max_capacity_bytes = 64 * MiB;
  o.max_chunk_bytes = max_chunk;
  o.hide_bytes = max_chunk;
  o.map_ahead = map_ahead;
  return o;
}

/// Records what it is told and checks the contract as it goes: pairs, no overlap, one thread.
/// Writes `poison` over each range it is told of (a write to an unmapped or inaccessible host range
/// would fault) and reads each range's first word before it is withdrawn (still mapped).
class Recorder final : public GrowthObserver {
 public:
  struct Event {
    bool mapped = false;
    BackedRange range;
    std::uint64_t first_word = 0;  // withdrawals: the range's first word, read then
  };

  std::vector<Event> events;
  std::vector<BackedRange> live;  // told mapped, not withdrawn yet, in the order told
  std::size_t violations = 0;     // a withdrawal never announced, a range told twice, overlap, another thread
  std::size_t throw_at = 0;       // 1-based on_mapped call that throws; 0: never
  std::size_t mapped_calls = 0;
  bool write_poison = true;

  void on_mapped(const BackedRange& range) override {
    Guard g(*this);
    if (++mapped_calls == throw_at) throw std::runtime_error("observer refused the range");
    if (std::find(live.begin(), live.end(), range) != live.end()) ++violations;
    if (write_poison) std::memset(reinterpret_cast<void*>(range.address), poison, range.bytes);
    events.push_back({true, range, 0});
    live.push_back(range);
  }
  void on_unmapping(const BackedRange& range) noexcept override {
    Guard g(*this);
    auto const found = std::find(live.begin(), live.end(), range);
    if (found == live.end()) {
      ++violations;
    } else {
      live.erase(found);
    }
    std::uint64_t word = 0;
    std::memcpy(&word, reinterpret_cast<const void*>(range.address), sizeof(word));
    events.push_back({false, range, word});
  }

  std::size_t live_bytes() const {
    std::size_t bytes = 0;
    for (const BackedRange& r : live) bytes += r.bytes;
    return bytes;
  }

 private:
  struct Guard {
    explicit Guard(Recorder& r) : r_(r) {
      if (r_.inside_.exchange(true) || std::this_thread::get_id() != r_.thread_) ++r_.violations;
    }
    ~Guard() { r_.inside_.store(false); }
    Recorder& r_;
  };
  std::atomic<bool> inside_{false};
  std::thread::id thread_ = std::this_thread::get_id();
};

/// Records the properties of every chunk asked for, and recommends four times the minimum granularity.
class PropertiesBackend final : public CountingBackend {
 public:
  using CountingBackend::CountingBackend;
  std::vector<ChunkProperties> asked;
  std::size_t granularity(const ChunkProperties& props, GranularityKind kind = GranularityKind::minimum) const override {
    std::size_t const g = CountingBackend::granularity(props, GranularityKind::minimum);
    return kind == GranularityKind::recommended ? 4 * g : g;
  }
  ChunkHandle create_chunk(std::size_t size, const ChunkProperties& props) override {
    asked.push_back(props);
    return CountingBackend::create_chunk(size, props);
  }
};

/// The storage's chunks as observers see them, in address order.
std::vector<BackedRange> chunks_of(const GrowableStorage& s) {
  std::vector<BackedRange> out;
  for (std::size_t i = 0; i < s.chunk_count(); ++i) out.push_back(s.backed_range(i));
  return out;
}

/// The chunks are a prefix of the range, side by side from data(), with the chunks' own sizes.
bool tiles_from_data(const GrowableStorage& s) {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < s.chunk_count(); ++i) {
    BackedRange const r = s.backed_range(i);
    if (r.offset != offset || r.address != s.data() + offset || r.bytes != s.chunks()[i].size() ||
        r.chunk != s.chunks()[i].handle() || r.device != 0) {
      return false;
    }
    offset += r.bytes;
  }
  return offset == s.capacity();
}

}  // namespace

TEST_CASE("an observer is told of each chunk after it is mapped and before it is unmapped, in pairs", "[observers]") {
  HostBackend real(small_granules());
  auto recorder = std::make_shared<Recorder>();
  {
    HostGrowableBuffer<std::uint64_t> buffer(real, options(4 * granule));
    buffer.add_observer(recorder);
    CHECK(recorder->events.empty());  // nothing mapped yet
    std::vector<std::uint64_t> const words = random_words(40 * granule / 8, 1);
    std::size_t appended = 0;
    for (std::size_t piece : {granule / 8, 3 * granule / 8, 11 * granule / 8, 25 * granule / 8}) {
      buffer.append(std::span<const std::uint64_t>(words.data() + appended, piece));
      appended += piece;
      CHECK(tiles_from_data(buffer.storage()));
      CHECK(recorder->live == chunks_of(buffer.storage()));  // every chunk told, in address order
    }
    CHECK(buffer.storage().chunk_count() == 11);  // granules 1, 3, then chunks of 4: 40 granules
    CHECK(recorder->events.size() == 11);
    CHECK(std::all_of(recorder->events.begin(), recorder->events.end(), [](const auto& e) { return e.mapped; }));

    // Shrinking withdraws exactly the chunks released, last first, while their contents are there.
    std::vector<BackedRange> const before = chunks_of(buffer.storage());
    buffer.resize(8 * granule / 8);  // keeps the chunks of 1, 3 and 4 granules
    buffer.shrink_to_fit();
    REQUIRE(buffer.storage().chunk_count() == 3);
    REQUIRE(recorder->events.size() == 19);
    for (std::size_t i = 0; i < 8; ++i) {
      const Recorder::Event& e = recorder->events[11 + i];
      CHECK_FALSE(e.mapped);
      CHECK(e.range == before[10 - i]);
      CHECK(e.first_word == words[e.range.offset / 8]);  // read before the unmap: the appended word
    }
    CHECK(recorder->live == chunks_of(buffer.storage()));
    CHECK(contents(buffer) == std::vector<std::uint64_t>(words.begin(), words.begin() + 8 * granule / 8));
  }
  // The destructor withdraws the rest, last first.
  REQUIRE(recorder->events.size() == 22);
  CHECK(recorder->live.empty());
  CHECK(recorder->violations == 0);
  CHECK(recorder->events[19].range.offset == 4 * granule);
  CHECK(recorder->events[21].range.offset == 0);
  CHECK(real.live_counts() == LiveCounts{});
}

TEST_CASE("an observer runs after the map and before the growth's copy into the new range", "[observers]") {
  HostBackend real(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(real, options(4 * granule));
  auto recorder = std::make_shared<Recorder>();  // poisons each range it is told of
  buffer.add_observer(recorder);
  std::vector<std::uint64_t> const words = random_words(5 * granule / 8 + 3, 2);
  buffer.append(words);
  // The elements are the appended words (the copy came after the poison), and the mapped bytes
  // behind them still hold the poison (the observer wrote the whole new range: it was accessible).
  REQUIRE(buffer.capacity() * 8 == 8 * granule);  // two chunks of 4 granules
  CHECK(contents(buffer) == words);
  auto const* bytes = reinterpret_cast<const unsigned char*>(buffer.data());
  CHECK(std::all_of(bytes + words.size() * 8, bytes + 8 * granule, [](unsigned char b) { return b == poison; }));
  CHECK(recorder->events.size() == 2);
}

TEST_CASE("an observer that throws leaves the buffer, its memory and the other observers as they were", "[observers]") {
  // Observer `a` is told first, `b` second; one of them refuses its k-th range of a growth of 6 chunks.
  bool const first_refuses = GENERATE(true, false);
  std::size_t const k = GENERATE(range<std::size_t>(1, 7));
  CAPTURE(first_refuses, k);
  HostBackend real(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(real, options(granule));
  auto a = std::make_shared<Recorder>();
  auto b = std::make_shared<Recorder>();
  buffer.add_observer(a);
  buffer.add_observer(b);
  std::vector<std::uint64_t> const first = random_words(2 * granule / 8, 3);
  buffer.append(first);
  std::vector<BackedRange> const told = chunks_of(buffer.storage());
  LiveCounts const live = real.live_counts();
  GrowableStats const stats = buffer.stats();
  std::size_t const capacity = buffer.capacity();

  Recorder& refusing = first_refuses ? *a : *b;
  refusing.throw_at = refusing.mapped_calls + k;
  std::vector<std::uint64_t> const more = random_words(6 * granule / 8, 4);
  CHECK_THROWS_AS(buffer.append(more), std::runtime_error);

  CHECK(contents(buffer) == first);
  CHECK(buffer.capacity() == capacity);
  CHECK(real.live_counts() == live);  // the new chunks were unmapped and released
  GrowableStats const after = buffer.stats();
  CHECK(after.growth_steps == stats.growth_steps);
  CHECK(after.chunks_created == stats.chunks_created);
  CHECK(after.access_calls == stats.access_calls);
  CHECK(after.capacity_bytes == stats.capacity_bytes);
  // Every range the growth told of was withdrawn again: both observers know what they knew before.
  CHECK(a->live == told);
  CHECK(b->live == told);
  CHECK(a->violations == 0);
  CHECK(b->violations == 0);
  // The second observer heard nothing if the first refused.
  if (first_refuses) CHECK(b->events.size() == 2);

  // The same growth succeeds once no one refuses, and both see its chunks.
  refusing.throw_at = 0;
  buffer.append(more);
  CHECK(buffer.size() == first.size() + more.size());
  CHECK(a->live == chunks_of(buffer.storage()));
  CHECK(b->live == chunks_of(buffer.storage()));
}

TEST_CASE("a backend failure at any call of a growth tells observers of nothing it did not keep", "[observers]") {
  auto const map_ahead = GENERATE(MapAhead::off, MapAhead::on);
  auto const failure = GENERATE(FaultInjectingBackend::Failure::error, FaultInjectingBackend::Failure::out_of_memory);
  CAPTURE(map_ahead == MapAhead::on, failure == FaultInjectingBackend::Failure::out_of_memory);
  HostBackend real(small_granules());
  bool fired = true;
  for (std::size_t k = 1; fired; ++k) {
    CAPTURE(k);
    FaultInjectingBackend faulty(real);
    auto recorder = std::make_shared<Recorder>();
    {
      // Off: chunks of two granules, so a growth maps several. On: chunks up to 16 granules, the
      // hide size, below which steps are prepared ahead (two of them here, at 2 and 8 granules).
      HostGrowableBuffer<std::uint64_t> buffer(faulty, options((map_ahead == MapAhead::on ? 16 : 2) * granule, map_ahead));
      buffer.add_observer(recorder);
      std::vector<std::uint64_t> const words = random_words(24 * granule / 8, 5);
      std::size_t appended = 0;
      faulty.fail_nth(k, {}, failure);
      for (std::size_t piece : {granule / 8, granule / 8, 3 * granule / 8, 7 * granule / 8, 12 * granule / 8}) {
        try {
          buffer.append(std::span<const std::uint64_t>(words.data() + appended, piece));
          appended += piece;
        } catch (const Error&) {
        } catch (const OutOfMemory&) {
        }
        CHECK(recorder->live == chunks_of(buffer.storage()));  // after every append, failed or not
        CHECK(recorder->live_bytes() == buffer.storage().capacity());
      }
      buffer.storage().settle_step_ahead();
      fired = faulty.fired();
      if (!fired) CHECK(buffer.stats().prepared_used == (map_ahead == MapAhead::on ? 2U : 0U));  // the run without a failure
      faulty.disarm();
      CHECK(contents(buffer) == std::vector<std::uint64_t>(words.begin(), words.begin() + appended));
      buffer.resize(granule / 8);
      buffer.shrink_to_fit();
      CHECK(recorder->live == chunks_of(buffer.storage()));
    }
    CHECK(recorder->live.empty());
    CHECK(recorder->violations == 0);
    CHECK(real.live_counts() == LiveCounts{});
  }
}

TEST_CASE("a step prepared ahead is reported when a growth takes it, and never if it is given back", "[observers]") {
  HostBackend real(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(real, options(16 * granule, MapAhead::on));
  auto recorder = std::make_shared<Recorder>();
  buffer.add_observer(recorder);
  buffer.append(random_words(granule / 8, 6));
  buffer.append(random_words(granule / 8, 7));  // the second growth step hands the next to the mapping thread
  buffer.storage().settle_step_ahead();
  REQUIRE(buffer.stats().bytes_prepared == 2 * granule);
  CHECK(recorder->live_bytes() == buffer.storage().capacity());  // the prepared step is not told
  CHECK(recorder->events.size() == 2);

  buffer.append(random_words(3 * granule / 8, 8));  // takes the prepared step, and maps one more chunk
  CHECK(buffer.stats().prepared_used == 1);
  CHECK(recorder->live == chunks_of(buffer.storage()));
  REQUIRE(recorder->events.size() == 4);
  CHECK(recorder->events[2].range.bytes == 2 * granule);  // the prepared step, told now
  CHECK(recorder->events[2].range.offset == 2 * granule);
  CHECK(recorder->events[3].range.bytes == 4 * granule);

  buffer.storage().settle_step_ahead();
  REQUIRE(buffer.stats().bytes_prepared != 0);
  buffer.shrink_to_fit();  // gives the new prepared step back: nothing to withdraw for it
  CHECK(buffer.stats().prepared_discarded == 1);
  CHECK(recorder->events.size() == 4);
  CHECK(recorder->live == chunks_of(buffer.storage()));
  CHECK(recorder->violations == 0);
}

TEST_CASE("attaching tells of the chunks mapped now, detaching withdraws them, and bad attachments are refused", "[observers]") {
  HostBackend real(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(real, options(granule));
  buffer.append(random_words(3 * granule / 8, 9));
  auto recorder = std::make_shared<Recorder>();
  recorder->write_poison = false;  // the buffer's contents stay
  buffer.add_observer(recorder);
  CHECK(recorder->live == chunks_of(buffer.storage()));
  CHECK(buffer.storage().observer_count() == 1);

  CHECK_THROWS_AS(buffer.add_observer(recorder), Error);  // attached already
  CHECK_THROWS_AS(buffer.add_observer(nullptr), Error);
  CHECK(buffer.storage().observer_count() == 1);

  // One that refuses the second chunk is not attached, and the first chunk is withdrawn from it.
  auto refusing = std::make_shared<Recorder>();
  refusing->throw_at = 2;
  refusing->write_poison = false;
  CHECK_THROWS_AS(buffer.add_observer(refusing), std::runtime_error);
  CHECK(buffer.storage().observer_count() == 1);
  REQUIRE(refusing->events.size() == 2);
  CHECK(refusing->events[1].range == refusing->events[0].range);
  CHECK_FALSE(refusing->events[1].mapped);
  CHECK(refusing->live.empty());

  CHECK(buffer.remove_observer(*recorder));
  CHECK_FALSE(buffer.remove_observer(*recorder));
  CHECK(recorder->live.empty());
  REQUIRE(recorder->events.size() == 6);
  CHECK(recorder->events[3].range.offset == 2 * granule);  // last first
  CHECK(recorder->violations == 0);
  CHECK(buffer.storage().chunk_count() == 3);  // nothing was unmapped
  CHECK(buffer.size() == 3 * granule / 8);
}

TEST_CASE("observers move with the buffer and are withdrawn from by the buffer that is assigned over", "[observers]") {
  HostBackend real(small_granules());
  HostGrowableBuffer<std::uint64_t> a(real, options(granule));
  HostGrowableBuffer<std::uint64_t> b(real, options(granule));
  auto of_a = std::make_shared<Recorder>();
  auto of_b = std::make_shared<Recorder>();
  a.add_observer(of_a);
  b.add_observer(of_b);
  a.append(random_words(2 * granule / 8, 10));
  b.append(random_words(3 * granule / 8, 11));
  std::vector<BackedRange> const b_chunks = chunks_of(b.storage());

  a = std::move(b);
  CHECK(of_a->live.empty());           // a's chunks went, and of_a with them
  CHECK(of_b->live == b_chunks);       // b's chunks are a's now, still told
  CHECK(a.storage().observer_count() == 1);
  a.append(random_words(granule / 8, 12));
  CHECK(of_b->live == chunks_of(a.storage()));
  CHECK(of_a->events.size() == 4);     // 2 told, 2 withdrawn, nothing since
  a = HostGrowableBuffer<std::uint64_t>();
  CHECK(of_b->live.empty());
  CHECK(of_a->violations + of_b->violations == 0);
}

TEST_CASE("the chunk properties for NCCL and RDMA reach the backend from GrowableOptions", "[observers][interop]") {
  HostBackend real(small_granules());
  PropertiesBackend backend(real);
  GrowableOptions o = options(8 * granule);
  o.shareable = HandleType::posix_fd;
  o.gpu_direct_rdma = true;
  o.granularity = GranularityKind::recommended;
  o.access = {{0, Access::read_write}, {1, Access::read_write}};  // a peer that holds no chunk
  HostGrowableBuffer<std::uint64_t> buffer(backend, o);
  CHECK(buffer.storage().granularity() == 4 * granule);
  buffer.resize(9 * granule / 8);
  REQUIRE(backend.asked.size() == buffer.storage().chunk_count());
  for (const ChunkProperties& p : backend.asked) {
    CHECK(p == ChunkProperties{.device = 0, .shareable = HandleType::posix_fd, .compression = false, .gpu_direct_rdma = true});
  }
  for (const PhysicalChunk& chunk : buffer.storage().chunks()) CHECK(chunk.size() % (4 * granule) == 0);
  CHECK(buffer.capacity() * 8 == 16 * granule);  // 9 granules: two chunks of 8, the cap, whole recommended units
}

namespace {

ArenaOptions small_arena() {
  ArenaOptions o;
  o.address_space_bytes = 256 * granule;
  o.large_page_bytes = 4 * granule;  // requests of 4 pages or more take large pages
  return o;
}

/// The pages told are disjoint, inside the arena's range, and as many bytes as the arena maps now.
bool pages_agree(const Recorder& r, const Arena& arena) {
  std::vector<BackedRange> pages = r.live;
  std::sort(pages.begin(), pages.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  for (std::size_t i = 1; i < pages.size(); ++i) {
    if (pages[i - 1].address + pages[i - 1].bytes > pages[i].address) return false;
  }
  return r.live_bytes() == arena.stats().bytes_mapped.current;
}

}  // namespace

TEST_CASE("the arena tells observers of each page it maps and withdraws it before it leaves its addresses", "[observers][arena]") {
  HostBackend host(small_granules());
  auto recorder = std::make_shared<Recorder>();
  {
    Arena arena(host, small_arena());
    void* early = arena.allocate(2 * granule);
    arena.add_observer(recorder);  // told of the pages mapped already
    REQUIRE(recorder->live.size() == 2);
    CHECK(pages_agree(*recorder, arena));
    std::vector<std::pair<void*, std::size_t>> live;
    for (std::size_t pages : {1, 5, 9, 3, 12}) {
      live.emplace_back(arena.allocate(pages * granule), pages * granule);
      CHECK(pages_agree(*recorder, arena));
    }
    live.emplace_back(arena.allocate(100), 100);  // a slab page
    CHECK(pages_agree(*recorder, arena));
    for (std::size_t i = 0; i < live.size(); i += 2) arena.deallocate(live[i].first, live[i].second);
    void* big = arena.allocate(20 * granule);  // cached pages may move to a new run
    CHECK(pages_agree(*recorder, arena));
    arena.trim();
    CHECK(pages_agree(*recorder, arena));
    arena.deallocate(big, 20 * granule);
    arena.trim();
    CHECK(pages_agree(*recorder, arena));
    CHECK(recorder->violations == 0);
    (void)early;  // still live: its pages are withdrawn by the arena's destruction
  }
  CHECK(recorder->live.empty());
  CHECK(recorder->violations == 0);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("an observer that throws fails the arena's allocation, which gives back what it made", "[observers][arena]") {
  std::size_t const k = GENERATE(range<std::size_t>(1, 4));
  CAPTURE(k);
  HostBackend host(small_granules());
  Arena arena(host, small_arena());
  auto a = std::make_shared<Recorder>();
  auto b = std::make_shared<Recorder>();
  arena.add_observer(a);
  arena.add_observer(b);
  void* first = arena.allocate(3 * granule);
  ArenaStats const before = arena.stats();
  b->throw_at = b->mapped_calls + k;  // the request maps 3 large pages (the last one's tail is lent)
  CHECK_THROWS_AS((void)arena.allocate(9 * granule), std::runtime_error);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.allocations.current == before.allocations.current);
  CHECK(after.bytes_physical.current <= before.bytes_physical.current);
  CHECK(after.bytes_physical.current == host.live_counts().bytes_physical);
  CHECK(pages_agree(*a, arena));
  CHECK(pages_agree(*b, arena));
  CHECK(a->violations + b->violations == 0);
  b->throw_at = 0;
  void* second = arena.allocate(9 * granule);
  CHECK(pages_agree(*a, arena));
  arena.deallocate(second, 9 * granule);
  arena.deallocate(first, 3 * granule);
}

TEST_CASE("a backend failure at any call of the arena tells observers of nothing it did not keep", "[observers][arena]") {
  HostBackend host(small_granules());
  bool fired = true;
  for (std::size_t k = 1; fired; ++k) {
    CAPTURE(k);
    auto recorder = std::make_shared<Recorder>();
    {
      FaultInjectingBackend faulty(host);
      Arena arena(faulty, small_arena());
      arena.add_observer(recorder);
      faulty.fail_nth(k);
      std::vector<std::pair<void*, std::size_t>> live;
      for (std::size_t pages : {1, 6, 2, 9, 4}) {
        try {
          live.emplace_back(arena.allocate(pages * granule), pages * granule);
        } catch (const std::exception&) {
        }
        CHECK(pages_agree(*recorder, arena));
        if (live.size() == 3) {
          arena.deallocate(live[1].first, live[1].second);
          live.erase(live.begin() + 1);
        }
      }
      fired = faulty.fired();
      faulty.disarm();
      for (auto const& [p, bytes] : live) arena.deallocate(p, bytes);
      arena.trim();
      CHECK(pages_agree(*recorder, arena));
    }
    CHECK(recorder->live.empty());
    CHECK(recorder->violations == 0);
  }
}

TEST_CASE("the chunk properties for NCCL and RDMA reach the backend from ArenaOptions", "[observers][interop][arena]") {
  HostBackend real(small_granules());
  PropertiesBackend backend(real);
  ArenaOptions o = small_arena();
  o.shareable = HandleType::posix_fd;
  o.gpu_direct_rdma = true;
  Arena arena(backend, o);
  void* p = arena.allocate(6 * granule);
  REQUIRE_FALSE(backend.asked.empty());
  for (const ChunkProperties& props : backend.asked) {
    CHECK(props == ChunkProperties{.device = 0, .shareable = HandleType::posix_fd, .compression = false, .gpu_direct_rdma = true});
  }
  arena.deallocate(p, 6 * granule);
}
