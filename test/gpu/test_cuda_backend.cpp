// CudaBackend through the handles (AddressRange, PhysicalChunk, Mapping) on a real device: kernels
// write and check random patterns through mappings, aliases and imported chunks; failures are typed
// and named; every test leaves the backend's live objects and the device's free memory as it found them.
#include <cuda.h>
#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "backend_battery.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::test::check_pattern;
using cuvmm::test::device_pointer;
using cuvmm::test::host_mismatches;
using cuvmm::test::pattern_hits;
using cuvmm::test::poison;
using cuvmm::test::test_seed;

namespace {

constexpr AccessGrant read_write{.device = 0, .access = Access::read_write};

std::size_t granularity_of(const cuvmm::Backend& backend) {
  return backend.granularity({}, cuvmm::GranularityKind::minimum);
}

}  // namespace

TEST_CASE("chunks mapped side by side get access in one call and hold a random pattern in every element",
          "[gpu][backend][handles]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  cuvmm::FaultInjectingBackend counted(cuda);  // never armed: it only counts the calls
  cuvmm::test::LeakCheck const leaks(cuda);
  std::size_t const granularity = granularity_of(cuda);
  constexpr std::size_t chunk_count = 3;
  {
    std::size_t const free_before = cuda.memory_info(0).free;
    cuvmm::AddressRange range(counted, (chunk_count + 1) * granularity);  // one unmapped granule at the end
    std::vector<cuvmm::PhysicalChunk> chunks;
    std::vector<cuvmm::Mapping> mappings;
    for (std::size_t i = 0; i < chunk_count; ++i) {
      chunks.emplace_back(counted, granularity);
      mappings.emplace_back(range, i * granularity, chunks.back());
    }
    CHECK(cuda.live_counts() == cuvmm::LiveCounts{.ranges = 1,
                                                  .chunks = chunk_count,
                                                  .mappings = chunk_count,
                                                  .bytes_reserved = (chunk_count + 1) * granularity,
                                                  .bytes_physical = chunk_count * granularity,
                                                  .bytes_mapped = chunk_count * granularity});
    // The chunks are real device memory: free memory dropped by at least their bytes.
    CHECK(free_before - cuda.memory_info(0).free >= chunk_count * granularity);

    std::size_t const set_access_calls = counted.calls(cuvmm::BackendOp::set_access);
    cuvmm::set_access(mappings, std::span<const AccessGrant>(&read_write, 1));
    CHECK(counted.calls(cuvmm::BackendOp::set_access) == set_access_calls + 1);
    for (cuvmm::Mapping const& mapping : mappings) CHECK(mapping.access(0) == Access::read_write);

    auto* const data = device_pointer<std::uint32_t>(range.base());
    std::size_t const count = chunk_count * granularity / sizeof(std::uint32_t);
    std::uint64_t const seed = test_seed(1);
    CAPTURE(seed);
    cuvmm::test::Stream const stream;
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(data, count, poison, stream.get()));
    cuvmm::test::PatternCheck const poisoned = check_pattern(data, count, seed, stream.get());
    CHECK(poisoned.mismatches == count - pattern_hits(seed, count, poison));

    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(data, count, seed, stream.get()));
    cuvmm::test::PatternCheck const written = check_pattern(data, count, seed, stream.get());
    CHECK(written.mismatches == 0);
    CHECK(host_mismatches(data, count, seed) == 0);
  }
  leaks.verify();
}

