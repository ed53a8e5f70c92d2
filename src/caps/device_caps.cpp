// src/caps/device_caps.cpp: what the driver and each device can do, for VMM.
//
// Reads device attributes and allocation granularities through the driver layer. A granularity is
// only queried for a kind of chunk the device reports as supported, so an unsupported kind reads 0
// and raises nothing; a kind the device reports but the driver still refuses (fabric handles without
// an IMEX channel, CUDA_ERROR_NOT_PERMITTED) also reads 0. The queries run in the device's primary
// context (retained for the call, so the device must be usable); free memory is cuMemGetInfo there.
// The device attributes (VMM, handle types, multicast, compression) are read once per process
// (device_attributes(), shared with CudaBackend through src/caps/device_attributes.hpp).
// Never does: create memory, change a device setting, or call cuMulticastCreate.
#include <cuvmm/device_caps.hpp>

#include <dirent.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <cuvmm/error.hpp>
#include <cuvmm/types.hpp>

#include "caps/device_attributes.hpp"
#include "driver/driver.hpp"

namespace cuvmm {

namespace caps {
namespace {

bool attribute(CUdevice device, CUdevice_attribute which, cuvmm::source_location where) {
  int value = 0;
  driver::device_get_attribute(&value, which, device, where);
  return value != 0;
}

/// The process-wide cache (leaked on purpose: backends may read it during exit).
struct AttributeCache {
  std::mutex mutex;                                       // guards the two members below
  std::optional<int> count;                               // devices the driver reports
  std::vector<std::optional<DeviceAttributes>> devices;   // by ordinal
};
AttributeCache& cache() {
  static AttributeCache* const instance = new AttributeCache;
  return *instance;
}

}  // namespace

int device_count(cuvmm::source_location where) {
  AttributeCache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (c.count) return *c.count;
  }
  driver::require_driver("cuDeviceGetCount", where);
  int count = 0;
  driver::device_get_count(&count, where);
  std::lock_guard lock(c.mutex);
  c.count = count;
  return count;
}

DeviceAttributes device_attributes(int ordinal, std::string_view call, cuvmm::source_location where) {
  int const count = device_count(where);
  if (ordinal < 0 || ordinal >= count)
    throw_invalid_argument(call, "device " + std::to_string(ordinal) + " does not exist (the driver reports " +
                                     std::to_string(count) + " device(s))",
                           where);
  auto const index = static_cast<std::size_t>(ordinal);
  AttributeCache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    if (c.devices.size() > index && c.devices[index]) return *c.devices[index];
  }
  DeviceAttributes read;
  driver::device_get(&read.handle, ordinal, where);
  read.vmm = attribute(read.handle, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, where);
  read.posix_fd_handles = attribute(read.handle, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, where);
  read.fabric_handles = attribute(read.handle, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, where);
  read.multicast = attribute(read.handle, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, where);
  read.generic_compression = attribute(read.handle, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, where);
  read.gpu_direct_rdma_with_vmm =
      attribute(read.handle, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, where);
  read.dma_buf = attribute(read.handle, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, where);
  std::lock_guard lock(c.mutex);
  if (c.devices.size() <= index) c.devices.resize(index + 1);
  if (!c.devices[index]) c.devices[index] = read;
  return *c.devices[index];
}

}  // namespace caps

