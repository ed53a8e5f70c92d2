#include "errors/runtime_check.hpp"

#include <cuvmm/error.hpp>

namespace cuvmm::detail {

void check_runtime(cudaError_t status, const char* call, std::string context, cuvmm::source_location where) {
  if (status == cudaSuccess) return;
  ErrorDetails d;
  d.call = call;
  d.domain = ErrorDomain::cuda;
  d.code = static_cast<int>(status);
  d.code_name = cudaGetErrorName(status);
  d.code_text = cudaGetErrorString(status);
  d.context = std::move(context);
  d.where = where;
  if (status == cudaErrorMemoryAllocation) throw OutOfMemory(std::move(d));
  throw Error(std::move(d));
}

}  // namespace cuvmm::detail
