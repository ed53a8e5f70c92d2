// device_runtime.hpp: the parts of cuvmm-plan that use the CUDA runtime directly, as baselines
// for cuvmm: cudaMalloc copy-and-grow, a preallocated buffer, cudaMallocAsync and cudaMalloc as
// trace allocators, and device fills. The header needs no CUDA headers (the session owns a stream
// behind a pointer). Only constructed when a GPU is present; every runtime error is a
// std::runtime_error naming the call, except allocation failures, which are std::bad_alloc
// (growth) or a null pointer (trace allocators), as measure.hpp expects.
#pragma once

#include <cstddef>
#include <memory>

#include "measure.hpp"

namespace cuvmm::plan {

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
  /// cudaMalloc a buffer `factor` times larger when full, copy, cudaFree the old one.
  std::unique_ptr<GrowthStrategy> copy_and_grow(double factor);
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

}  // namespace cuvmm::plan