TEST_CASE("the same chunk mapped at two addresses reads back through one what a kernel wrote through the other",
          "[gpu][backend][alias]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  cuvmm::test::LeakCheck const leaks(cuda);
  std::size_t const granularity = granularity_of(cuda);
  {
    cuvmm::AddressRange range(cuda, 2 * granularity);
    cuvmm::PhysicalChunk const chunk(cuda, granularity);
    cuvmm::Mapping const first(range, 0, chunk, std::span<const AccessGrant>(&read_write, 1));
    cuvmm::Mapping const second(range, granularity, chunk, std::span<const AccessGrant>(&read_write, 1));
    CHECK(cuda.live_counts().mappings == 2);
    CHECK(cuda.live_counts().chunks == 1);
    auto* const a = device_pointer<std::uint32_t>(first.address());
    auto* const b = device_pointer<std::uint32_t>(second.address());
    std::size_t const count = granularity / sizeof(std::uint32_t);
    cuvmm::test::Stream const stream;

    std::uint64_t const seed_a = test_seed(2);
    CAPTURE(seed_a);
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(a, count, poison, stream.get()));
    CHECK(check_pattern(b, count, seed_a, stream.get()).mismatches == count - pattern_hits(seed_a, count, poison));
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(a, count, seed_a, stream.get()));
    CHECK(check_pattern(b, count, seed_a, stream.get()).mismatches == 0);

    std::uint64_t const seed_b = test_seed(3);
    CAPTURE(seed_b);
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(b, count, seed_b, stream.get()));
    CHECK(check_pattern(a, count, seed_b, stream.get()).mismatches == 0);
    CHECK(host_mismatches(a, count, seed_b) == 0);
  }
  leaks.verify();
}

TEST_CASE("a chunk exported as a POSIX fd and imported again maps the same memory", "[gpu][backend][ipc]") {
  cuvmm::test::require_gpu();
  if (!cuvmm::device_caps(0).posix_fd_handles) SKIP("device 0 has no POSIX fd handles");
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  cuvmm::test::LeakCheck const leaks(cuda);
  cuvmm::ChunkProperties const shareable{.device = 0, .shareable = cuvmm::HandleType::posix_fd};
  std::size_t const granularity = cuda.granularity(shareable, cuvmm::GranularityKind::minimum);
  std::size_t const chunk_size = 2 * granularity;  // not the smallest size, so the import must find it
  int exported_descriptor = -1;
  {
    cuvmm::AddressRange range(cuda, 2 * chunk_size);
    cuvmm::PhysicalChunk const original(cuda, chunk_size, shareable);
    CHECK(original.shareable() == cuvmm::HandleType::posix_fd);
    cuvmm::UniqueFd fd = original.export_posix_fd();
    REQUIRE(fd.valid());
    exported_descriptor = fd.get();
    CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) != 0);

    // The size is the exporter's word, checked: any other size is refused and nothing is kept.
    CHECK_THROWS_AS(cuvmm::PhysicalChunk::import_posix_fd(cuda, fd.get(), 2 * original.size()), cuvmm::Error);
    CHECK_THROWS_AS(cuvmm::PhysicalChunk::import_posix_fd(cuda, fd.get(), original.size() / 2), cuvmm::Error);
    CHECK(cuda.live_counts().chunks == 1);
    cuvmm::PhysicalChunk const imported = cuvmm::PhysicalChunk::import_posix_fd(cuda, fd.get(), original.size());
    CHECK(::fcntl(fd.get(), F_GETFD) != -1);  // the import did not consume the caller's descriptor
    CHECK(imported.imported());
    CHECK(imported.size() == chunk_size);
    CHECK(imported.device() == 0);
    CHECK(cuda.live_counts().chunks == 2);
    CHECK(cuda.live_counts().bytes_physical == 2 * chunk_size);

    cuvmm::Mapping const through_original(range, 0, original, std::span<const AccessGrant>(&read_write, 1));
    cuvmm::Mapping const through_import(range, chunk_size, imported, std::span<const AccessGrant>(&read_write, 1));
    auto* const written = device_pointer<std::uint32_t>(through_original.address());
    auto* const read = device_pointer<std::uint32_t>(through_import.address());
    std::size_t const count = chunk_size / sizeof(std::uint32_t);
    std::uint64_t const seed = test_seed(4);
    CAPTURE(seed);
    cuvmm::test::Stream const stream;
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(written, count, poison, stream.get()));
    CHECK(check_pattern(read, count, seed, stream.get()).mismatches == count - pattern_hits(seed, count, poison));
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(written, count, seed, stream.get()));
    CHECK(check_pattern(read, count, seed, stream.get()).mismatches == 0);
    CHECK(host_mismatches(read, count, seed) == 0);
  }
  // The UniqueFd closed the exported descriptor.
  errno = 0;
  CHECK(::fcntl(exported_descriptor, F_GETFD) == -1);
  CHECK(errno == EBADF);
  leaks.verify();
}

