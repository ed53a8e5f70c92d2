// Memory for NCCL and RDMA on the GPU: chunks made with the interoperability properties (POSIX fd
// and, where the node has it, fabric handles; gpuDirectRDMACapable; the recommended granularity;
// access for every device) read them back; a growth observer runs after the map and before the
// buffer's copy into the new range; every chunk of a grown buffer is exported as a dmabuf fd of the
// chunk's size, or refused clearly (Unsupported naming CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, or the
// driver's CUresult).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime_api.h>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/dmabuf.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/growth_observer.hpp>

#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using namespace cuvmm;

namespace {

/// What NCCL asks of its own VMM memory, as far as device 0 allows.
GrowableOptions for_nccl(const DeviceCaps& caps) {
  GrowableOptions o;
  o.max_capacity_bytes = 8 * GiB;
  o.max_chunk_bytes = 64 * MiB;
  o.hide_bytes = 64 * MiB;
  o.map_ahead = MapAhead::off;
  if (caps.posix_fd_handles) o.shareable = HandleType::posix_fd;
  if (caps.fabric_handles && caps.imex_channel_present) o.shareable = o.shareable | HandleType::fabric;
  o.gpu_direct_rdma = caps.gpu_direct_rdma_with_vmm;
  o.granularity = GranularityKind::recommended;
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  for (int d = 0; d < devices; ++d) o.access.push_back({d, Access::read_write});
  return o;
}

/// Fills each range it is told of with `test::poison` (a memset fails on memory that is not mapped
/// and accessible) and counts the calls.
class PoisoningObserver final : public GrowthObserver {
 public:
  std::size_t mapped = 0;
  std::size_t unmapping = 0;
  void on_mapped(const BackedRange& range) override {
    REQUIRE(cudaMemset(reinterpret_cast<void*>(range.address), 0xA5, range.bytes) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    ++mapped;
  }
  void on_unmapping(const BackedRange&) noexcept override { ++unmapping; }
};

}  // namespace

TEST_CASE("chunks made with the interoperability properties read them back", "[gpu][interop]") {
  test::require_gpu();
  test::init_runtime();
  DeviceCaps const caps = device_caps(0);
  INFO("posix_fd " << caps.posix_fd_handles << ", fabric " << caps.fabric_handles << " (IMEX channel "
                   << caps.imex_channel_present << "), RDMA with VMM " << caps.gpu_direct_rdma_with_vmm
                   << ", dmabuf " << caps.dma_buf);
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableOptions const options = for_nccl(caps);
    GrowableBuffer<std::uint32_t> buffer(cuda, options);
    buffer.resize(200 * MiB / sizeof(std::uint32_t), test::poison);
    REQUIRE(buffer.storage().chunk_count() >= 2);
    ChunkProperties const props{.device = 0, .shareable = options.shareable, .gpu_direct_rdma = options.gpu_direct_rdma};
    std::size_t const recommended = cuda.granularity(props, GranularityKind::recommended);
    CHECK(buffer.storage().granularity() == recommended);
    for (const PhysicalChunk& chunk : buffer.storage().chunks()) {
      CHECK(chunk.size() % recommended == 0);
      CHECK(contains(chunk.shareable(), options.shareable));
      CHECK(chunk.gpu_direct_rdma() == caps.gpu_direct_rdma_with_vmm);
    }
    CHECK(buffer.element(buffer.size() - 1) == test::poison);
  }
  if (!caps.gpu_direct_rdma_with_vmm) {
    GrowableOptions o;
    o.max_capacity_bytes = 1 * GiB;
    o.gpu_direct_rdma = true;
    CHECK_THROWS_AS(GrowableBuffer<std::uint32_t>(cuda, o).reserve(1), Unsupported);
  }
  leaks.verify();
}

TEST_CASE("a growth observer runs after the map and before the buffer's copy into the new range", "[gpu][interop]") {
  test::require_gpu();
  test::init_runtime();
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    test::Stream const stream;
    GrowableBuffer<std::uint32_t> buffer(cuda, for_nccl(device_caps(0)), stream.get());
    auto observer = std::make_shared<PoisoningObserver>();
    buffer.add_observer(observer);
    std::vector<std::uint32_t> words(40 * MiB / sizeof(std::uint32_t) + 7);
    for (std::size_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(i * 2654435761u);
    buffer.append(words);
    REQUIRE(observer->mapped == buffer.storage().chunk_count());
    // Read the whole mapped span: the appended words, then the observer's poison behind them.
    std::vector<std::uint32_t> host(buffer.capacity());
    CUVMM_CUDA_REQUIRE(cudaMemcpyAsync(host.data(), buffer.data(), host.size() * sizeof(std::uint32_t),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    CHECK(std::equal(words.begin(), words.end(), host.begin()));
    CHECK(std::all_of(host.begin() + static_cast<std::ptrdiff_t>(words.size()), host.end(),
                      [](std::uint32_t w) { return w == 0xA5A5A5A5u; }));
    std::size_t const chunks = buffer.storage().chunk_count();
    buffer.resize(1);
    buffer.shrink_to_fit();
    CHECK(observer->unmapping == chunks - buffer.storage().chunk_count());
  }
  leaks.verify();
}

TEST_CASE("every chunk of a grown buffer is exported as a dmabuf fd of its size, or refused clearly", "[gpu][interop]") {
  test::require_gpu();
  test::init_runtime();
  DeviceCaps const caps = device_caps(0);
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableBuffer<std::uint32_t> buffer(cuda, for_nccl(caps));
    std::size_t exported_calls = 0;
    std::size_t released_calls = 0;
    auto observer = std::make_shared<DmabufObserver>([&](const BackedRange&, int) { ++exported_calls; },
                                                     [&](const BackedRange&, int) { ++released_calls; });
    buffer.add_observer(observer);
    if (!caps.dma_buf) {
      try {
        buffer.resize(1);
        FAIL("a device without CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED exported a dmabuf");
      } catch (const Unsupported& e) {
        CHECK(e.capability().find("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED") != std::string::npos);
      }
      CHECK(buffer.capacity() == 0);  // the growth was undone
      SKIP("device 0 does not report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: refused as expected");
    }
    try {
      for (std::size_t mib : {3, 40, 150}) buffer.resize(mib * MiB / sizeof(std::uint32_t), test::poison);
    } catch (const Error& e) {
      FAIL("the driver refused the dmabuf export (device reports DMA_BUF_SUPPORTED): " << e.what());
    }
    std::vector<DmabufObserver::Export> const exports = observer->exports();
    REQUIRE(exports.size() == buffer.storage().chunk_count());
    CHECK(exported_calls == exports.size());
    for (std::size_t i = 0; i < exports.size(); ++i) {
      CHECK(exports[i].range == buffer.storage().backed_range(i));
      struct stat st {};
      CHECK(::fstat(exports[i].fd, &st) == 0);
      CHECK(::lseek(exports[i].fd, 0, SEEK_END) == static_cast<off_t>(exports[i].range.bytes));
    }
    buffer.resize(1);
    buffer.shrink_to_fit();
    CHECK(observer->exports().size() == buffer.storage().chunk_count());
    CHECK(released_calls == exports.size() - buffer.storage().chunk_count());
  }
  leaks.verify();
}
