// The host memory space's process-wide default backend (see cuvmm/detail/host_space.hpp).
//
// Owns: one HostBackend, created on first use and never destroyed (like cuda_backend()), so
// buffers destroyed during static destruction can still reach their backend.
// Invariants: every call returns the same backend.
// Never does: device work (this file includes no CUDA or Thrust header).
#include <cuvmm/detail/host_space.hpp>

namespace cuvmm::detail {

HostBackend& default_host_backend() {
  static HostBackend* const backend = new HostBackend();
  return *backend;
}

}  // namespace cuvmm::detail
