// cuvmm/types.hpp: the small value types every layer shares.
//
// An `Address` is a plain integer (like CUdeviceptr) because the backend layer speaks of address
// ranges, not objects. Access and handle-type sets are explicit enums; nothing here allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// The CUDA headers' stream type, declared here so this header needs none of them.
struct CUstream_st;

namespace cuvmm {

/// A virtual address inside a reserved range (device or host). Zero means "none".
using Address = std::uintptr_t;

/// A CUDA stream: the same type as cudaStream_t and CUstream. nullptr is the legacy default stream.
using Stream = ::CUstream_st*;

/// Which memory a backend serves. Containers pick their pointer type from it.
enum class MemorySpace { device, host };

/// Protection of a mapped span for one accessor.
enum class Access : std::uint8_t {
  none,        ///< not accessible (unmapped from the accessor's view)
  read,        ///< read-only: a write faults
  read_write,  ///< ordinary memory
};

/// One accessor's rights on a span: which device (ignored by the host backend) and what access.
struct AccessGrant {
  int device = 0;
  Access access = Access::read_write;
  friend constexpr bool operator==(const AccessGrant&, const AccessGrant&) = default;
};

/// Kinds of shareable handle a chunk may be exported as. A set of them is a bit mask.
enum class HandleType : std::uint8_t {
  none = 0,
  posix_fd = 1u << 0,  ///< a POSIX file descriptor, passed between processes of one machine
  fabric = 1u << 1,    ///< a CUmemFabricHandle (64 bytes), across nodes through IMEX
};

constexpr HandleType operator|(HandleType a, HandleType b) noexcept {
  return static_cast<HandleType>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
constexpr HandleType operator&(HandleType a, HandleType b) noexcept {
  return static_cast<HandleType>(static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(b));
}
/// True when every type in `wanted` is in `set`.
constexpr bool contains(HandleType set, HandleType wanted) noexcept { return (set & wanted) == wanted; }

/// What a container does about generic compression (chunks are compressible or not; the device
/// decides what it grants, which the chunk reads back after creation).
enum class Compression : std::uint8_t {
  none,       ///< ordinary memory
  preferred,  ///< ask for it; where it is not granted, use ordinary memory and report that in stats
  required,   ///< ask for it; where it is not granted, throw cuvmm::Unsupported and change nothing
};

/// What to ask of a new physical chunk. Sizes are not part of it: they are per call.
struct ChunkProperties {
  int device = 0;                                ///< where the memory lives (device ordinal)
  HandleType shareable = HandleType::none;       ///< handle types it must be exportable as
  bool compression = false;                      ///< ask for generic compression
  /// Ask that the chunk be usable by GPUDirect RDMA (the driver's gpuDirectRDMACapable), as NCCL's
  /// own VMM allocations do; refused with cuvmm::Unsupported where the device does not report RDMA
  /// support for VMM memory (DeviceCaps::gpu_direct_rdma_with_vmm). Host memory ignores it.
  bool gpu_direct_rdma = false;
  friend constexpr bool operator==(const ChunkProperties&, const ChunkProperties&) = default;
};

/// What the backend actually created (compression may be refused by the device).
struct ChunkInfo {
  std::size_t size = 0;
  int device = 0;
  HandleType shareable = HandleType::none;
  bool compression_granted = false;
  bool gpu_direct_rdma = false;  ///< created usable by GPUDirect RDMA
};

/// An opaque backend handle of one physical chunk (a CUmemGenericAllocationHandle, or a memfd).
struct ChunkHandle {
  std::uint64_t value = 0;
  friend constexpr bool operator==(ChunkHandle, ChunkHandle) = default;
};

/// The 64 opaque bytes of a CUmemFabricHandle.
struct FabricHandle {
  std::byte data[64] = {};
};

std::string_view to_string(Access) noexcept;
std::string_view to_string(MemorySpace) noexcept;
std::string_view to_string(Compression) noexcept;

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;

/// Rounds `bytes` up to a multiple of `granularity` (a power of two or any positive value).
/// Returns 0 on overflow, which callers treat as "too large". The one place sizes are rounded.
constexpr std::size_t round_up(std::size_t bytes, std::size_t granularity) noexcept {
  if (granularity == 0) return bytes;
  std::size_t const rem = bytes % granularity;
  if (rem == 0) return bytes;
  std::size_t const add = granularity - rem;
  return bytes > SIZE_MAX - add ? 0 : bytes + add;
}

}  // namespace cuvmm
