// cuda_check.hpp: the one CUDA-runtime error check of cuvmm-plan and the benchmarks built on its
// measurement code (bench/ includes it from here).
//
// Owns: nothing. Invariants: a failed runtime call becomes a std::runtime_error naming the call and
// the runtime's text. Never does: clear the runtime's sticky error state (callers that expect a
// failure, such as exhaustion, test the status themselves).
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace cuvmm::plan {

/// Throws std::runtime_error "CALL failed: TEXT" when `status` is not cudaSuccess.
inline void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
}

}  // namespace cuvmm::plan