TEST_CASE("creating a fabric-shareable chunk without an IMEX channel throws Unsupported naming the channel",
          "[gpu][backend][fabric]") {
  cuvmm::test::require_gpu();
  cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
  cuvmm::CudaBackend cuda(0);
  std::size_t const granularity = granularity_of(cuda);
  cuvmm::ChunkProperties const fabric{.device = 0, .shareable = cuvmm::HandleType::fabric};
  auto const create = [&] { return cuvmm::PhysicalChunk(cuda, granularity, fabric); };
  if (!caps.fabric_handles) {
    try {
      (void)create();
      FAIL("a fabric chunk was created on a device without fabric handles");
    } catch (const cuvmm::Unsupported& error) {
      CHECK_THAT(error.capability(), ContainsSubstring("fabric handles"));
    }
  } else if (!cuvmm::imex_channel_present()) {
    try {
      (void)create();
      FAIL("a fabric chunk was created without an IMEX channel");
    } catch (const cuvmm::Unsupported& error) {
      CHECK_THAT(error.capability(), ContainsSubstring("IMEX channel"));
      CHECK_THAT(error.capability(), ContainsSubstring(std::string(cuvmm::imex_channel_directory)));
      CHECK(error.remedy() == cuvmm::imex_channel_remedy);
      CHECK((error.call() == "cuMemCreate" || error.call() == "cuMemGetAllocationGranularity"));
      CHECK((error.code() == CUDA_ERROR_NOT_PERMITTED || error.code() == CUDA_ERROR_NOT_SUPPORTED));
      CHECK_THAT(error.what(), ContainsSubstring("IMEX"));
    }
  } else {
    cuvmm::PhysicalChunk const chunk = create();
    CHECK(chunk.size() == granularity);
    CHECK(cuvmm::contains(chunk.shareable(), cuvmm::HandleType::fabric));
    cuvmm::FabricHandle const handle = chunk.export_fabric();
    bool any_byte_set = false;
    for (std::byte const b : handle.data) any_byte_set = any_byte_set || b != std::byte{0};
    CHECK(any_byte_set);
  }
  CHECK(cuda.live_counts() == cuvmm::LiveCounts{});  // a refused creation leaves nothing behind
}

TEST_CASE("a compressible chunk reports whether the device granted compression", "[gpu][backend][compression]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
  cuvmm::CudaBackend cuda(0);
  cuvmm::test::LeakCheck const leaks(cuda);
  cuvmm::ChunkProperties const compressible{.device = 0, .compression = true};
  std::size_t const granularity = cuda.granularity(compressible, cuvmm::GranularityKind::minimum);
  {
    cuvmm::PhysicalChunk const chunk(cuda, granularity, compressible);
    CHECK(chunk.compression_requested());
    // H200.md: generic compression is supported and granted there.
    CHECK(chunk.compression_granted() == caps.generic_compression);
    cuvmm::AddressRange range(cuda, granularity);
    cuvmm::Mapping const mapping(range, 0, chunk, std::span<const AccessGrant>(&read_write, 1));
    auto* const data = device_pointer<std::uint32_t>(mapping.address());
    std::size_t const count = granularity / sizeof(std::uint32_t);
    std::uint64_t const seed = test_seed(5);
    CAPTURE(seed);
    cuvmm::test::Stream const stream;
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_fill(data, count, poison, stream.get()));
    CUVMM_CUDA_REQUIRE(cuvmm::test::launch_write_pattern(data, count, seed, stream.get()));
    CHECK(check_pattern(data, count, seed, stream.get()).mismatches == 0);
  }
  leaks.verify();
}

