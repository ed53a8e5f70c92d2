// Two MPI ranks (mpirun -n 2) exchange chunks as fabric handles, for real, on the host backend:
// rank 0 grows a fabric-shareable buffer and sends its hello, chunks and size; rank 1 reserves one
// range of the announced capacity, imports each chunk at its offset, verifies the random data and
// writes back. Then rank 0 sends truncated, oversized and forged messages, and rank 1 refuses each
// with a clear error and leaks nothing. Run without mpirun (one rank), every case skips.
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/ipc/mpi.hpp>
#include <cuvmm/mapping.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::ipc::Message;
using cuvmm::ipc::MessageKind;
using cuvmm::test::open_fd_count;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::thrown_by;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr std::size_t max_bytes = 64 * G;
constexpr std::size_t data_bytes = 20 * G + 7;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr int tag = 17;

/// MPI for the whole program: initialised on first use, finalised at exit.
struct MpiSession {
  MpiSession() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  ~MpiSession() { MPI_Finalize(); }
  int rank = 0;
  int size = 1;
};

const MpiSession& mpi() {
  static MpiSession const session;
  return session;
}

void require_two_ranks() {
  if (mpi().size != 2) SKIP("needs exactly 2 MPI ranks (mpirun -n 2), found " << mpi().size);
}

