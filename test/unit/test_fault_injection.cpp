// FaultInjectingBackend, and invariant 2 of the design: a failure at any step leaks nothing.
// Leaks are counted on real things: the inner HostBackend's live objects and /proc/self/fd.
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/counting_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "backend_battery.hpp"
#include "host_memory.hpp"
#include "observables.hpp"
#include "recording_backend.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::AddressRange;
using cuvmm::Backend;
using cuvmm::BackendOp;
using cuvmm::ChunkProperties;
using cuvmm::FaultInjectingBackend;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::Mapping;
using cuvmm::PhysicalChunk;
using cuvmm::test::open_fd_count;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::thrown_by;
using cuvmm::test::write_bytes;
using Failure = FaultInjectingBackend::Failure;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr std::size_t chunk_granules[] = {1, 2, 1, 3};  // mapped side by side: 7 of the range's 8 granules

HostBackend::Options small_granules() {
  HostBackend::Options options;
  options.granularity = G;
  return options;
}

/// A range with chunks mapped side by side, accessible, one chunk exported. Members are declared
/// in the order the design asks for, so teardown runs mappings → chunks → range.
struct MappedRange {
  AddressRange range;
  std::vector<PhysicalChunk> chunks;
  std::vector<Mapping> mappings;
  cuvmm::UniqueFd exported;
};

MappedRange build_mapped_range(Backend& backend) {
  MappedRange built{AddressRange(backend, 8 * G), {}, {}, {}};
  built.chunks.reserve(std::size(chunk_granules));
  built.mappings.reserve(std::size(chunk_granules));
  std::size_t offset = 0;
  for (std::size_t i = 0; i < std::size(chunk_granules); ++i) {
    ChunkProperties const props{0, i % 2 == 0 ? HandleType::posix_fd : HandleType::none, false};
    built.chunks.emplace_back(backend, chunk_granules[i] * G, props);
    built.mappings.emplace_back(built.range, offset, built.chunks.back());
    offset += chunk_granules[i] * G;
  }
  cuvmm::set_access(built.mappings, read_write);  // one call: the mappings lie side by side
  built.exported = built.chunks[2].export_posix_fd();
  return built;
}

/// Writes random data over every mapped byte and reads it back, also through the exported fd's chunk.
bool mapped_range_works(const MappedRange& built) {
  std::size_t const mapped = 7 * G;
  auto const data = random_bytes(mapped, 31);
  write_bytes(built.range.base(), data);
  return read_bytes(built.range.base(), mapped) == data && built.exported.valid();
}

}  // namespace