TEST_CASE("backend precondition failures throw cuvmm::Error naming the driver call they guard",
          "[gpu][backend][errors]") {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  cuvmm::CudaBackend cuda(0);
  cuvmm::test::LeakCheck const leaks(cuda);
  std::size_t const granularity = granularity_of(cuda);
  {
    cuvmm::AddressRange range(cuda, 4 * granularity);
    cuvmm::PhysicalChunk const chunk(cuda, 2 * granularity);

    auto const expect_error = [](auto&& operation, std::string_view call, std::string_view text) {
      try {
        operation();
        FAIL("no error was thrown; expected one from " << call);
      } catch (const cuvmm::Error& error) {
        CHECK(error.call() == call);
        CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
        CHECK_THAT(error.context(), ContainsSubstring(std::string(text)));
      }
    };
    // A size other than the whole chunk's (what cuMemMap itself would refuse).
    expect_error([&] { cuda.map(range.base(), granularity, chunk.handle()); }, "cuMemMap", "the whole chunk");
    // An address off the granularity.
    expect_error([&] { cuda.map(range.base() + 4096, 2 * granularity, chunk.handle()); }, "cuMemMap",
                 "not a multiple of the granularity");
    // Past the end of the range.
    expect_error([&] { cuda.map(range.base() + 3 * granularity, 2 * granularity, chunk.handle()); }, "cuMemMap",
                 "not inside a range reserved");
    // A reservation that is not a multiple of the granularity.
    expect_error([&] { (void)cuda.reserve(granularity + 4096, 0); }, "cuMemAddressReserve",
                 "not a positive multiple of the granularity");
    // A chunk size that is not a multiple of the granularity.
    expect_error([&] { (void)cuda.create_chunk(granularity / 2, {}); }, "cuMemCreate",
                 "not a positive multiple of the granularity");
    // Access on a span that is not mapped.
    expect_error([&] { cuda.set_access(range.base(), granularity, std::span<const AccessGrant>(&read_write, 1)); },
                 "cuMemSetAccess", "not a run of whole mappings");
    // Mapping over a span that is already mapped.
    cuvmm::Mapping const mapped(range, 0, chunk);
    expect_error([&] { cuda.map(range.base() + granularity, 2 * granularity, chunk.handle()); }, "cuMemMap",
                 "already mapped");
    // A device that does not exist.
    expect_error([&] { (void)cuda.create_chunk(granularity, {.device = 1 << 20}); }, "cuMemCreate", "does not exist");
    CHECK(cuda.live_counts() == cuvmm::LiveCounts{.ranges = 1,
                                                  .chunks = 1,
                                                  .mappings = 1,
                                                  .bytes_reserved = 4 * granularity,
                                                  .bytes_physical = 2 * granularity,
                                                  .bytes_mapped = 2 * granularity});
  }
  leaks.verify();
}

TEST_CASE("cuda_backend returns one process-wide backend per device", "[gpu][backend]") {
  cuvmm::test::require_gpu();
  cuvmm::CudaBackend& first = cuvmm::cuda_backend(0);
  cuvmm::CudaBackend& again = cuvmm::cuda_backend(0);
  CHECK(&first == &again);
  CHECK(first.device() == 0);
  CHECK(first.name() == "cuda");
  CHECK_THROWS_AS(cuvmm::cuda_backend(1 << 20), cuvmm::Error);
}

// ---- the backend battery (test/battery/backend_battery.cpp) on CudaBackend ----

namespace {

class CudaBatteryBackend final : public cuvmm::test::BatteryBackend {
 public:
  cuvmm::Backend& backend() override { return cuda_; }
  const cuvmm::Backend& tally() override { return cuda_; }
  void fill(cuvmm::Address address, std::size_t bytes, std::uint8_t value) override {
    check(cudaMemset(reinterpret_cast<void*>(address), value, bytes), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<std::uint8_t> read(cuvmm::Address address, std::size_t bytes) override {
    std::vector<std::uint8_t> out(bytes, static_cast<std::uint8_t>(~0u));
    check(cudaMemcpy(out.data(), reinterpret_cast<const void*>(address), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
  }

 private:
  static void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
  cuvmm::CudaBackend cuda_{0};  // its own tally, so each case starts from zero
};

}  // namespace

std::unique_ptr<cuvmm::test::BatteryBackend> cuvmm::test::make_battery_backend() {
  cuvmm::test::require_gpu();
  cuvmm::test::init_runtime();
  return std::make_unique<CudaBatteryBackend>();
}
