// HostBackend on real virtual memory: protections read back from /proc/self/maps, data written and
// read through mappings, faults observed in child processes, leaks counted in /proc/self/fd and in
// the backend's own live tally.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>
#include <cuvmm/ring_buffer.hpp>

#include "backend/ledger.hpp"
#include "backend_battery.hpp"

#include "host_memory.hpp"
#include "observables.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::Address;
using cuvmm::ChunkHandle;
using cuvmm::ChunkProperties;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::test::open_fd_count;
using cuvmm::test::protection_at;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::run_in_child;
using cuvmm::test::thrown_by;
using cuvmm::test::write_bytes;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr AccessGrant read_only[] = {{0, Access::read}};
constexpr ChunkProperties shareable{0, HandleType::posix_fd, false};

HostBackend::Options options(std::size_t granularity, std::size_t physical_limit = 0) {
  HostBackend::Options o;
  o.granularity = granularity;
  o.physical_limit = physical_limit;
  return o;
}

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

/// Whether reading `address` faults (asked of the kernel: see host_memory.hpp).
bool read_faults(Address address) { return cuvmm::test::read_refused(address); }

/// Whether writing `address` faults; where it does not, 0x5A is written there.
bool write_faults(Address address) { return cuvmm::test::write_refused(address); }

}  // namespace

