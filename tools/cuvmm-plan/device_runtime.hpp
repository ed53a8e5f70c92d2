// device_runtime.hpp: the parts of cuvmm-plan that use the CUDA runtime directly, as baselines
// for cuvmm: copy-and-grow with cudaMalloc or cudaMallocAsync, thrust::device_vector, a
// preallocated buffer, cudaMallocAsync and cudaMalloc as trace allocators, and device fills; and
// the one place that makes any growth strategy from its name (cuvmm-plan and bench_growth use it). The header needs no CUDA headers (the session owns a stream
// behind a pointer). Only constructed when a GPU is present; every runtime error is a
// std::runtime_error naming the call, except allocation failures, which are std::bad_alloc
// (growth) or a null pointer (trace allocators), as measure.hpp expects.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cuvmm/types.hpp>

#include "measure.hpp"

namespace cuvmm::plan {

/// How copy-and-grow allocates: cudaMalloc/cudaFree (a host wait for each copy before the old
/// buffer is freed) or cudaMallocAsync/cudaFreeAsync from the device's default pool (all ordered
/// on the stream, no host wait).
enum class DeviceAllocation { malloc, malloc_async };

class DeviceRuntimeSession {
 public:
  /// Uses device 0 and a new non-blocking stream for all fills, copies and stream-ordered calls;
  /// warms up cudaMalloc, cudaMemsetAsync and cudaMemcpyAsync before anything is measured.
  DeviceRuntimeSession();
  ~DeviceRuntimeSession();
  DeviceRuntimeSession(const DeviceRuntimeSession&) = delete;
  DeviceRuntimeSession& operator=(const DeviceRuntimeSession&) = delete;

  /// Fills with cudaMemsetAsync on the session's stream; finish() synchronizes that stream.
  MemoryOps& memory_ops();
  /// The session's stream: fills, copies and stream-ordered allocations go on it.
  [[nodiscard]] Stream stream() const;
  /// Allocate a buffer `factor` times larger when full, copy, free the old one.
  std::unique_ptr<GrowthStrategy> copy_and_grow(double factor, DeviceAllocation allocation = DeviceAllocation::malloc);
  /// thrust::device_vector<uint8_t>::resize (thrust's own growth; value-initializes new bytes).
  std::unique_ptr<GrowthStrategy> thrust_vector();
  /// One cudaMalloc of `capacity` bytes made now (outside any timing): the physical limit.
  std::unique_ptr<GrowthStrategy> preallocated(std::size_t capacity);
  /// cudaMallocAsync/cudaFreeAsync on the stream; held = the default pool's reserved memory
  /// (trimmed to 0 and its high-water mark reset when made; trimmed to 0 again when destroyed).
  std::unique_ptr<TraceAllocator> cuda_malloc_async();
  /// cudaMalloc/cudaFree; held = device memory in use (cudaMemGetInfo) minus that at creation.
  std::unique_ptr<TraceAllocator> cuda_malloc();
  /// Waits for the whole device (between measurements, so one's teardown does not run into the next).
  void synchronize_device();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The CUDA runtime's version number (cudaRuntimeGetVersion: 13000 for 13.0; it needs no GPU), 0
/// when it cannot tell.
int cuda_runtime_version();

/// The growth strategies measured on this backend, by name: the growable ones everywhere, the CUDA
/// runtime baselines only with a GPU (`device`).
std::vector<std::string> growth_strategy_names(bool device);

/// A new growth strategy by its name (measure.hpp lists the names). `target_bytes` sizes the
/// preallocated buffer. Throws std::invalid_argument for an unknown name or a baseline asked for
/// without `device`; std::bad_alloc when a preallocated buffer does not fit.
std::unique_ptr<GrowthStrategy> make_growth_strategy(std::string_view name, Backend& backend,
                                                     DeviceRuntimeSession* device, std::size_t target_bytes);

}  // namespace cuvmm::plan