TEST_CASE("building a mapped range makes the expected sequence of backend calls", "[fault_injection]") {
  HostBackend host(small_granules());
  cuvmm::test::RecordingBackend recording(host);
  {
    MappedRange const built = build_mapped_range(recording);
    CHECK(mapped_range_works(built));
    std::vector<BackendOp> expected{BackendOp::reserve};
    for (std::size_t i = 0; i < std::size(chunk_granules); ++i) {
      expected.insert(expected.end(), {BackendOp::create_chunk, BackendOp::chunk_info, BackendOp::map});
    }
    expected.insert(expected.end(), {BackendOp::set_access, BackendOp::export_posix_fd});
    CHECK(recording.operations() == expected);
  }
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("failing any one backend call while building a mapped range leaks nothing", "[fault_injection]") {
  Failure const failure = GENERATE(Failure::error, Failure::out_of_memory);
  CAPTURE(failure == Failure::error ? "error" : "out_of_memory");
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(small_granules());

  // The calls a successful build makes, in order: the k-th of them is the one that fails.
  std::vector<BackendOp> sequence;
  {
    cuvmm::test::RecordingBackend recording(host);
    MappedRange const built = build_mapped_range(recording);
    sequence = recording.operations();
  }
  REQUIRE(host.live_counts() == LiveCounts{});

  std::set<std::string> failed_calls;
  std::size_t k = 1;
  for (;; ++k) {
    CAPTURE(k);
    REQUIRE(k <= sequence.size() + 1);
    FaultInjectingBackend injector(host);
    injector.fail_nth(k, {}, failure);
    std::optional<std::string> failed_call;
    bool works = false;
    try {
      MappedRange const built = build_mapped_range(injector);
      works = mapped_range_works(built);
    } catch (const cuvmm::Error& error) {
      CHECK(failure == Failure::error);
      CHECK(error.context() == "injected fault");
      failed_call = error.call();
    } catch (const cuvmm::OutOfMemory& error) {
      CHECK(failure == Failure::out_of_memory);
      CHECK(error.context() == "injected fault");
      failed_call = error.call();
    }
    // The real tallies, after everything built before the failure was torn down.
    CHECK(host.live_counts() == LiveCounts{});
    INFO(cuvmm::test::describe_open_fds());
    CHECK(open_fd_count() == fd_baseline);

    if (!injector.fired()) {  // the build made fewer than k calls: every step has been failed once
      CHECK_FALSE(failed_call.has_value());
      CHECK(works);
      break;
    }
    REQUIRE(failed_call.has_value());
    CHECK(*failed_call == cuvmm::to_string(sequence[k - 1]));
    failed_calls.insert(*failed_call);
  }
  CHECK(k == sequence.size() + 1);
  CHECK(failed_calls ==
        std::set<std::string>{"reserve", "create_chunk", "chunk_info", "map", "set_access", "export_posix_fd"});
}

TEST_CASE("the injector counts every call of every operation, failed ones included", "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  CHECK(injector.total_calls() == 0);

  cuvmm::Address const base = injector.reserve(4 * G, 0);
  cuvmm::ChunkHandle const first = injector.create_chunk(G, {});
  cuvmm::ChunkHandle const second = injector.create_chunk(2 * G, {});
  injector.map(base, G, first);
  injector.map(base + G, 2 * G, second);
  injector.set_access(base, 3 * G, read_write);
  (void)injector.chunk_info(second);

  injector.fail_nth(1, {BackendOp::create_chunk});
  auto const error = thrown_by<cuvmm::Error>([&] { (void)injector.create_chunk(G, {}); });
  CHECK(error.call() == "create_chunk");
  CHECK(injector.fired());

  injector.unmap(base, 3 * G);
  injector.release_chunk(first);
  injector.release_chunk(second);
  injector.free_range(base, 4 * G);

  CHECK(injector.calls(BackendOp::reserve) == 1);
  CHECK(injector.calls(BackendOp::create_chunk) == 3);
  CHECK(injector.calls(BackendOp::map) == 2);
  CHECK(injector.calls(BackendOp::set_access) == 1);
  CHECK(injector.calls(BackendOp::chunk_info) == 1);
  CHECK(injector.calls(BackendOp::unmap) == 1);
  CHECK(injector.calls(BackendOp::release_chunk) == 2);
  CHECK(injector.calls(BackendOp::free_range) == 1);
  CHECK(injector.calls(BackendOp::export_posix_fd) == 0);
  CHECK(injector.total_calls() == 12);
  CHECK(host.live_counts() == LiveCounts{});
}

namespace {

/// A backend whose access grants take 2 ms and whose creates, once `fail_creates` is set, take 1 ms
/// and then fail: the time a CountingBackend above it adds up is known from below.
class SlowBackend final : public cuvmm::CountingBackend {
 public:
  using CountingBackend::CountingBackend;
  bool fail_creates = false;

 protected:
  void before_call(BackendOp op) const override {
    if (op == BackendOp::set_access) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (op == BackendOp::create_chunk && fail_creates) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      cuvmm::throw_out_of_memory("create_chunk", "a slow device, full");
    }
  }
};

}  // namespace