TEST_CASE("HostBackend serves host memory in units of the granularity it was given", "[host_backend]") {
  HostBackend const backend(options(G));
  CHECK(backend.name() == "host");
  CHECK(backend.space() == cuvmm::MemorySpace::host);
  CHECK(backend.granularity({}, cuvmm::GranularityKind::minimum) == G);
  CHECK(backend.granularity(shareable, cuvmm::GranularityKind::recommended) == G);
  CHECK(backend.options().granularity == G);
  CHECK(HostBackend().granularity({}, cuvmm::GranularityKind::minimum) == 2 * cuvmm::MiB);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("HostBackend refuses a granularity that is not a positive multiple of the page size",
          "[host_backend]") {
  for (std::size_t const bad : {std::size_t{0}, std::size_t{1000}, page_size() + 512, page_size() / 2}) {
    auto const error = thrown_by<cuvmm::Error>([&] { HostBackend const backend(options(bad)); });
    CHECK(error.call() == "HostBackend");
    CHECK_THAT(error.context(), ContainsSubstring("granularity " + std::to_string(bad)) &&
                                    ContainsSubstring("page size " + std::to_string(page_size())));
  }
}

TEST_CASE("reserve returns address space aligned to the granularity, with no access", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(8 * G, 0);
  CHECK(base % G == 0);
  CHECK(protection_at(base) == "---p");
  CHECK(protection_at(base + 8 * G - 1) == "---p");
  CHECK(backend.live_counts() == LiveCounts{1, 0, 0, 8 * G, 0, 0});
  CHECK(read_faults(base + 3 * G + 17));

  Address const aligned = backend.reserve(2 * G, cuvmm::MiB);
  CHECK(aligned % cuvmm::MiB == 0);
  Address const small_alignment = backend.reserve(G, 16);
  CHECK(small_alignment % G == 0);
  CHECK(backend.live_counts() == LiveCounts{3, 0, 0, 11 * G, 0, 0});

  backend.free_range(aligned, 2 * G);
  backend.free_range(small_alignment, G);
  backend.free_range(base, 8 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a granularity that is not a power of two still aligns ranges to it", "[host_backend]") {
  std::size_t const granularity = 3 * page_size();
  HostBackend backend(options(granularity));
  Address const base = backend.reserve(4 * granularity, 0);
  CHECK(base % granularity == 0);
  Address const both = backend.reserve(2 * granularity, 16 * page_size());
  CHECK(both % granularity == 0);
  CHECK(both % (16 * page_size()) == 0);
  backend.free_range(base, 4 * granularity);
  backend.free_range(both, 2 * granularity);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("data written through a read-write mapping reads back", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(4 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(2 * G, {});
  backend.map(base + G, 2 * G, chunk);
  CHECK(protection_at(base + G) == "---s");  // mapped, not yet accessible
  CHECK(backend.live_counts() == LiveCounts{1, 1, 1, 4 * G, 2 * G, 2 * G});

  backend.set_access(base + G, 2 * G, read_write);
  CHECK(protection_at(base + G) == "rw-s");
  CHECK(protection_at(base + 3 * G - 1) == "rw-s");
  CHECK(protection_at(base) == "---p");  // the neighbours are still only reserved
  CHECK(protection_at(base + 3 * G) == "---p");

  auto const data = random_bytes(2 * G, 1);
  write_bytes(base + G, data);
  CHECK(read_bytes(base + G, 2 * G) == data);

  backend.unmap(base + G, 2 * G);
  backend.release_chunk(chunk);
  backend.free_range(base, 4 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("mappings of one chunk at several addresses see each other's writes", "[host_backend]") {
  HostBackend backend(options(G));
  Address const first = backend.reserve(4 * G, 0);
  Address const second = backend.reserve(2 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(2 * G, {});
  backend.map(first, 2 * G, chunk);
  backend.map(first + 2 * G, 2 * G, chunk);  // twice in one range, side by side
  backend.map(second, 2 * G, chunk);         // and once in another range
  backend.set_access(first, 4 * G, read_write);
  backend.set_access(second, 2 * G, read_write);
  CHECK(backend.live_counts() == LiveCounts{2, 1, 3, 6 * G, 2 * G, 6 * G});

  auto const data = random_bytes(2 * G, 2);
  write_bytes(first, data);
  CHECK(read_bytes(first + 2 * G, 2 * G) == data);
  CHECK(read_bytes(second, 2 * G) == data);

  auto const more = random_bytes(2 * G, 3);
  write_bytes(second, more);
  CHECK(read_bytes(first, 2 * G) == more);
  CHECK(read_bytes(first + 2 * G, 2 * G) == more);

  backend.unmap(first, 4 * G);  // one call may unmap a run of whole mappings
  backend.unmap(second, 2 * G);
  backend.release_chunk(chunk);
  backend.free_range(first, 4 * G);
  backend.free_range(second, 2 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("an exported fd, mapped with plain mmap, shows the chunk's bytes", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  Address const base = backend.reserve(2 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(2 * G, shareable);
  backend.map(base, 2 * G, chunk);
  backend.set_access(base, 2 * G, read_write);
  auto const data = random_bytes(2 * G, 4);
  write_bytes(base, data);
  {
    cuvmm::UniqueFd const exported = backend.export_posix_fd(chunk);
    REQUIRE(exported.valid());
    CHECK(exported.get() != static_cast<int>(chunk.value));
    CHECK((::fcntl(exported.get(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
    CHECK(open_fd_count() == fd_baseline + 2);  // the chunk's memfd and the export

    void* const plain = ::mmap(nullptr, 2 * G, PROT_READ | PROT_WRITE, MAP_SHARED, exported.get(), 0);
    REQUIRE(plain != MAP_FAILED);
    Address const view = reinterpret_cast<Address>(plain);
    CHECK(read_bytes(view, 2 * G) == data);
    auto const more = random_bytes(G, 5);
    write_bytes(view + G, more);
    CHECK(read_bytes(base + G, G) == more);
    ::munmap(plain, 2 * G);
  }
  CHECK(open_fd_count() == fd_baseline + 1);
  backend.unmap(base, 2 * G);
  backend.release_chunk(chunk);
  backend.free_range(base, 2 * G);
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("importing an exported fd gives a chunk that maps the same memory", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  Address const base = backend.reserve(4 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(2 * G, shareable);
  backend.map(base, 2 * G, chunk);
  backend.set_access(base, 2 * G, read_write);
  auto const data = random_bytes(2 * G, 6);
  write_bytes(base, data);

  cuvmm::UniqueFd exported = backend.export_posix_fd(chunk);
  ChunkHandle const imported = backend.import_posix_fd(exported.get(), 2 * G);
  CHECK(imported != chunk);
  CHECK(::fcntl(exported.get(), F_GETFD) != -1);  // the caller's fd is not consumed
  cuvmm::ChunkInfo const info = backend.chunk_info(imported);
  CHECK(info.size == 2 * G);
  CHECK(info.shareable == HandleType::posix_fd);
  CHECK_FALSE(info.compression_granted);
  exported.reset();
  CHECK(open_fd_count() == fd_baseline + 2);  // the two chunks' own descriptors

  backend.map(base + 2 * G, 2 * G, imported);
  backend.set_access(base + 2 * G, 2 * G, read_write);
  CHECK(read_bytes(base + 2 * G, 2 * G) == data);
  auto const more = random_bytes(2 * G, 7);
  write_bytes(base + 2 * G, more);
  CHECK(read_bytes(base, 2 * G) == more);
  CHECK(backend.live_counts() == LiveCounts{1, 2, 2, 4 * G, 4 * G, 4 * G});

  backend.unmap(base, 4 * G);
  backend.release_chunk(imported);
  backend.release_chunk(chunk);
  backend.free_range(base, 4 * G);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a read-only mapping allows reads and refuses writes", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(G, 0);
  ChunkHandle const chunk = backend.create_chunk(G, {});
  backend.map(base, G, chunk);
  backend.set_access(base, G, read_write);
  auto const data = random_bytes(G, 8);
  write_bytes(base, data);

  // The control: with write access the write succeeds.
  CHECK_FALSE(write_faults(base + 100));
  CHECK(cuvmm::test::touch_read(base + 100) == 0x5A);
  write_bytes(base, data);

  backend.set_access(base, G, read_only);
  CHECK(protection_at(base) == "r--s");
  CHECK(read_bytes(base, G) == data);
  CHECK(write_faults(base + 100));
  CHECK(read_bytes(base, G) == data);  // the refused write changed nothing

  constexpr AccessGrant no_access[] = {{0, Access::none}};
  backend.set_access(base, G, no_access);
  CHECK(protection_at(base) == "---s");
  CHECK(read_faults(base));

  backend.unmap(base, G);
  backend.release_chunk(chunk);
  backend.free_range(base, G);
}

TEST_CASE("set_access applies the most permissive of the grants it is given", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(G, 0);
  ChunkHandle const chunk = backend.create_chunk(G, {});
  backend.map(base, G, chunk);

  constexpr AccessGrant mixed[] = {{0, Access::read}, {1, Access::read_write}, {2, Access::none}};
  backend.set_access(base, G, mixed);
  CHECK(protection_at(base) == "rw-s");
  constexpr AccessGrant reader_elsewhere[] = {{0, Access::none}, {5, Access::read}};
  backend.set_access(base, G, reader_elsewhere);
  CHECK(protection_at(base) == "r--s");
  constexpr AccessGrant nobody[] = {{3, Access::none}};
  backend.set_access(base, G, nobody);
  CHECK(protection_at(base) == "---s");

  backend.unmap(base, G);
  backend.release_chunk(chunk);
  backend.free_range(base, G);
}

TEST_CASE("reserved memory faults until mapped, and unmapping leaves the span reserved", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(4 * G, 0);
  CHECK(read_faults(base + G));

  ChunkHandle const chunk = backend.create_chunk(G, {});
  backend.map(base + G, G, chunk);
  backend.set_access(base + G, G, read_write);
  auto const data = random_bytes(G, 9);
  write_bytes(base + G, data);

  backend.unmap(base + G, G);
  CHECK(protection_at(base + G) == "---p");  // reserved again, not a hole
  CHECK(read_faults(base + G));
  CHECK(backend.live_counts() == LiveCounts{1, 1, 0, 4 * G, G, 0});

  // The same address takes a mapping again; the chunk kept its data while unmapped.
  ChunkHandle const other = backend.create_chunk(G, {});
  backend.map(base + G, G, other);
  backend.map(base + 3 * G, G, chunk);
  backend.set_access(base + G, G, read_write);
  backend.set_access(base + 3 * G, G, read_write);
  CHECK(read_bytes(base + G, G) == std::vector<std::byte>(G, std::byte{0}));  // a fresh chunk
  CHECK(read_bytes(base + 3 * G, G) == data);

  backend.unmap(base + G, G);
  backend.unmap(base + 3 * G, G);
  backend.release_chunk(other);
  backend.release_chunk(chunk);
  backend.free_range(base, 4 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("map refuses anything but a whole chunk placed in a reserved, unmapped span", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(4 * G, 0);
  ChunkHandle const big = backend.create_chunk(2 * G, {});
  ChunkHandle const small = backend.create_chunk(G, {});
  backend.map(base, 2 * G, big);
  backend.set_access(base, 2 * G, read_write);
  auto const data = random_bytes(2 * G, 10);
  write_bytes(base, data);
  LiveCounts const before = backend.live_counts();

  auto const map_error = [&](Address address, std::size_t size, ChunkHandle chunk) {
    auto const error = thrown_by<cuvmm::Error>([&] { backend.map(address, size, chunk); });
    CHECK(error.call() == "cuMemMap");
    CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
    return error.context();
  };
  CHECK_THAT(map_error(base + 2 * G, G, big), ContainsSubstring("only whole chunks are mapped"));
  CHECK_THAT(map_error(base + 2 * G, 2 * G, small), ContainsSubstring("not the chunk's size"));
  CHECK_THAT(map_error(base + 2 * G + page_size(), G, small), ContainsSubstring("not a multiple of the granularity"));
  CHECK_THAT(map_error(base, G, small), ContainsSubstring("overlaps a chunk already mapped"));
  CHECK_THAT(map_error(base + G, G, small), ContainsSubstring("overlaps a chunk already mapped"));
  CHECK_THAT(map_error(base, 2 * G, big), ContainsSubstring("overlaps a chunk already mapped"));
  CHECK_THAT(map_error(base + 3 * G, 2 * G, big), ContainsSubstring("not inside a range reserved"));
  CHECK_THAT(map_error(base + 2 * G, G, ChunkHandle{987654}), ContainsSubstring("unknown chunk handle 987654"));

  Address const gone = backend.reserve(G, 0);
  backend.free_range(gone, G);
  CHECK_THAT(map_error(gone, G, small), ContainsSubstring("not inside a range reserved"));

  CHECK(backend.live_counts() == before);
  CHECK(protection_at(base + 2 * G) == "---p");
  CHECK(read_bytes(base, 2 * G) == data);  // the existing mapping was not disturbed

  backend.unmap(base, 2 * G);
  backend.release_chunk(big);
  backend.release_chunk(small);
  backend.free_range(base, 4 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("set_access covers only runs of whole mappings side by side", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(8 * G, 0);
  ChunkHandle const a = backend.create_chunk(G, {});
  ChunkHandle const b = backend.create_chunk(2 * G, {});
  backend.map(base, G, a);
  backend.map(base + G, 2 * G, b);  // [0, 3G) mapped by two chunks side by side; [3G, 8G) is not

  auto const access_error = [&](Address address, std::size_t size, std::span<const AccessGrant> grants) {
    auto const error = thrown_by<cuvmm::Error>([&] { backend.set_access(address, size, grants); });
    CHECK(error.call() == "cuMemSetAccess");
    return error.context();
  };
  CHECK_THAT(access_error(base + 4 * G, G, read_write), ContainsSubstring("not a run of whole mappings"));
  CHECK_THAT(access_error(base, 4 * G, read_write), ContainsSubstring("not a run of whole mappings"));
  CHECK_THAT(access_error(base + G, G, read_write), ContainsSubstring("not a run of whole mappings"));
  CHECK_THAT(access_error(base, 2 * G, read_write), ContainsSubstring("not a run of whole mappings"));
  CHECK_THAT(access_error(base, 0, read_write), ContainsSubstring("not a run of whole mappings"));
  CHECK_THAT(access_error(base, 3 * G, {}), ContainsSubstring("no access grant"));
  CHECK(protection_at(base) == "---s");
  CHECK(protection_at(base + G) == "---s");

  backend.set_access(base, 3 * G, read_write);  // one call over both mappings
  CHECK(protection_at(base) == "rw-s");
  CHECK(protection_at(base + 3 * G - 1) == "rw-s");
  CHECK(protection_at(base + 3 * G) == "---p");

  backend.unmap(base, 3 * G);
  backend.release_chunk(a);
  backend.release_chunk(b);
  backend.free_range(base, 8 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("reserve and create_chunk refuse sizes and alignments the driver would refuse", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  auto const reserve_error = [&](std::size_t size, std::size_t alignment) {
    auto const error = thrown_by<cuvmm::Error>([&] { (void)backend.reserve(size, alignment); });
    CHECK(error.call() == "cuMemAddressReserve");
    return error.context();
  };
  CHECK_THAT(reserve_error(0, 0), ContainsSubstring("size 0 is not a positive multiple of the granularity"));
  CHECK_THAT(reserve_error(G + page_size(), 0), ContainsSubstring("not a positive multiple"));
  CHECK_THAT(reserve_error(G, 3 * page_size()), ContainsSubstring("is not a power of two"));
  CHECK_THAT(reserve_error(SIZE_MAX / G * G, cuvmm::MiB), ContainsSubstring("overflows"));

  auto const create_error = [&](std::size_t size) {
    auto const error = thrown_by<cuvmm::Error>([&] { (void)backend.create_chunk(size, {}); });
    CHECK(error.call() == "cuMemCreate");
    return error.context();
  };
  CHECK_THAT(create_error(0), ContainsSubstring("size 0 is not a positive multiple"));
  CHECK_THAT(create_error(G / 2), ContainsSubstring("not a positive multiple"));
  CHECK_THAT(create_error(3 * G + page_size()), ContainsSubstring("not a positive multiple"));

  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("handles the backend does not know, or may not export, are refused", "[host_backend]") {
  HostBackend backend(options(G));
  ChunkHandle const private_chunk = backend.create_chunk(G, {});

  auto const info_error = thrown_by<cuvmm::Error>([&] { (void)backend.chunk_info(ChunkHandle{424242}); });
  CHECK(info_error.call() == "cuMemGetAllocationPropertiesFromHandle");
  CHECK_THAT(info_error.context(), ContainsSubstring("unknown chunk handle 424242"));

  auto const export_error = thrown_by<cuvmm::Error>([&] { (void)backend.export_posix_fd(private_chunk); });
  CHECK(export_error.call() == "cuMemExportToShareableHandle");
  CHECK_THAT(export_error.context(), ContainsSubstring("not created shareable as a POSIX fd"));

  auto const unknown_export = thrown_by<cuvmm::Error>([&] { (void)backend.export_posix_fd(ChunkHandle{std::uint64_t{1} << 40}); });
  CHECK_THAT(unknown_export.context(), ContainsSubstring("unknown chunk handle"));

  backend.release_chunk(private_chunk);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a host fabric handle is bytes that another process imports as the same memory", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  constexpr ChunkProperties fabric_shareable{0, HandleType::fabric, false};
  ChunkHandle const chunk = backend.create_chunk(2 * G, fabric_shareable);
  Address const base = backend.reserve(2 * G, 0);
  backend.map(base, 2 * G, chunk);
  backend.set_access(base, 2 * G, read_write);
  auto const data = random_bytes(2 * G, 61);
  write_bytes(base, data);
  cuvmm::FabricHandle const handle = backend.export_fabric(chunk);
  CHECK(std::memcmp(handle.data, "cuvmmhst", 8) == 0);

  // Another process (a forked child, with its own backend) opens it by pid and fd, and writes back.
  auto const more = random_bytes(G, 62);
  auto const child = run_in_child([&] {
    HostBackend other(options(G));
    ChunkHandle const imported = other.import_fabric(handle, 2 * G);
    if (other.chunk_info(imported).shareable != HandleType::fabric) ::_exit(3);
    Address const view = other.reserve(2 * G, 0);
    other.map(view, 2 * G, imported);
    other.set_access(view, 2 * G, read_write);
    if (read_bytes(view, 2 * G) != data) ::_exit(4);
    write_bytes(view + G, more);
    ::_exit(0);
  });
  CHECK(child.exit_code == 0);
  CHECK(read_bytes(base + G, G) == more);

  // Wrong size, forged bytes, a process that is gone: clear errors, nothing imported.
  auto const import_error = [&](const cuvmm::FabricHandle& h, std::size_t size) {
    auto const error = thrown_by<cuvmm::Error>([&] { (void)backend.import_fabric(h, size); });
    CHECK(error.call() == "cuMemImportFromShareableHandle");
    return std::string(error.what());
  };
  CHECK_THAT(import_error(handle, G), ContainsSubstring("the handle is of a 131072-byte chunk, not the 65536 announced"));
  cuvmm::FabricHandle forged = handle;
  forged.data[60] = std::byte{1};
  CHECK_THAT(import_error(forged, 2 * G), ContainsSubstring("not a host fabric handle"));
  CHECK_THAT(import_error(cuvmm::FabricHandle{}, 2 * G), ContainsSubstring("not a host fabric handle"));
  cuvmm::FabricHandle other_fd = handle;
  other_fd.data[16] = std::byte{0};  // fd 0 of this process: not the chunk
  other_fd.data[17] = std::byte{0};
  CHECK_THAT(import_error(other_fd, 2 * G), ContainsSubstring("no longer the exported chunk") ||
                                               ContainsSubstring("has no fd 0"));
  pid_t const gone = ::fork();  // a process that has exited and been reaped
  if (gone == 0) ::_exit(0);
  REQUIRE(gone > 0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  cuvmm::FabricHandle of_gone = handle;
  for (std::size_t i = 0; i < 4; ++i) of_gone.data[12 + i] = static_cast<std::byte>((static_cast<std::uint32_t>(gone) >> (8 * i)) & 0xFF);
  CHECK_THAT(import_error(of_gone, 2 * G), ContainsSubstring("process " + std::to_string(gone) + " does not exist"));

  auto const not_fabric = thrown_by<cuvmm::Error>([&] {
    ChunkHandle const posix_only = backend.create_chunk(G, shareable);
    struct Release {
      HostBackend& b;
      ChunkHandle c;
      ~Release() { b.release_chunk(c); }
    } release{backend, posix_only};
    (void)backend.export_fabric(posix_only);
  });
  CHECK_THAT(not_fabric.context(), ContainsSubstring("not created shareable as a fabric handle"));

  backend.unmap(base, 2 * G);
  backend.free_range(base, 2 * G);
  backend.release_chunk(chunk);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
  CHECK_THAT(import_error(handle, 2 * G), ContainsSubstring("has no fd") || ContainsSubstring("no longer the exported chunk"));
}

TEST_CASE("import_posix_fd accepts only read-write memfds sealed against shrinking, sized in whole granules",
          "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  auto const import_error = [&](int fd) {
    auto const error = thrown_by<cuvmm::Error>([&] { (void)backend.import_posix_fd(fd, 2 * G); });
    CHECK(error.call() == "cuMemImportFromShareableHandle");
    return error.context();
  };
  auto const import_error_sized = [&](int fd, std::size_t size) {
    auto const error = thrown_by<cuvmm::Error>([&] { (void)backend.import_posix_fd(fd, size); });
    CHECK(error.call() == "cuMemImportFromShareableHandle");
    return error.context();
  };

  CHECK_THAT(import_error(-1), ContainsSubstring("not a descriptor"));

  int pipe_ends[2] = {-1, -1};
  REQUIRE(::pipe2(pipe_ends, O_CLOEXEC) == 0);
  cuvmm::UniqueFd const pipe_read(pipe_ends[0]);
  cuvmm::UniqueFd const pipe_write(pipe_ends[1]);
  CHECK_THAT(import_error(pipe_read.get()), ContainsSubstring("not a memfd (not even a regular file)"));

  cuvmm::UniqueFd const odd(::memfd_create("odd-size", MFD_CLOEXEC));
  REQUIRE(::ftruncate(odd.get(), static_cast<off_t>(G + page_size())) == 0);
  CHECK_THAT(import_error(odd.get()), ContainsSubstring("file size " ) && ContainsSubstring("not a positive multiple"));

  cuvmm::UniqueFd const empty(::memfd_create("empty", MFD_CLOEXEC));
  CHECK_THAT(import_error(empty.get()), ContainsSubstring("file size 0"));

  cuvmm::UniqueFd const unsealed(::memfd_create("unsealed", MFD_CLOEXEC));
  REQUIRE(::ftruncate(unsealed.get(), static_cast<off_t>(2 * G)) == 0);
  CHECK_THAT(import_error(unsealed.get()), ContainsSubstring("not sealed against shrinking"));

  cuvmm::UniqueFd const sized(::memfd_create("sized", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  REQUIRE(::ftruncate(sized.get(), static_cast<off_t>(2 * G)) == 0);
  REQUIRE(::fcntl(sized.get(), F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  std::string const path = "/proc/self/fd/" + std::to_string(sized.get());
  cuvmm::UniqueFd const read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(read_only.valid());
  CHECK_THAT(import_error(read_only.get()), ContainsSubstring("not open for reading and writing"));

  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline + 7);  // only the descriptors this test opened itself

  // The size must be the one announced.
  CHECK_THAT(import_error_sized(sized.get(), G), ContainsSubstring("not the 65536 announced"));

  // A sealed memfd of whole granules is accepted, and importing it takes no ownership of it.
  ChunkHandle const chunk = backend.import_posix_fd(sized.get(), 2 * G);
  CHECK(backend.chunk_info(chunk).size == 2 * G);
  CHECK(open_fd_count() == fd_baseline + 8);
  backend.release_chunk(chunk);
  CHECK(::fcntl(sized.get(), F_GETFD) != -1);
  CHECK(open_fd_count() == fd_baseline + 7);
}

TEST_CASE("past the physical limit create_chunk throws OutOfMemory and leaks nothing", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G, 3 * G));
  CHECK(backend.memory_info(0).total == 3 * G);
  CHECK(backend.memory_info(0).free == 3 * G);

  ChunkHandle const first = backend.create_chunk(2 * G, shareable);
  CHECK(backend.memory_info(0).free == G);

  auto const oom = thrown_by<cuvmm::OutOfMemory>([&] { (void)backend.create_chunk(2 * G, {}); });
  CHECK(oom.call() == "cuMemCreate");
  CHECK(oom.cuvmm_code() == cuvmm::ErrorCode::out_of_memory);
  CHECK_THAT(oom.context(), ContainsSubstring(std::to_string(2 * G) + " of the " + std::to_string(3 * G)));
  CHECK(backend.live_counts() == LiveCounts{0, 1, 0, 0, 2 * G, 0});
  CHECK(open_fd_count() == fd_baseline + 1);

  auto const too_big = thrown_by<cuvmm::OutOfMemory>([&] { (void)backend.create_chunk(4 * G, {}); });
  CHECK(too_big.call() == "cuMemCreate");

  ChunkHandle const last = backend.create_chunk(G, {});  // exactly up to the limit
  CHECK(backend.memory_info(0).free == 0);

  // Importing allocates nothing, so the limit does not refuse it; the held bytes still count.
  cuvmm::UniqueFd const exported = backend.export_posix_fd(first);
  ChunkHandle const imported = backend.import_posix_fd(exported.get(), 2 * G);
  CHECK(backend.live_counts().bytes_physical == 5 * G);
  CHECK(backend.memory_info(0).free == 0);

  backend.release_chunk(imported);
  backend.release_chunk(first);
  CHECK(backend.memory_info(0).free == 2 * G);
  backend.release_chunk(last);
  CHECK(backend.memory_info(0).free == 3 * G);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline + 1);  // the export, still held by this test
}

TEST_CASE("without a physical limit, memory_info reports the machine's memory", "[host_backend]") {
  HostBackend const backend(options(G));
  struct sysinfo system {};
  REQUIRE(::sysinfo(&system) == 0);
  auto const info = backend.memory_info(0);
  CHECK(info.total == static_cast<std::size_t>(system.totalram) * system.mem_unit);
  CHECK(info.free > 0);
  CHECK(info.free <= info.total);
}

TEST_CASE("releasing in order (unmap, release, free) leaves nothing live and no fd open", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  constexpr std::size_t chunk_count = 12;
  Address const base = backend.reserve(64 * G, 0);
  std::vector<ChunkHandle> chunks;
  std::vector<Address> addresses;
  Address next = base;
  for (std::size_t i = 0; i < chunk_count; ++i) {
    std::size_t const size = (i % 3 + 1) * G;
    chunks.push_back(backend.create_chunk(size, i % 2 == 0 ? shareable : ChunkProperties{}));
    backend.map(next, size, chunks.back());
    addresses.push_back(next);
    next += size;
  }
  backend.set_access(base, next - base, read_write);
  auto const data = random_bytes(next - base, 11);
  write_bytes(base, data);
  CHECK(read_bytes(base, next - base) == data);
  CHECK(backend.live_counts() == LiveCounts{1, chunk_count, chunk_count, 64 * G, next - base, next - base});
  CHECK(open_fd_count() == fd_baseline + chunk_count);

  for (std::size_t i = 0; i < chunk_count; ++i) backend.unmap(addresses[i], backend.chunk_info(chunks[i]).size);
  for (ChunkHandle const chunk : chunks) backend.release_chunk(chunk);
  backend.free_range(base, 64 * G);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a chunk released while mapped stays valid until it is unmapped", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  Address const base = backend.reserve(2 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(2 * G, {});
  backend.map(base, 2 * G, chunk);
  backend.set_access(base, 2 * G, read_write);
  auto const data = random_bytes(2 * G, 12);
  write_bytes(base, data);

  backend.release_chunk(chunk);
  CHECK(backend.live_counts() == LiveCounts{1, 0, 1, 2 * G, 2 * G, 2 * G});
  CHECK(open_fd_count() == fd_baseline);  // the handle (memfd) is gone; the mapping holds the memory
  CHECK(read_bytes(base, 2 * G) == data);
  auto const more = random_bytes(G, 13);
  write_bytes(base + G, more);
  CHECK(read_bytes(base + G, G) == more);
  auto const stale = thrown_by<cuvmm::Error>([&] { (void)backend.chunk_info(chunk); });
  CHECK_THAT(stale.context(), ContainsSubstring("unknown chunk handle"));

  backend.unmap(base, 2 * G);
  CHECK(backend.live_counts() == LiveCounts{1, 0, 0, 2 * G, 0, 0});
  CHECK(protection_at(base) == "---p");
  backend.free_range(base, 2 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("free_range refuses a range that still has mappings", "[host_backend]") {
  HostBackend backend(options(G));
  Address const base = backend.reserve(4 * G, 0);
  ChunkHandle const chunk = backend.create_chunk(G, {});
  backend.map(base + 2 * G, G, chunk);
  backend.set_access(base + 2 * G, G, read_write);

  // free_range is noexcept: a debug build stops at an assertion, a release build ignores the call.
  // Either way it runs in a child, where the damage stays.
  auto const outcome = run_in_child([&] {
    backend.free_range(base, 4 * G);
    // (The child has its copy of the books and of the reservation; the mapping was not inherited.)
    bool const untouched = backend.live_counts() == LiveCounts{1, 1, 1, 4 * G, G, G} &&
                           protection_at(base + 2 * G) == "unmapped" && protection_at(base) == "---p";
    ::_exit(untouched ? 0 : 1);
  }, /*quiet=*/true);
#ifdef NDEBUG
  CHECK_FALSE(outcome.signaled);
  CHECK(outcome.exit_code == 0);
#else
  CHECK(outcome.signaled);
  CHECK(outcome.signal == SIGABRT);
#endif

  backend.unmap(base + 2 * G, G);
  backend.release_chunk(chunk);
  backend.free_range(base, 4 * G);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("concurrent threads keep the books exact", "[host_backend]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(options(G));
  constexpr int thread_count = 8;
  constexpr int rounds = 40;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int round = 0; round < rounds; ++round) {
          Address const base = backend.reserve(2 * G, 0);
          ChunkHandle const chunk = backend.create_chunk(G, shareable);
          backend.map(base + G, G, chunk);
          backend.set_access(base + G, G, read_write);
          auto const data = random_bytes(G, static_cast<std::uint64_t>(t * 1000 + round));
          write_bytes(base + G, data);
          if (read_bytes(base + G, G) != data) ++mismatches;
          backend.unmap(base + G, G);
          backend.release_chunk(chunk);
          backend.free_range(base, 2 * G);
        }
      } catch (...) {
        ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("the ledger refuses an unmap that cuts a mapping, and a free of a mapped range or of two ranges at once",
          "[host_backend][ledger]") {
  cuvmm::detail::BackendLedger ledger(G);
  ledger.add_range(16 * G, 2 * G);
  ledger.add_range(18 * G, 2 * G);
  ledger.add_chunk(ChunkHandle{7}, 2 * G);
  ledger.check_map(17 * G, 2 * G, ChunkHandle{7});  // across the boundary of the two ranges: allowed
  ledger.add_mapping(17 * G, 2 * G, ChunkHandle{7});
  CHECK(ledger.counts() == LiveCounts{2, 1, 1, 4 * G, 2 * G, 2 * G});

  CHECK(ledger.unmap_refusal(17 * G, G) != nullptr);      // cuts the mapping
  CHECK(ledger.unmap_refusal(16 * G, 3 * G) != nullptr);  // starts before it
  CHECK(ledger.free_range_refusal(16 * G, 2 * G) != nullptr);  // the mapping reaches into it
  CHECK(ledger.free_range_refusal(18 * G, 2 * G) != nullptr);
  CHECK(ledger.free_range_refusal(16 * G, 4 * G) != nullptr);  // two ranges at once
  CHECK(ledger.release_refusal(ChunkHandle{8}) != nullptr);
  CHECK(ledger.counts() == LiveCounts{2, 1, 1, 4 * G, 2 * G, 2 * G});

  CHECK(ledger.unmap_refusal(17 * G, 2 * G) == nullptr);
  ledger.remove_mappings(17 * G, 2 * G);
  CHECK(ledger.free_range_refusal(16 * G, 2 * G) == nullptr);
  CHECK(ledger.free_range_refusal(16 * G, 4 * G) != nullptr);  // still two ranges
  ledger.remove_range(16 * G);
  ledger.remove_range(18 * G);
  CHECK(ledger.release_refusal(ChunkHandle{7}) == nullptr);
  ledger.remove_chunk(ChunkHandle{7});
  CHECK(ledger.counts() == LiveCounts{});
}

// ---- the backend battery (test/battery/backend_battery.cpp) on HostBackend ----

namespace {

class HostBatteryBackend final : public cuvmm::test::BatteryBackend {
 public:
  cuvmm::Backend& backend() override { return host_; }
  const cuvmm::Backend& tally() override { return host_; }
  void fill(Address address, std::size_t bytes, std::uint8_t value) override {
    std::memset(reinterpret_cast<void*>(address), value, bytes);
  }
  std::vector<std::uint8_t> read(Address address, std::size_t bytes) override {
    std::vector<std::uint8_t> out(bytes);
    std::memcpy(out.data(), reinterpret_cast<const void*>(address), bytes);
    return out;
  }

 private:
  HostBackend host_{options(G)};
};

}  // namespace

std::unique_ptr<cuvmm::test::BatteryBackend> cuvmm::test::make_battery_backend() {
  return std::make_unique<HostBatteryBackend>();
}

// --- the machine's free memory ------------------------------------------------------------------

namespace {

/// Options with the test granularity and `available` bytes standing in for the machine's free memory.
HostBackend::Options with_available(std::size_t available) {
  HostBackend::Options o = options(G);
  o.available_memory = available;
  return o;
}

std::size_t mem_total_bytes() {
  struct sysinfo system {};
  REQUIRE(::sysinfo(&system) == 0);
  return static_cast<std::size_t>(system.totalram) * system.mem_unit;
}

}  // namespace

TEST_CASE("a chunk larger than the machine has free is refused with OutOfMemory before memory is taken",
          "[host_backend][oom]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend backend(with_available(4 * G));
  CHECK(backend.memory_info(0).free == 4 * G);
  ChunkHandle const first = backend.create_chunk(3 * G, {});
  CHECK(backend.memory_info(0).free == G);

  auto const oom = thrown_by<cuvmm::OutOfMemory>([&] { (void)backend.create_chunk(2 * G, {}); });
  CHECK(oom.call() == "cuMemCreate");
  CHECK(oom.is(cuvmm::ErrorCode::out_of_memory));
  CHECK_THAT(oom.context(), ContainsSubstring("the machine has " + std::to_string(G) + " bytes free") &&
                                ContainsSubstring("HostBackend::Options::available_memory"));
  CHECK(backend.live_counts() == LiveCounts{0, 1, 0, 0, 3 * G, 0});
  CHECK(open_fd_count() == fd_baseline + 1);

  ChunkHandle const last = backend.create_chunk(G, {});  // exactly what is free
  backend.release_chunk(first);
  ChunkHandle const again = backend.create_chunk(2 * G, {});  // what a release gave back is free again
  backend.release_chunk(last);
  backend.release_chunk(again);
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("host_available_memory_bytes reads at most the machine's memory, and a chunk past it is refused",
          "[host_backend][oom]") {
  std::size_t const available = cuvmm::host_available_memory_bytes();
  CAPTURE(available, mem_total_bytes());
  CHECK(available > 0);
  CHECK(available <= mem_total_bytes());

  // With the default options the machine's reading is the limit: twice the machine's memory is
  // refused by the check (fallocate would not refuse it; the OOM killer would act).
  HostBackend backend(options(G));
  std::size_t const too_much = cuvmm::round_up(2 * mem_total_bytes(), G);
  auto const oom = thrown_by<cuvmm::OutOfMemory>([&] { (void)backend.create_chunk(too_much, {}); });
  CHECK_THAT(oom.context(), ContainsSubstring("MemAvailable and the cgroup's memory limit"));
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(backend.memory_info(0).free <= backend.memory_info(0).total);
}

TEST_CASE("a default host ring of 2^40 three-byte elements is refused with OutOfMemory, not killed",
          "[host_backend][oom]") {
  using Triple = std::array<std::uint8_t, 3>;
  auto const oom = thrown_by<cuvmm::OutOfMemory>([] { cuvmm::HostRingBuffer<Triple> ring(std::size_t{1} << 40); });
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer keeps most of the address space for its shadow: reserving the ring's 3 TiB
  // range is refused first, before the memory check is reached. Either way: a typed error, no kill.
  CHECK((oom.call() == "cuMemCreate" || oom.call() == "mmap"));
#else
  CHECK(oom.call() == "cuMemCreate");  // refused by the memory check, not by the kernel
#endif
}

TEST_CASE("a host ring or growable buffer past the free memory throws OutOfMemory and changes nothing",
          "[host_backend][oom]") {
  HostBackend backend(with_available(4 * G));
  SECTION("a ring") {
    CHECK_THROWS_AS(cuvmm::HostRingBuffer<std::uint8_t>(backend, 5 * G), cuvmm::OutOfMemory);
    CHECK(backend.live_counts() == LiveCounts{});
    cuvmm::HostRingBuffer<std::uint8_t> const fits(backend, 4 * G);
    CHECK(fits.capacity() == 4 * G);
  }
  SECTION("a growable buffer") {
    cuvmm::GrowableOptions o;
    o.max_capacity_bytes = 64 * G;
    cuvmm::HostGrowableBuffer<std::uint32_t> buffer(backend, o);
    std::size_t const quarter = G / sizeof(std::uint32_t);
    for (std::uint32_t i = 0; i < 3 * quarter; ++i) buffer.push_back(i * 7 + 1);
    std::size_t const capacity = buffer.capacity();
    std::uint32_t const* const data = buffer.data();
    LiveCounts const before = backend.live_counts();
    CHECK(before.bytes_physical <= 4 * G);
    std::vector<std::uint32_t> more(8 * quarter, 0xABCD);
    CHECK_THROWS_AS(buffer.append_range(more), cuvmm::OutOfMemory);
    CHECK(buffer.size() == 3 * quarter);
    CHECK(buffer.capacity() == capacity);
    CHECK(buffer.data() == data);
    CHECK(backend.live_counts() == before);
    bool intact = true;
    for (std::uint32_t i = 0; i < 3 * quarter; ++i) intact = intact && buffer[i] == i * 7 + 1;
    CHECK(intact);
  }
}

// --- fork ---------------------------------------------------------------------------------------

namespace {

/// Exit codes of the forked child below: what it found.
enum ForkFinding : int {
  child_ok = 0,
  child_saw_parent_block = 10,      // the parent's block is mapped in the child
  child_wrote_parent_block = 11,    // the child could read or write it
  child_allocated = 12,             // the inherited arena gave the child new memory
  child_grew = 13,                  // the inherited buffer grew in the child
  child_wrong_error = 14,           // refused, but not with Unsupported
  child_release_changed_books = 15  // a refused call changed the books
};

}  // namespace

TEST_CASE("host-backend memory is not inherited by a forked child, which cannot use the backend",
          "[host_backend][fork]") {
  HostBackend backend(options(G));
  cuvmm::ArenaOptions arena_options;
  arena_options.address_space_bytes = 256 * G;
  arena_options.large_page_bytes = 0;
  cuvmm::Arena arena(backend, arena_options);
  auto* const block = static_cast<std::uint8_t*>(arena.allocate(2 * G));
  Address const address = reinterpret_cast<Address>(block);
  std::vector<std::byte> const data = random_bytes(2 * G, 24);
  write_bytes(address, data);
  cuvmm::GrowableOptions o;
  o.max_capacity_bytes = 64 * G;
  cuvmm::HostGrowableBuffer<std::uint64_t> buffer(backend, o);
  buffer.resize(G / sizeof(std::uint64_t), 0x1122334455667788u);
  LiveCounts const books = backend.live_counts();

  auto const outcome = run_in_child([&] {
    if (protection_at(address) != "unmapped") ::_exit(child_saw_parent_block);
    if (!write_faults(address) || !read_faults(address)) ::_exit(child_wrote_parent_block);
    if (!write_faults(reinterpret_cast<Address>(buffer.data()))) ::_exit(child_wrote_parent_block);
    try {
      (void)arena.allocate(8 * G);  // needs new pages: create_chunk in the child
      ::_exit(child_allocated);
    } catch (const cuvmm::Unsupported&) {
    } catch (...) {
      ::_exit(child_wrong_error);
    }
    try {
      buffer.reserve(8 * G / sizeof(std::uint64_t));
      ::_exit(child_grew);
    } catch (const cuvmm::Unsupported& refused) {
      if (refused.call() != "cuMemCreate") ::_exit(child_wrong_error);
    } catch (...) {
      ::_exit(child_wrong_error);
    }
    if (backend.live_counts() != books) ::_exit(child_release_changed_books);
    ::_exit(child_ok);
  });
  CHECK_FALSE(outcome.signaled);
  CHECK(outcome.exit_code == child_ok);

  // The parent's block and buffer are as they were, and its next allocations are its own.
  CHECK(read_bytes(address, 2 * G) == data);
  CHECK(backend.live_counts() == books);
  bool intact = true;
  for (std::uint64_t const v : buffer) intact = intact && v == 0x1122334455667788u;
  CHECK(intact);
  auto* const next = static_cast<std::uint8_t*>(arena.allocate(8 * G));
  std::vector<std::byte> const more = random_bytes(8 * G, 25);
  write_bytes(reinterpret_cast<Address>(next), more);
  CHECK(read_bytes(reinterpret_cast<Address>(next), 8 * G) == more);
  CHECK(read_bytes(address, 2 * G) == data);
  buffer.reserve(8 * G / sizeof(std::uint64_t));
  CHECK(buffer.capacity() >= 8 * G / sizeof(std::uint64_t));
  arena.deallocate(next, 8 * G);
  arena.deallocate(block, 2 * G);
}

TEST_CASE("the backend refuses every acquiring call in a forked child with Unsupported", "[host_backend][fork]") {
  HostBackend backend(options(G));
  ChunkHandle const chunk = backend.create_chunk(G, shareable);
  Address const range = backend.reserve(4 * G, 0);
  auto const outcome = run_in_child([&] {
    int refused = 0;
    auto const expect_refusal = [&](auto&& call) {
      try {
        call();
      } catch (const cuvmm::Unsupported& e) {
        if (e.is(cuvmm::ErrorCode::unsupported) &&
            std::string(e.what()).find("not inherited across fork") != std::string::npos)
          ++refused;
      } catch (...) {
      }
    };
    expect_refusal([&] { (void)backend.reserve(G, 0); });
    expect_refusal([&] { (void)backend.create_chunk(G, {}); });
    expect_refusal([&] { backend.map(range, G, chunk); });
    expect_refusal([&] { (void)backend.export_posix_fd(chunk); });
    expect_refusal([&] { (void)backend.export_fabric(chunk); });
    expect_refusal([&] { (void)backend.chunk_info(chunk); });
    ::_exit(refused);
  });
  CHECK(outcome.exit_code == 6);
  backend.map(range, G, chunk);  // the parent is not affected
  backend.unmap(range, G);
  backend.free_range(range, 4 * G);
  backend.release_chunk(chunk);
  CHECK(backend.live_counts() == LiveCounts{});
}
