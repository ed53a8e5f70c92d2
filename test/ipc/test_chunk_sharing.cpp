// Sharing one chunk as a POSIX fd, at the handle level (PhysicalChunk::export_posix_fd and
// PhysicalChunk::import_posix_fd) on the host backend: the same memory seen through both, the
// memory outliving the exporter's chunk, and imports that fail at every backend call leaking
// nothing (open fds from /proc/self/fd, the real backend's live objects).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::AddressRange;
using cuvmm::ChunkProperties;
using cuvmm::FaultInjectingBackend;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::Mapping;
using cuvmm::PhysicalChunk;
using cuvmm::UniqueFd;
using cuvmm::test::open_fd_count;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::thrown_by;
using cuvmm::test::write_bytes;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr ChunkProperties shareable{0, HandleType::posix_fd, false};

}  // namespace

TEST_CASE("a chunk exported as a UniqueFd and imported from it maps the same memory", "[ipc][chunk]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    AddressRange range(host, 6 * G);
    PhysicalChunk const exported(host, 3 * G, shareable);
    Mapping const original(range, 0, exported, read_write);
    auto const data = random_bytes(3 * G, 101);
    write_bytes(original.address(), data);

    UniqueFd fd = exported.export_posix_fd();
    REQUIRE(fd.valid());
    CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
    PhysicalChunk const imported = PhysicalChunk::import_posix_fd(host, fd.get(), 3 * G);
    fd.reset();  // the import holds its own descriptor
    CHECK(imported.imported());
    CHECK_FALSE(exported.imported());
    CHECK(imported.size() == 3 * G);
    CHECK(imported.shareable() == HandleType::posix_fd);
    CHECK(imported.handle() != exported.handle());

    Mapping const view(range, 3 * G, imported, read_write);
    CHECK(read_bytes(view.address(), 3 * G) == data);
    auto const reply = random_bytes(G, 102);
    write_bytes(view.address() + G, reply);
    CHECK(read_bytes(original.address() + G, G) == reply);
    CHECK(host.live_counts() == LiveCounts{1, 2, 2, 6 * G, 6 * G, 6 * G});
    CHECK(open_fd_count() == fd_baseline + 2);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("imported memory stays valid after the exporting chunk is released", "[ipc][chunk]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    AddressRange range(host, 2 * G);
    auto const data = random_bytes(2 * G, 103);
    PhysicalChunk imported;
    {
      AddressRange exporter_range(host, 2 * G);
      PhysicalChunk exported(host, 2 * G, shareable);
      Mapping const original(exporter_range, 0, exported, read_write);
      write_bytes(original.address(), data);
      imported = PhysicalChunk::import_posix_fd(host, exported.export_posix_fd().get(), 2 * G);
    }  // the exporter's mapping, chunk and range are gone
    CHECK(host.live_counts() == LiveCounts{1, 1, 0, 2 * G, 2 * G, 0});
    Mapping const view(range, 0, imported, read_write);
    CHECK(read_bytes(view.address(), 2 * G) == data);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("an import of the wrong size, or of a chunk made without posix_fd, is refused and leaks nothing",
          "[ipc][chunk]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  {
    PhysicalChunk const exported(host, 2 * G, shareable);
    UniqueFd const fd = exported.export_posix_fd();
    auto const wrong_size = thrown_by<cuvmm::Error>([&] { (void)PhysicalChunk::import_posix_fd(host, fd.get(), 4 * G); });
    CHECK_THAT(wrong_size.what(), ContainsSubstring("not the 262144 announced"));
    PhysicalChunk const private_chunk(host, 2 * G);
    auto const not_shareable = thrown_by<cuvmm::Error>([&] { (void)private_chunk.export_posix_fd(); });
    CHECK_THAT(not_shareable.what(), ContainsSubstring("not created shareable as a POSIX fd"));
    CHECK(host.live_counts().chunks == 2);
    CHECK(open_fd_count() == fd_baseline + 3);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("importing and mapping a chunk fails at every backend call without leaking", "[ipc][chunk][faults]") {
  HostBackend host(cuvmm::test::small_host_options());
  PhysicalChunk const exported(host, 2 * G, shareable);
  UniqueFd const fd = exported.export_posix_fd();
  AddressRange range(host, 2 * G);
  LiveCounts const live_baseline = host.live_counts();
  std::size_t const fd_baseline = open_fd_count();
  FaultInjectingBackend faulty(host);
  std::size_t k = 1;
  for (;; ++k) {
    CAPTURE(k);
    faulty.fail_nth(k);
    bool threw = false;
    try {
      PhysicalChunk const imported = PhysicalChunk::import_posix_fd(faulty, fd.get(), 2 * G);
      AddressRange faulty_range(faulty, 2 * G);
      Mapping const view(faulty_range, 0, imported, read_write);
    } catch (const cuvmm::Error& error) {
      threw = true;
      CHECK(error.context() == "injected fault");
    }
    CHECK(threw == faulty.fired());
    CHECK(host.live_counts() == live_baseline);
    CHECK(open_fd_count() == fd_baseline);
    if (!faulty.fired()) break;
  }
  // import, chunk_info, reserve, map, set_access: five calls, each failed once.
  CHECK(k == 6);
}
