// runtime_check.hpp: turns a failed CUDA runtime call into cuvmm's typed errors.
// For the few runtime-API calls the library makes outside the driver layer (stream-ordered copies
// and fills, events); cudaErrorMemoryAllocation becomes OutOfMemory, everything else Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cuvmm/source_location.hpp>
#include <string>

namespace cuvmm::detail {

void check_runtime(cudaError_t status, const char* call, std::string context = {},
                   cuvmm::source_location where = cuvmm::source_location::current());

}  // namespace cuvmm::detail
