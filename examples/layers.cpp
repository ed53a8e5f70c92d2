// docs/cpp.md's example of the layers under the containers: one address range, one chunk, one
// mapping, on the CUDA backend. Needs a GPU.
// [readme]
#include <cuvmm/cuvmm.hpp>
// [readme]

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;

  // [readme]
  cuvmm::CudaBackend& gpu = cuvmm::cuda_backend(0);
  std::size_t const chunk_bytes = gpu.granularity({});           // 2 MiB on an H200
  cuvmm::AddressRange range(gpu, 64 * chunk_bytes);              // address space only
  cuvmm::PhysicalChunk chunk(gpu, chunk_bytes);                  // memory only
  cuvmm::AccessGrant const rw[] = {{.device = 0, .access = cuvmm::Access::read_write}};
  cuvmm::Mapping mapping(range, 0, chunk, rw);                   // now usable at range.base()
  // destruction unmaps, releases and frees, in that order
  // [readme]

  void* const base = reinterpret_cast<void*>(range.base());
  example::check_cuda(cudaMemset(base, 0x5a, chunk_bytes), "cudaMemset");
  unsigned char last = 0;
  example::check_cuda(cudaMemcpy(&last, static_cast<unsigned char*>(base) + chunk_bytes - 1, 1, cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
  example::check(last == 0x5a, "the mapped chunk holds what was written");
  example::check(gpu.live_counts().mappings >= 1 && range.live_mappings() == 1, "one live mapping");
  return 0;
}
