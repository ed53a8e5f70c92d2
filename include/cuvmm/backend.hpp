// cuvmm/backend.hpp: the narrow primitive layer every container and allocator is written against.
//
// A Backend reserves address ranges, creates physical chunks, maps whole chunks into ranges,
// sets access, and exports/imports chunks as shareable handles. It is chosen at run time:
// CudaBackend (device memory through the driver), HostBackend (Linux virtual memory, so CI can
// exercise everything above it), FaultInjectingBackend (wraps another and fails the k-th call).
//
// Preconditions mirror the CUDA driver's, and HostBackend and CudaBackend check them with one
// shared ledger, so both backends accept and refuse the same calls:
//  - sizes and offsets are multiples of granularity(); map() maps a whole chunk, never part;
//  - map() targets an unmapped span inside a live range (or ranges side by side, as cuMemMap allows);
//  - set_access() and unmap() cover runs of whole mappings side by side (unmap: any sub-run too);
//  - a range is freed, by itself, only after every mapping in it was unmapped.
// A refused acquiring call throws cuvmm::Error (ErrorCode::invalid_argument) naming the driver call
// it stands for ("cuMemMap", "cuMemSetAccess", ...) on every backend, and changes nothing.
// Acquiring calls throw (cuvmm::Error, OutOfMemory, Unsupported); releasing calls are noexcept,
// tolerate a driver already shut down at process exit, and cannot be failed by fault injection
// (nothing can be rolled back once a release failed).
// Backends are thread-safe. They do no policy: no rounding, no caching, no growth.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include <cuvmm/types.hpp>
#include <cuvmm/unique_fd.hpp>

namespace cuvmm {

/// Live objects a backend has handed out and not yet taken back: the real tally, used by leak checks.
struct LiveCounts {
  std::size_t ranges = 0;          ///< reserved address ranges
  std::size_t chunks = 0;          ///< physical chunks (created or imported)
  std::size_t mappings = 0;        ///< chunks mapped into ranges
  std::size_t bytes_reserved = 0;  ///< address space held by the ranges
  std::size_t bytes_physical = 0;  ///< bytes of the chunks
  std::size_t bytes_mapped = 0;    ///< bytes of the mappings
  friend constexpr bool operator==(const LiveCounts&, const LiveCounts&) = default;
};

/// The operations of a backend, named for fault injection and call counts.
enum class BackendOp : std::uint8_t {
  reserve,
  free_range,
  create_chunk,
  release_chunk,
  map,
  unmap,
  set_access,
  export_posix_fd,
  import_posix_fd,
  export_fabric,
  import_fabric,
  chunk_info,
};
inline constexpr std::size_t backend_op_count = 12;
std::string_view to_string(BackendOp) noexcept;

/// Which granularity to ask for.
enum class GranularityKind { minimum, recommended };

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string_view name() const noexcept = 0;
  virtual MemorySpace space() const noexcept = 0;

  /// Size unit of chunks, mappings and ranges for chunks made with `props`. Every override
  /// repeats the default (`kind = GranularityKind::minimum`), so that `backend.granularity({})`
  /// compiles through the derived type too (test/consumer compiles it for each backend).
  virtual std::size_t granularity(const ChunkProperties& props,
                                  GranularityKind kind = GranularityKind::minimum) const = 0;

  /// Physical memory the chunks of `device` can still draw on, and its total (as cuMemGetInfo).
  struct MemoryInfo {
    std::size_t free = 0;
    std::size_t total = 0;
  };
  virtual MemoryInfo memory_info(int device) const = 0;

  /// Reserves `size` bytes of address space aligned to `alignment` (0: granularity). No memory behind it.
  virtual Address reserve(std::size_t size, std::size_t alignment) = 0;
  virtual void free_range(Address base, std::size_t size) noexcept = 0;

  virtual ChunkHandle create_chunk(std::size_t size, const ChunkProperties& props) = 0;
  virtual void release_chunk(ChunkHandle chunk) noexcept = 0;
  /// What was really created: size, device, handle types, whether compression was granted.
  virtual ChunkInfo chunk_info(ChunkHandle chunk) const = 0;

  /// Maps the whole of `chunk` (`size` = its size) at `address`. No access is granted yet.
  virtual void map(Address address, std::size_t size, ChunkHandle chunk) = 0;
  virtual void unmap(Address address, std::size_t size) noexcept = 0;

  /// Sets access on [address, address + size), which may cover many mappings side by side.
  virtual void set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) = 0;

  /// A new descriptor for `chunk` (close-on-exec) that another process can import.
  virtual UniqueFd export_posix_fd(ChunkHandle chunk) = 0;
  /// A new chunk handle for the memory behind `fd`, which the exporter says is `size` bytes (the
  /// driver cannot tell an importer the size, and maps only whole chunks). A size that does not
  /// match the chunk is refused with cuvmm::Error. `fd` stays owned by the caller.
  virtual ChunkHandle import_posix_fd(int fd, std::size_t size) = 0;
  virtual FabricHandle export_fabric(ChunkHandle chunk) = 0;
  /// As import_posix_fd, for a fabric handle.
  virtual ChunkHandle import_fabric(const FabricHandle& handle, std::size_t size) = 0;

  virtual LiveCounts live_counts() const noexcept = 0;
};

}  // namespace cuvmm