TEST_CASE("a counting backend adds up the time each operation spends in the backend below it, failed calls "
          "included",
          "[fault_injection]") {
  using std::chrono::milliseconds;
  HostBackend host(small_granules());
  SlowBackend slow(host);
  cuvmm::CountingBackend timed(static_cast<Backend&>(slow));
  cuvmm::Address const base = timed.reserve(2 * G, 0);
  cuvmm::ChunkHandle const chunk = timed.create_chunk(G, {});
  timed.map(base, G, chunk);
  timed.set_access(base, G, read_write);
  timed.set_access(base, G, read_write);
  slow.fail_creates = true;
  CHECK_THROWS_AS(timed.create_chunk(G, {}), cuvmm::OutOfMemory);
  CHECK(timed.time_in(BackendOp::set_access) >= milliseconds(4));
  CHECK(timed.time_in(BackendOp::create_chunk) >= milliseconds(1));  // the failed call's time too
  // The time below the hook is the inner call's alone: the slow backend's own total leaves its
  // sleeps out.
  CHECK(slow.time_in(BackendOp::set_access) < timed.time_in(BackendOp::set_access) - milliseconds(4));
  CHECK(timed.time_in(BackendOp::unmap) == std::chrono::nanoseconds(0));  // not called yet
  CHECK(timed.time_in(BackendOp::export_posix_fd) == std::chrono::nanoseconds(0));
  timed.unmap(base, G);
  timed.release_chunk(chunk);
  timed.free_range(base, 2 * G);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("fail_nth counts only the operations it targets, and the failing call never reaches the inner "
          "backend",
          "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  injector.fail_nth(2, {BackendOp::map});

  cuvmm::Address const base = injector.reserve(4 * G, 0);
  cuvmm::ChunkHandle const first = injector.create_chunk(G, {});
  cuvmm::ChunkHandle const second = injector.create_chunk(G, {});
  injector.map(base, G, first);  // the 1st map
  CHECK_FALSE(injector.fired());
  injector.set_access(base, G, read_write);
  auto const error = thrown_by<cuvmm::Error>([&] { injector.map(base + G, G, second); });  // the 2nd map
  CHECK(error.call() == "map");
  CHECK(error.context() == "injected fault");
  CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
  CHECK(error.is(cuvmm::ErrorCode::injected_fault));
  CHECK(injector.fired());
  CHECK(host.live_counts().mappings == 1);  // the failed map was not forwarded

  injector.map(base + G, G, second);  // a fault fires once
  CHECK(host.live_counts().mappings == 2);

  injector.unmap(base, 2 * G);
  injector.release_chunk(first);
  injector.release_chunk(second);
  injector.free_range(base, 4 * G);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("releasing operations are forwarded even while a failure is armed", "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  cuvmm::Address const base = injector.reserve(2 * G, 0);
  cuvmm::ChunkHandle const chunk = injector.create_chunk(G, {});
  injector.map(base, G, chunk);

  injector.fail_nth(1);  // every operation that can fail
  injector.unmap(base, G);
  injector.release_chunk(chunk);
  injector.free_range(base, 2 * G);
  CHECK_FALSE(injector.fired());
  CHECK(host.live_counts() == LiveCounts{});

  auto const error = thrown_by<cuvmm::Error>([&] { (void)injector.reserve(2 * G, 0); });
  CHECK(error.call() == "reserve");
  CHECK(injector.fired());
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("disarm stops an armed failure", "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  injector.fail_nth(1);
  injector.disarm();
  cuvmm::Address const base = injector.reserve(G, 0);
  cuvmm::ChunkHandle const chunk = injector.create_chunk(G, {});
  CHECK_FALSE(injector.fired());
  CHECK(host.live_counts() == LiveCounts{1, 1, 0, G, G, 0});
  injector.release_chunk(chunk);
  injector.free_range(base, G);
}

TEST_CASE("an injected out-of-memory failure is a std::bad_alloc that names the operation", "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  injector.fail_nth(1, {BackendOp::create_chunk}, Failure::out_of_memory);
  bool caught = false;
  try {
    (void)injector.create_chunk(G, {});
  } catch (const std::bad_alloc& error) {
    caught = true;
    auto const* oom = dynamic_cast<const cuvmm::OutOfMemory*>(&error);
    REQUIRE(oom != nullptr);
    CHECK(oom->call() == "create_chunk");
    CHECK(oom->context() == "injected fault");
    CHECK(oom->cuvmm_code() == cuvmm::ErrorCode::injected_fault);
    CHECK_THAT(error.what(), ContainsSubstring("create_chunk failed"));
  }
  CHECK(caught);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("fail_nth refuses k = 0 and operations that release", "[fault_injection]") {
  HostBackend host(small_granules());
  FaultInjectingBackend injector(host);
  auto const zero = thrown_by<cuvmm::Error>([&] { injector.fail_nth(0); });
  CHECK(zero.call() == "FaultInjectingBackend::fail_nth");
  for (BackendOp const op : {BackendOp::free_range, BackendOp::release_chunk, BackendOp::unmap}) {
    auto const error = thrown_by<cuvmm::Error>([&] { injector.fail_nth(1, {BackendOp::map, op}); });
    CHECK(error.call() == "FaultInjectingBackend::fail_nth");
    CHECK_THAT(error.context(), ContainsSubstring(std::string(cuvmm::to_string(op))));
  }
  cuvmm::Address const base = injector.reserve(G, 0);  // nothing was armed by the refused calls
  CHECK_FALSE(injector.fired());
  injector.free_range(base, G);
}

TEST_CASE("the injector forwards queries and errors of the inner backend unchanged", "[fault_injection]") {
  HostBackend::Options options = small_granules();
  options.physical_limit = 5 * G;
  HostBackend host(options);
  FaultInjectingBackend injector(host);
  CHECK(injector.name() == "fault-injecting");
  CHECK(&injector.inner() == &host);
  CHECK(injector.space() == cuvmm::MemorySpace::host);
  CHECK(injector.granularity({}, cuvmm::GranularityKind::recommended) == G);

  cuvmm::ChunkHandle const chunk = injector.create_chunk(2 * G, {0, HandleType::posix_fd, false});
  CHECK(injector.memory_info(0).free == 3 * G);
  CHECK(injector.memory_info(0).total == 5 * G);
  CHECK(injector.live_counts() == host.live_counts());

  auto const fabric = thrown_by<cuvmm::Error>([&] { (void)injector.export_fabric(chunk); });  // not fabric-shareable
  CHECK(fabric.call() == "cuMemExportToShareableHandle");
  auto const oom = thrown_by<cuvmm::OutOfMemory>([&] { (void)injector.create_chunk(4 * G, {}); });
  CHECK(oom.call() == "cuMemCreate");
  CHECK(injector.calls(BackendOp::export_fabric) == 1);
  CHECK(injector.calls(BackendOp::create_chunk) == 2);

  cuvmm::UniqueFd const fd = injector.export_posix_fd(chunk);
  cuvmm::ChunkHandle const imported = injector.import_posix_fd(fd.get(), injector.chunk_info(chunk).size);
  CHECK(injector.calls(BackendOp::import_posix_fd) == 1);
  injector.release_chunk(imported);
  injector.release_chunk(chunk);
  CHECK(host.live_counts() == LiveCounts{});
}

// ---- the backend battery (test/battery/backend_battery.cpp) on a never-armed FaultInjectingBackend
// over a HostBackend: the wrapper must forward every call, result and refusal unchanged ----

namespace {

class FaultInjectingBatteryBackend final : public cuvmm::test::BatteryBackend {
 public:
  cuvmm::Backend& backend() override { return injector_; }
  const cuvmm::Backend& tally() override { return host_; }
  void fill(cuvmm::Address address, std::size_t bytes, std::uint8_t value) override {
    std::memset(reinterpret_cast<void*>(address), value, bytes);
  }
  std::vector<std::uint8_t> read(cuvmm::Address address, std::size_t bytes) override {
    std::vector<std::uint8_t> out(bytes);
    std::memcpy(out.data(), reinterpret_cast<const void*>(address), bytes);
    return out;
  }

 private:
  HostBackend host_{cuvmm::test::small_host_options()};
  FaultInjectingBackend injector_{host_};
};

}  // namespace

std::unique_ptr<cuvmm::test::BatteryBackend> cuvmm::test::make_battery_backend() {
  return std::make_unique<FaultInjectingBatteryBackend>();
}
