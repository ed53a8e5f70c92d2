// cuvmm/cuda_backend.hpp: device memory through the CUDA driver's VMM API.
//
// All driver calls go through cuvmm's driver layer, which resolves entry points at run time, so a
// program that uses this header starts on a machine without a driver and gets a clear cuvmm::Error
// ("no CUDA driver found") when it constructs a CudaBackend.
//
// A CudaBackend retains its device's primary context for its lifetime and makes it current on a
// calling thread that has no current context (as the CUDA runtime does on first use). Chunks may be
// placed on any device (ChunkProperties::device); access grants name devices too.
#pragma once

#include <memory>

#include <cuvmm/backend.hpp>

namespace cuvmm {

class CudaBackend final : public Backend {
 public:
  /// Throws cuvmm::Error when no driver or no such device, cuvmm::Unsupported without VMM support.
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;

  /// The device whose primary context this backend holds.
  int device() const noexcept;

  std::string_view name() const noexcept override { return "cuda"; }
  MemorySpace space() const noexcept override { return MemorySpace::device; }
  // The default is re-declared: a call through the derived type sees only this declaration's.
  std::size_t granularity(const ChunkProperties& props, GranularityKind kind = GranularityKind::minimum) const override;
  MemoryInfo memory_info(int device) const override;
  Address reserve(std::size_t size, std::size_t alignment) override;
  void free_range(Address base, std::size_t size) noexcept override;
  ChunkHandle create_chunk(std::size_t size, const ChunkProperties& props) override;
  void release_chunk(ChunkHandle chunk) noexcept override;
  ChunkInfo chunk_info(ChunkHandle chunk) const override;
  void map(Address address, std::size_t size, ChunkHandle chunk) override;
  void unmap(Address address, std::size_t size) noexcept override;
  void set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) override;
  UniqueFd export_posix_fd(ChunkHandle chunk) override;
  ChunkHandle import_posix_fd(int fd, std::size_t size) override;
  FabricHandle export_fabric(ChunkHandle chunk) override;
  ChunkHandle import_fabric(const FabricHandle& handle, std::size_t size) override;
  LiveCounts live_counts() const noexcept override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The process-wide CudaBackend of `device`, made on first use and never destroyed (so objects
/// destroyed at process exit can still use it).
CudaBackend& cuda_backend(int device = 0);

}  // namespace cuvmm
