// src/caps/device_attributes.hpp: the device attributes cuvmm decides by, read once per process.
//
// Owns: a process-wide cache of each device's handle and VMM attributes (attributes do not change
// while a process runs), filled on first use under a mutex and never freed (a backend may read it
// while the process exits).
// Invariants: one driver query per attribute and device per process; device_caps() and CudaBackend
// read the same values.
// Never does: retain a context, create memory, or call cuMulticastCreate.
#pragma once

#include <cuda.h>

#include <string_view>

#include <cuvmm/source_location.hpp>

namespace cuvmm::caps {

/// What one device reports (CU_DEVICE_ATTRIBUTE_..._SUPPORTED), and its driver handle.
struct DeviceAttributes {
  CUdevice handle = 0;
  bool vmm = false;                       ///< VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool posix_fd_handles = false;          ///< HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
  bool fabric_handles = false;            ///< HANDLE_TYPE_FABRIC_SUPPORTED
  bool multicast = false;                 ///< MULTICAST_SUPPORTED
  bool generic_compression = false;       ///< GENERIC_COMPRESSION_SUPPORTED
  bool gpu_direct_rdma_with_vmm = false;  ///< GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
  bool dma_buf = false;                   ///< DMA_BUF_SUPPORTED
};

/// Devices the driver reports (read once). Throws cuvmm::Error when there is no driver.
int device_count(cuvmm::source_location where = cuvmm::source_location::current());

/// The attributes of device `ordinal`, read on first use. A device that does not exist is refused
/// with cuvmm::Error (ErrorCode::invalid_argument) naming `call`.
DeviceAttributes device_attributes(int ordinal, std::string_view call,
                                          cuvmm::source_location where = cuvmm::source_location::current());

}  // namespace cuvmm::caps
