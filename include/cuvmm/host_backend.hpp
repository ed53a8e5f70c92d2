// cuvmm/host_backend.hpp: the backend on plain Linux virtual memory.
//
// It behaves like the CUDA driver's VMM API, on host memory, so that everything above the backend
// (growth, rollback, arena bookkeeping, fd passing) runs for real on machines without a GPU:
//  - reserve:    mmap(PROT_NONE, MAP_NORESERVE), aligned by over-reserving and trimming;
//  - chunk:      memfd_create + fallocate, so exhaustion is an error now and not a SIGBUS later;
//                and first a check against the memory the machine has free (MemAvailable and the
//                cgroup's limit, host_available_memory_bytes()): fallocate on a memfd does not refuse
//                more than the machine has, the kernel's OOM killer would act instead, and it may
//                kill another process (pages of an unmapped memfd count toward no process);
//  - map:        mmap(MAP_FIXED | MAP_SHARED) of the whole memfd, only over a reserved, unmapped span;
//  - unmap:      puts a PROT_NONE mapping back, so the reservation keeps no hole;
//  - set_access: mprotect over mapped spans only;
//  - posix fd:   the memfd itself (dup'ed) is the shareable handle;
//  - fabric:     bytes naming the exporter's pid and memfd (and its inode), which another process
//                of the same machine opens with pidfd_getfd or /proc: a handle made only of bytes,
//                as a CUmemFabricHandle is, so code that exchanges fabric handles (over MPI) runs
//                for real without a GPU. Valid only while the exporter keeps the chunk.
// Fork: host-backend memory is not inherited by a forked child, as device memory is not. Every
// mapping is marked MADV_DONTFORK, so the child has nothing at those addresses (it can neither read
// nor write the parent's blocks), and a child's calls into a HostBackend it inherited are refused
// with cuvmm::Unsupported (releasing calls touch only the child's own copies), so it cannot take for
// itself the pages the parent's books still hold. A child that needs host memory makes its own
// HostBackend (and what is built on it); the parent's objects stay untouched by the child.
// Checks the same preconditions as the driver, with the same code as CudaBackend (whole-chunk maps,
// no double map, access only on runs of whole mappings, no free of a range with mappings), and
// reports violations as cuvmm::Error naming the driver call (e.g. "cuMemMap").
#pragma once

#include <memory>

#include <cuvmm/backend.hpp>

namespace cuvmm {

/// Bytes of host memory a new chunk may take now without the kernel having to reclaim it by
/// killing a process: the smallest of MemAvailable (/proc/meminfo) and, for this process's cgroup
/// and each one above it, the memory limit minus the usage that cannot be reclaimed (cgroup v2:
/// memory.max, memory.current minus inactive_file of memory.stat; v1: memory.limit_in_bytes,
/// memory.usage_in_bytes minus total_inactive_file). SIZE_MAX when none of them can be read.
std::size_t host_available_memory_bytes();

class HostBackend final : public Backend {
 public:
  struct Options {
    /// Size unit of chunks and ranges; a multiple of the page size. 2 MiB, as on the H200.
    std::size_t granularity = 2 * MiB;
    /// Most physical bytes live at once; 0 for no limit beyond the machine's. Past it,
    /// create_chunk throws OutOfMemory, as the driver does when the device is full.
    std::size_t physical_limit = 0;
    /// Memory the machine has free for new chunks. 0: host_available_memory_bytes(), read at
    /// every create_chunk. Otherwise it stands in for that reading as it was when the backend
    /// was made (so tests can see the refusal without using the memory): what the backend's
    /// chunks hold is taken from it. A chunk larger than what is free throws OutOfMemory before
    /// any memory is taken.
    std::size_t available_memory = 0;
  };

  HostBackend();
  explicit HostBackend(Options options);
  ~HostBackend() override;

  const Options& options() const noexcept;

  std::string_view name() const noexcept override { return "host"; }
  MemorySpace space() const noexcept override { return MemorySpace::host; }
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
  /// Bytes that a process of this machine imports while this one keeps the chunk (see above).
  FabricHandle export_fabric(ChunkHandle chunk) override;
  ChunkHandle import_fabric(const FabricHandle& handle, std::size_t size) override;
  LiveCounts live_counts() const noexcept override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cuvmm
