// device_caps() and driver_status() against what the CUDA runtime and the raw driver attributes say.
#include <cuda_runtime_api.h>

#include <filesystem>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>

#include "driver/driver.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"

namespace {

bool raw_attribute(int device, CUdevice_attribute attribute) {
  CUdevice handle = 0;
  cuvmm::driver::device_get(&handle, device);
  int value = -1;
  cuvmm::driver::device_get_attribute(&value, attribute, handle);
  REQUIRE((value == 0 || value == 1));
  return value == 1;
}

bool power_of_two(std::size_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

TEST_CASE("driver_status reports the driver version and device count the CUDA runtime reports", "[gpu][caps]") {
  cuvmm::test::require_gpu();
  cuvmm::DriverStatus const status = cuvmm::driver_status();
  int runtime_driver_version = 0;
  int runtime_device_count = 0;
  CUVMM_CUDA_REQUIRE(cudaDriverGetVersion(&runtime_driver_version));
  CUVMM_CUDA_REQUIRE(cudaGetDeviceCount(&runtime_device_count));
  CHECK(status.available);
  CHECK(status.reason.empty());
  CHECK(status.driver_version == runtime_driver_version);
  CHECK(status.driver_version >= CUDART_VERSION);
  CHECK(status.device_count == runtime_device_count);
  CHECK(cuvmm::device_count() == runtime_device_count);
}

TEST_CASE("device_caps reports each device's name, compute capability and memory as the runtime does",
          "[gpu][caps]") {
  cuvmm::test::require_gpu();
  for (int device = 0; device < cuvmm::device_count(); ++device) {
    CAPTURE(device);
    cuvmm::DeviceCaps const caps = cuvmm::device_caps(device);
    cudaDeviceProp props{};
    CUVMM_CUDA_REQUIRE(cudaGetDeviceProperties(&props, device));
    int major = 0;
    int minor = 0;
    CUVMM_CUDA_REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUVMM_CUDA_REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    CHECK(caps.device == device);
    CHECK(caps.name == std::string(props.name));
    CHECK(caps.compute_capability_major == major);
    CHECK(caps.compute_capability_minor == minor);
    CHECK(caps.total_memory == props.totalGlobalMem);
    CHECK(caps.free_memory > 0);
    CHECK(caps.free_memory <= caps.total_memory);
  }
}

TEST_CASE("device_caps reports every VMM attribute exactly as the driver's raw attribute", "[gpu][caps]") {
  cuvmm::test::require_gpu();
  for (int device = 0; device < cuvmm::device_count(); ++device) {
    CAPTURE(device);
    cuvmm::DeviceCaps const caps = cuvmm::device_caps(device);
    CHECK(caps.vmm == raw_attribute(device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED));
    CHECK(caps.posix_fd_handles ==
          raw_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED));
    CHECK(caps.fabric_handles == raw_attribute(device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED));
    CHECK(caps.multicast == raw_attribute(device, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED));
    CHECK(caps.generic_compression == raw_attribute(device, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED));
    CHECK(caps.gpu_direct_rdma_with_vmm ==
          raw_attribute(device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED));
    CHECK(caps.dma_buf == raw_attribute(device, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED));
  }
}

TEST_CASE("granularities are powers of two, the minimum divides the recommended, and unsupported kinds read 0",
          "[gpu][caps]") {
  cuvmm::test::require_gpu();
  for (int device = 0; device < cuvmm::device_count(); ++device) {
    CAPTURE(device);
    cuvmm::DeviceCaps const caps = cuvmm::device_caps(device);
    REQUIRE(caps.vmm);
    auto const consistent = [](cuvmm::Granularity g) {
      return power_of_two(g.minimum) && power_of_two(g.recommended) && g.recommended % g.minimum == 0;
    };
    CHECK(consistent(caps.granularity));
    CHECK((caps.posix_fd_granularity.minimum == 0 || consistent(caps.posix_fd_granularity)));
    CHECK((caps.fabric_granularity.minimum == 0 || consistent(caps.fabric_granularity)));
    CHECK((caps.compression_granularity.minimum == 0 || consistent(caps.compression_granularity)));
    CHECK((caps.multicast_granularity.minimum == 0 || consistent(caps.multicast_granularity)));
    // A kind the device supports has a granularity; one it lacks reads 0. (Fabric may read 0 while
    // reported, when the driver refuses it without an IMEX channel.)
    bool const posix_fd_granularity_known = caps.posix_fd_granularity.minimum != 0;
    bool const compression_granularity_known = caps.compression_granularity.minimum != 0;
    bool const multicast_granularity_known = caps.multicast_granularity.minimum != 0;
    CHECK(posix_fd_granularity_known == caps.posix_fd_handles);
    CHECK(compression_granularity_known == caps.generic_compression);
    CHECK(multicast_granularity_known == caps.multicast);
    if (!caps.fabric_handles) CHECK(caps.fabric_granularity.minimum == 0);
    // Every kind of chunk is still mapped in ranges of plain chunks: its unit is a multiple of theirs.
    if (caps.posix_fd_granularity.minimum != 0)
      CHECK(caps.posix_fd_granularity.minimum % caps.granularity.minimum == 0);
    if (caps.compression_granularity.minimum != 0)
      CHECK(caps.compression_granularity.minimum % caps.granularity.minimum == 0);
  }
}

TEST_CASE("CudaBackend's granularity is the one device_caps reports", "[gpu][caps][backend]") {
  cuvmm::test::require_gpu();
  cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
  cuvmm::CudaBackend const backend(0);
  CHECK(backend.device() == 0);
  CHECK(backend.space() == cuvmm::MemorySpace::device);
  CHECK(backend.granularity({}, cuvmm::GranularityKind::minimum) == caps.granularity.minimum);
  CHECK(backend.granularity({}, cuvmm::GranularityKind::recommended) == caps.granularity.recommended);
  if (caps.posix_fd_handles)
    CHECK(backend.granularity({.shareable = cuvmm::HandleType::posix_fd}, cuvmm::GranularityKind::minimum) ==
          caps.posix_fd_granularity.minimum);
  cuvmm::Backend::MemoryInfo const memory = backend.memory_info(0);
  // cuMemGetInfo's total may leave out memory the driver reserves; it never exceeds the device's.
  CHECK(memory.total > 0);
  CHECK(memory.total <= caps.total_memory);
  CHECK(memory.free <= memory.total);
}

TEST_CASE("imex_channel_present says whether the IMEX channel directory has an entry", "[gpu][caps]") {
  cuvmm::test::require_gpu();
  std::filesystem::path const directory(cuvmm::imex_channel_directory);
  std::error_code error;
  bool const expected = std::filesystem::is_directory(directory, error) &&
                        std::filesystem::directory_iterator(directory, error) != std::filesystem::directory_iterator();
  CHECK(cuvmm::imex_channel_present() == expected);
  CHECK(cuvmm::device_caps(0).imex_channel_present == expected);
}

TEST_CASE("an H200 reports the capabilities measured on the test machine", "[gpu][caps][h200]") {
  cuvmm::test::require_gpu();
  cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
  if (caps.name.find("H200") == std::string::npos) SKIP("device 0 is " << caps.name << ", not an H200");
  CHECK(caps.compute_capability_major == 9);
  CHECK(caps.compute_capability_minor == 0);
  CHECK(caps.vmm);
  CHECK(caps.posix_fd_handles);
  CHECK(caps.generic_compression);
  CHECK(caps.granularity.minimum == 2 * cuvmm::MiB);
  CHECK(caps.granularity.recommended == 2 * cuvmm::MiB);
  CHECK(caps.posix_fd_granularity.minimum == 2 * cuvmm::MiB);
}