void send_raw(const void* bytes, std::size_t length) {
  REQUIRE(MPI_Send(bytes, static_cast<int>(length), MPI_BYTE, 1, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
}

}  // namespace

TEST_CASE("two ranks exchange a growing buffer's chunks as fabric handles and share its memory", "[ipc][mpi]") {
  require_two_ranks();
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(cuvmm::test::small_host_options());
  auto const data = random_bytes(data_bytes, 0x5EED);
  auto const reply = random_bytes(G, 0x5EED + 1);
  if (mpi().rank == 0) {
    cuvmm::GrowableOptions options;
    options.max_capacity_bytes = max_bytes;
    options.shareable = HandleType::fabric;
    {
      cuvmm::GrowableStorage storage(host, options);
      storage.reserve(3 * G);
      storage.reserve(data_bytes);  // two growth steps: more than one chunk
      REQUIRE(storage.chunk_count() >= 2);
      cuvmm::test::write_bytes(storage.data(), data);
      cuvmm::ipc::mpi_send(cuvmm::ipc::hello_message(storage.max_capacity(), storage.chunk_count()), 1, tag, MPI_COMM_WORLD);
      std::size_t offset = 0;
      for (std::size_t i = 0; i < storage.chunk_count(); ++i) {
        cuvmm::ipc::mpi_send_chunk(storage.chunks()[i], offset, i, 1, tag, MPI_COMM_WORLD);
        offset += storage.chunks()[i].size();
      }
      cuvmm::ipc::mpi_send(cuvmm::ipc::size_message(data_bytes, storage.chunk_count()), 1, tag, MPI_COMM_WORLD);
      // Rank 1 answers once it has imported, verified and written its reply.
      Message const done = cuvmm::ipc::mpi_receive(1, tag, MPI_COMM_WORLD);
      CHECK(done.kind == MessageKind::size);
      CHECK(done.size == data_bytes);
      CHECK(read_bytes(storage.data(), G) == reply);
      CHECK(std::memcmp(reinterpret_cast<const void*>(storage.data() + G), data.data() + G, data_bytes - G) == 0);
    }
  } else {
    {
      int sender = -1;
      Message const hello = cuvmm::ipc::mpi_receive(0, tag, MPI_COMM_WORLD, &sender);
      CHECK(sender == 0);
      REQUIRE(hello.kind == MessageKind::hello);
      CHECK(hello.size == max_bytes);
      cuvmm::AddressRange range(host, hello.size);  // the one range this rank reserves
      std::vector<cuvmm::PhysicalChunk> chunks;
      std::vector<cuvmm::Mapping> mappings;
      std::size_t mapped = 0;
      for (std::size_t i = 0; i < hello.generation; ++i) {
        cuvmm::ipc::MpiChunk received = cuvmm::ipc::mpi_receive_chunk(host, 0, tag, MPI_COMM_WORLD);
        CHECK(received.sender == 0);
        CHECK(received.generation == i);
        CHECK(received.offset == mapped);
        CHECK(received.chunk.imported());
        CHECK(received.chunk.shareable() == HandleType::fabric);
        mappings.emplace_back(range, received.offset, received.chunk, read_write);
        mapped += received.chunk.size();
        chunks.push_back(std::move(received.chunk));
      }
      Message const size = cuvmm::ipc::mpi_receive(0, tag, MPI_COMM_WORLD);
      REQUIRE(size.kind == MessageKind::size);
      REQUIRE(size.size == data_bytes);
      CHECK(mapped >= data_bytes);
      CHECK(host.live_counts() == LiveCounts{1, chunks.size(), chunks.size(), max_bytes, mapped, mapped});
      CHECK(std::memcmp(reinterpret_cast<const void*>(range.base()), data.data(), data_bytes) == 0);
      cuvmm::test::write_bytes(range.base(), reply);
      cuvmm::ipc::mpi_send(cuvmm::ipc::size_message(data_bytes, chunks.size()), 0, tag, MPI_COMM_WORLD);
      mappings.clear();
      chunks.clear();
    }
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a rank refuses truncated, oversized and forged messages from another and leaks nothing",
          "[ipc][mpi][hostile]") {
  require_two_ranks();
  HostBackend host(cuvmm::test::small_host_options());
  if (mpi().rank == 0) {
    cuvmm::PhysicalChunk const chunk(host, 2 * G, {0, HandleType::fabric, false});
    Message const real = cuvmm::ipc::chunk_message(HandleType::fabric, 0, 2 * G, 0, chunk.export_fabric());
    cuvmm::ipc::WireBytes const good = cuvmm::ipc::encode(real);
    send_raw(good.data(), 50);                             // truncated
    std::vector<std::byte> longer(200, std::byte{0});
    std::memcpy(longer.data(), good.data(), good.size());
    send_raw(longer.data(), longer.size());                // oversized
    cuvmm::ipc::WireBytes bad_version = good;
    bad_version[4] = std::byte{9};
    send_raw(bad_version.data(), bad_version.size());      // another protocol version
    Message forged = real;
    forged.handle.data[0] = std::byte{'X'};
    cuvmm::ipc::mpi_send(forged, 1, tag, MPI_COMM_WORLD);  // forged handle bytes
    Message wrong_size = real;
    wrong_size.size = G;
    cuvmm::ipc::mpi_send(wrong_size, 1, tag, MPI_COMM_WORLD);  // a size that is not the chunk's
    cuvmm::ipc::mpi_send(cuvmm::ipc::hello_message(max_bytes, 0), 1, tag, MPI_COMM_WORLD);  // not a chunk
    cuvmm::ipc::mpi_send(real, 1, tag, MPI_COMM_WORLD);   // and a good one still gets through
    MPI_Barrier(MPI_COMM_WORLD);                          // keep the chunk until rank 1 imported it
  } else {
    std::size_t const fd_baseline = open_fd_count();
    auto const refusal = [&] {
      return std::string(thrown_by<cuvmm::Error>([&] { (void)cuvmm::ipc::mpi_receive_chunk(host, 0, tag, MPI_COMM_WORLD); })
                             .what());
    };
    CHECK_THAT(refusal(), ContainsSubstring("from MPI rank 0 refused: truncated: 50 bytes"));
    CHECK_THAT(refusal(), ContainsSubstring("oversized: 200 bytes"));
    CHECK_THAT(refusal(), ContainsSubstring("protocol version 9"));
    CHECK_THAT(refusal(), ContainsSubstring("not a host fabric handle"));
    CHECK_THAT(refusal(), ContainsSubstring("not the 65536 announced"));
    CHECK_THAT(refusal(), ContainsSubstring("a hello message from MPI rank 0, not a chunk"));
    CHECK(host.live_counts() == LiveCounts{});
    CHECK(open_fd_count() == fd_baseline);
    {
      cuvmm::ipc::MpiChunk const good = cuvmm::ipc::mpi_receive_chunk(host, 0, tag, MPI_COMM_WORLD);
      CHECK(good.chunk.size() == 2 * G);
      CHECK(host.live_counts().chunks == 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(host.live_counts() == LiveCounts{});
    CHECK(open_fd_count() == fd_baseline);
  }
}
