// check_runtime: a failed CUDA runtime call as cuvmm's typed error (see runtime_check.hpp).
// Owns nothing. Invariant: cudaErrorMemoryAllocation is OutOfMemory, every other failure Error of
// ErrorDomain::cuda. Never does: throw for cudaSuccess.
#include "errors/runtime_check.hpp"

#include <cuvmm/error.hpp>

namespace cuvmm::detail {

void check_runtime(cudaError_t status, const char* call, std::string context, cuvmm::source_location where) {
  if (status == cudaSuccess) return;
  ErrorDetails d = foreign_error_details(ErrorDomain::cuda, static_cast<int>(status), cudaGetErrorName(status),
                                         cudaGetErrorString(status), call, std::move(context), where);
  if (status == cudaErrorMemoryAllocation) throw OutOfMemory(std::move(d));
  throw Error(std::move(d));
}

}  // namespace cuvmm::detail