namespace {

using Source = cuvmm::source_location;

/// A granularity query's result; the refusals that mean "not available here" read as 0.
template <class EntryPoint>
std::size_t granularity_or_zero(const EntryPoint& query, CUresult result, std::size_t value, std::string_view what,
                                Source where = Source::current()) {
  if (result == CUDA_SUCCESS) return value;
  if (result == CUDA_ERROR_NOT_SUPPORTED || result == CUDA_ERROR_NOT_PERMITTED) return 0;
  query.throw_error(result, "querying the " + std::string(what) + " granularity", where);
}

Granularity chunk_granularity(int device, CUmemAllocationHandleType handle_types, bool compression,
                              std::string_view what) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = handle_types;
  if (compression) prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
  Granularity granularity;
  std::size_t value = 0;
  CUresult result = driver::mem_get_allocation_granularity.no_throw(&value, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  granularity.minimum = granularity_or_zero(driver::mem_get_allocation_granularity, result, value, what);
  if (granularity.minimum == 0) return {};
  result = driver::mem_get_allocation_granularity.no_throw(&value, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  granularity.recommended = granularity_or_zero(driver::mem_get_allocation_granularity, result, value, what);
  return granularity.recommended == 0 ? Granularity{} : granularity;
}

Granularity multicast_granularity(std::size_t size) {
  CUmulticastObjectProp prop{};
  prop.numDevices = 1;
  prop.size = size;
  prop.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  Granularity granularity;
  std::size_t value = 0;
  CUresult result = driver::multicast_get_granularity.no_throw(&value, &prop, CU_MULTICAST_GRANULARITY_MINIMUM);
  granularity.minimum = granularity_or_zero(driver::multicast_get_granularity, result, value, "multicast");
  if (granularity.minimum == 0) return {};
  result = driver::multicast_get_granularity.no_throw(&value, &prop, CU_MULTICAST_GRANULARITY_RECOMMENDED);
  granularity.recommended = granularity_or_zero(driver::multicast_get_granularity, result, value, "multicast");
  return granularity.recommended == 0 ? Granularity{} : granularity;
}

}  // namespace

DriverStatus driver_status() noexcept {
  DriverStatus status;
  try {
    driver::Availability const& availability = driver::availability();
    if (!availability.available) {
      status.reason = availability.reason;
      return status;
    }
    driver::driver_get_version(&status.driver_version);
    driver::device_get_count(&status.device_count);
    status.available = true;
  } catch (const std::exception& error) {
    status = DriverStatus{};
    status.reason = error.what();
  } catch (...) {
    status = DriverStatus{};
    status.reason = "CUDA driver unavailable: unknown error";
  }
  return status;
}

int device_count() noexcept { return driver_status().device_count; }

DeviceCaps device_caps(int device) {
  driver::require_driver("device_caps");
  caps::DeviceAttributes const attributes = caps::device_attributes(device, "device_caps");
  CUdevice const handle = attributes.handle;
  // Granularity and memory queries run in the device's primary context (cuMemGetInfo reports on
  // the current context's device); the caller's current context comes back afterwards.
  driver::PrimaryContext const context(handle);
  driver::CurrentContextScope const scope(context.get());

  DeviceCaps caps;
  caps.device = device;
  char name[256] = {};
  driver::device_get_name(name, static_cast<int>(sizeof name), handle);
  caps.name = name;
  int major = 0;
  int minor = 0;
  driver::device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle);
  driver::device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle);
  caps.compute_capability_major = major;
  caps.compute_capability_minor = minor;
  driver::device_total_mem(&caps.total_memory, handle);

  caps.vmm = attributes.vmm;
  caps.posix_fd_handles = attributes.posix_fd_handles;
  caps.fabric_handles = attributes.fabric_handles;
  caps.multicast = attributes.multicast;
  caps.generic_compression = attributes.generic_compression;
  caps.gpu_direct_rdma_with_vmm = attributes.gpu_direct_rdma_with_vmm;
  caps.dma_buf = attributes.dma_buf;
  caps.imex_channel_present = imex_channel_present();

  if (caps.vmm) {
    caps.granularity = chunk_granularity(device, CU_MEM_HANDLE_TYPE_NONE, false, "plain chunk");
    if (caps.posix_fd_handles)
      caps.posix_fd_granularity =
          chunk_granularity(device, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, false, "POSIX fd chunk");
    if (caps.fabric_handles)
      caps.fabric_granularity = chunk_granularity(device, CU_MEM_HANDLE_TYPE_FABRIC, false, "fabric chunk");
    if (caps.generic_compression)
      caps.compression_granularity = chunk_granularity(device, CU_MEM_HANDLE_TYPE_NONE, true, "compressible chunk");
  }
  if (caps.multicast && driver::multicast_get_granularity.available())
    caps.multicast_granularity =
        multicast_granularity(caps.granularity.minimum != 0 ? caps.granularity.minimum : 2 * MiB);

  std::size_t total = 0;
  driver::mem_get_info(&caps.free_memory, &total);
  return caps;
}

bool imex_channel_present() noexcept {
  DIR* const listing = ::opendir(imex_channel_directory.data());  // a literal: NUL-terminated
  if (listing == nullptr) return false;
  bool found = false;
  while (dirent const* entry = ::readdir(listing)) {
    std::string_view const name = entry->d_name;
    if (name != "." && name != "..") {
      found = true;
      break;
    }
  }
  ::closedir(listing);
  return found;
}

}  // namespace cuvmm
