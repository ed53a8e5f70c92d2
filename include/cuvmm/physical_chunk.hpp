// cuvmm/physical_chunk.hpp: sole owner of one physical memory chunk.
//
// A chunk is created on one device (or imported from another process's handle), may be mapped at
// any number of addresses with cuvmm::Mapping, and is released when its owner dies. It records what
// was asked for and what the backend granted (compression may be refused), read back after creation.
#pragma once

#include <cstddef>

#include <cuvmm/backend.hpp>

namespace cuvmm {

class PhysicalChunk {
 public:
  PhysicalChunk() noexcept = default;
  /// Creates `size` bytes (a positive multiple of the granularity for `props`).
  PhysicalChunk(Backend& backend, std::size_t size, const ChunkProperties& props = {});
  /// Imports the memory behind a POSIX fd exported by this or another process, whose size the
  /// exporter announced (a wrong size is refused); `fd` is not consumed.
  [[nodiscard]] static PhysicalChunk import_posix_fd(Backend& backend, int fd, std::size_t size);
  /// Imports the memory behind a fabric handle of `size` bytes.
  [[nodiscard]] static PhysicalChunk import_fabric(Backend& backend, const FabricHandle& handle, std::size_t size);

  PhysicalChunk(const PhysicalChunk&) = delete;
  PhysicalChunk& operator=(const PhysicalChunk&) = delete;
  PhysicalChunk(PhysicalChunk&& other) noexcept;
  PhysicalChunk& operator=(PhysicalChunk&& other) noexcept;
  ~PhysicalChunk();

  [[nodiscard]] ChunkHandle handle() const noexcept { return handle_; }
  [[nodiscard]] Backend* backend() const noexcept { return backend_; }
  [[nodiscard]] std::size_t size() const noexcept { return info_.size; }
  [[nodiscard]] int device() const noexcept { return info_.device; }
  [[nodiscard]] HandleType shareable() const noexcept { return info_.shareable; }
  [[nodiscard]] bool compression_requested() const noexcept { return compression_requested_; }
  [[nodiscard]] bool compression_granted() const noexcept { return info_.compression_granted; }
  /// Whether the driver created it usable by GPUDirect RDMA (ChunkProperties::gpu_direct_rdma).
  [[nodiscard]] bool gpu_direct_rdma() const noexcept { return info_.gpu_direct_rdma; }
  [[nodiscard]] bool imported() const noexcept { return imported_; }
  [[nodiscard]] bool empty() const noexcept { return backend_ == nullptr; }
  explicit operator bool() const noexcept { return !empty(); }

  /// A new close-on-exec descriptor for this chunk (it must have been created shareable as posix_fd).
  [[nodiscard]] UniqueFd export_posix_fd() const;
  [[nodiscard]] FabricHandle export_fabric() const;

  /// Releases the chunk now. Memory still mapped somewhere stays valid until it is unmapped.
  void reset() noexcept;

 private:
  /// Adopts `handle` (released if reading its properties throws).
  PhysicalChunk(Backend& backend, ChunkHandle handle, bool compression_requested, bool imported);

  Backend* backend_ = nullptr;
  ChunkHandle handle_{};
  ChunkInfo info_{};
  bool compression_requested_ = false;
  bool imported_ = false;
};

/// Applies a compression policy to a chunk made with ChunkProperties::compression: throws
/// cuvmm::Unsupported (naming the device, and the remedy) when `policy` is Compression::required
/// and the backend did not grant compression; otherwise does nothing. The chunk is not touched:
/// a caller that throws releases it as usual.
void check_compression(const PhysicalChunk& chunk, Compression policy);

}  // namespace cuvmm
