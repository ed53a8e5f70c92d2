// cuvmm/device_caps.hpp: what this machine's driver and devices can do, for VMM.
//
// Never needs a GPU to compile or start: with no driver, driver_status() says so and
// device_count() is 0.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cuvmm {

/// Whether a CUDA driver could be reached, and if not, why.
struct DriverStatus {
  bool available = false;
  int driver_version = 0;  ///< e.g. 13000 for CUDA 13.0
  int device_count = 0;
  std::string reason;      ///< empty when available, e.g. "no CUDA driver found" otherwise
};

/// Never throws.
DriverStatus driver_status() noexcept;

/// Number of CUDA devices; 0 when there is no driver.
int device_count() noexcept;

struct Granularity {
  std::size_t minimum = 0;      ///< 0 when the kind of chunk is not supported
  std::size_t recommended = 0;
};

/// Every VMM capability of one device.
struct DeviceCaps {
  int device = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;

  bool vmm = false;                       ///< CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool posix_fd_handles = false;          ///< ..._HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
  bool fabric_handles = false;            ///< ..._HANDLE_TYPE_FABRIC_SUPPORTED
  bool multicast = false;                 ///< ..._MULTICAST_SUPPORTED
  bool generic_compression = false;       ///< ..._GENERIC_COMPRESSION_SUPPORTED
  bool gpu_direct_rdma_with_vmm = false;  ///< ..._GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
  bool dma_buf = false;                   ///< ..._DMA_BUF_SUPPORTED: ranges exportable as dmabuf fds (dmabuf.hpp)
  bool imex_channel_present = false;      ///< a channel device exists under imex_channel_directory()

  Granularity granularity;              ///< plain device chunks
  Granularity posix_fd_granularity;     ///< chunks exportable as POSIX fds
  Granularity fabric_granularity;       ///< chunks exportable as fabric handles
  Granularity compression_granularity;  ///< compressible chunks
  Granularity multicast_granularity;    ///< multicast objects (queried only when supported)
};

/// Throws cuvmm::Error when there is no driver or no such device.
DeviceCaps device_caps(int device);

/// Where IMEX channel devices live; fabric handles need one (e.g. channel0).
inline constexpr std::string_view imex_channel_directory = "/dev/nvidia-caps-imex-channels";

/// Whether any IMEX channel device exists.
bool imex_channel_present() noexcept;

/// What an administrator does to make fabric handles work on a node without an IMEX channel.
inline constexpr std::string_view imex_channel_remedy =
    "fabric handles need an IMEX channel: an administrator runs the nvidia-imex service and creates "
    "a channel device (e.g. /dev/nvidia-caps-imex-channels/channel0, with the major number of "
    "'nvidia-caps-imex-channels' from /proc/devices), or loads the driver with "
    "NVreg_CreateImexChannel0=1";

}  // namespace cuvmm
