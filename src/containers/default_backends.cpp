// The process-wide default backends of the containers. Like cuda_backend(), never destroyed, so
// buffers destroyed during static destruction can still reach their backend.
#include <cuvmm/detail/memory_spaces.hpp>

namespace cuvmm::detail {

HostBackend& default_host_backend() {
  static HostBackend* const backend = new HostBackend();
  return *backend;
}

}  // namespace cuvmm::detail
