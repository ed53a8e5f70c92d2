// src/containers/runtime_check.hpp: turning a failed CUDA runtime call (kernel launches, copies,
// stream waits of the containers' data movement) into the matching cuvmm error.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>

namespace cuvmm::detail {

/// Does nothing on cudaSuccess; otherwise throws cuvmm::OutOfMemory for cudaErrorMemoryAllocation
/// and cuvmm::Error for anything else, naming `call`, the error and `context`.
void check_runtime(cudaError_t status, const char* call, std::string context = {},
                   std::source_location where = std::source_location::current());

}  // namespace cuvmm::detail
