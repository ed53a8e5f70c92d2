// runtime_check.hpp: turns a failed CUDA runtime call into cuvmm's typed errors.
// For the few runtime-API calls the library makes outside the driver layer (stream-ordered copies
// and fills, events); cudaErrorMemoryAllocation becomes OutOfMemory, everything else Error.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>

namespace cuvmm::detail {

void check_runtime(cudaError_t status, const char* call, std::string context = {},
                   std::source_location where = std::source_location::current());

}  // namespace cuvmm::detail
