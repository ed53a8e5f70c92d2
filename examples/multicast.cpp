// docs/vmm-features.md's multicast example. It runs only when CUVMM_TEST_MULTICAST=1 is set (by whoever runs it
// on a machine where creating a multicast object is allowed) and two GPUs are present; otherwise it
// reports "skipped" having asked nothing. Where the gate refuses, nothing is created and it reports
// the gate's reason as "skipped".
// [readme]
#include <cuvmm/multicast.hpp>
#include <cuvmm/multimem.hpp>
// [readme]

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "example_support.hpp"

int main() {
  char const* const allowed = std::getenv("CUVMM_TEST_MULTICAST");
  if (allowed == nullptr || std::strcmp(allowed, "1") != 0) {
    std::puts("skipped: set CUVMM_TEST_MULTICAST=1 where creating a multicast object is allowed");
    return example::skipped;
  }
  if (!example::has_devices(2)) return example::skipped;
  cudaStream_t const stream = example::new_stream();
  int const rank = 0;
  std::size_t const n = 1 << 20;
  cuvmm::PhysicalChunk const chunk_on_device_0(cuvmm::cuda_backend(0), 64 * cuvmm::MiB, {.device = 0});
  cuvmm::PhysicalChunk const chunk_on_device_1(cuvmm::cuda_backend(0), 64 * cuvmm::MiB, {.device = 1});

  // [readme]
  int const devices[] = {0, 1};
  if (cuvmm::multicast_support(devices).supported) {         // asks, creates nothing
    cuvmm::MulticastObject group(devices, 64 * cuvmm::MiB);  // else: cuvmm::Unsupported, nothing created
    group.bind(chunk_on_device_0);                           // each device's PhysicalChunk
    group.bind(chunk_on_device_1);
    cuvmm::MulticastMapping const all = group.map();         // one address that reaches every device
    cuvmm::launch_multimem_all_reduce_sum(reinterpret_cast<float*>(all.address()), n, rank, 2, stream);
    cudaStreamSynchronize(stream);                           // before `all` is unmapped: unmapping does not wait
  }
  // [readme]

  cuvmm::MulticastSupport const support = cuvmm::multicast_support(devices);
  if (!support.supported) {
    std::printf("skipped: %s\n", support.reason.c_str());
    return example::skipped;
  }
  example::check_cuda(cudaGetLastError(), "the all-reduce");
  return 0;
}
