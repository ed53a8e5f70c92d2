// bench_support.hpp: the few CUDA runtime helpers every benchmark program uses. The error check
// is cuvmm-plan's (tools/cuvmm-plan/cuda_check.hpp): one helper, the arrow running bench -> tools.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda_check.hpp"

namespace cuvmm::bench {

using cuvmm::plan::check_cuda;

/// A non-blocking stream, destroyed with its owner.
struct Stream {
  Stream() { check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t stream = nullptr;
};

/// Device memory free now, and in use now (total - free), as cudaMemGetInfo reports them.
inline std::size_t device_memory_free() {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}
inline std::size_t device_memory_in_use() {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return total - free;
}

}  // namespace cuvmm::bench
