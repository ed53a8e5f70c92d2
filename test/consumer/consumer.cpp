// Uses the installed (or subproject) cuvmm through its umbrella header: reserve, create, map, grant,
// write, read back (host backend). Also compiles the README's layers snippet, backend.granularity({})
// through each backend type (the overrides must repeat the base's default argument).
#include <cuvmm/cuvmm.hpp>

#include <cstdint>
#include <cstdio>

// Compiled, not run (a CudaBackend needs a GPU).
[[maybe_unused]] std::size_t default_granularities(cuvmm::CudaBackend& gpu, cuvmm::HostBackend& host,
                                                   cuvmm::FaultInjectingBackend& faulty, cuvmm::Backend& any) {
  return gpu.granularity({}) + host.granularity({}) + faulty.granularity({}) + any.granularity({});
}

// The README's "layers" snippet, compiled (not run: it needs a GPU).
[[maybe_unused]] void readme_layers_snippet() {
  cuvmm::CudaBackend& gpu = cuvmm::cuda_backend(0);
  std::size_t const chunk_bytes = gpu.granularity({});  // 2 MiB on an H200
  cuvmm::AddressRange range(gpu, 64 * chunk_bytes);     // address space only
  cuvmm::PhysicalChunk chunk(gpu, chunk_bytes);         // memory only
  cuvmm::AccessGrant const rw[] = {{.device = 0, .access = cuvmm::Access::read_write}};
  cuvmm::Mapping mapping(range, 0, chunk, rw);  // now usable at range.base()
}

int main() {
  cuvmm::HostBackend backend({.granularity = 64 * cuvmm::KiB});
  if (backend.granularity({}) != 64 * cuvmm::KiB) {
    std::printf("consumer: HostBackend::granularity({}) is %zu, not 64 KiB\n", backend.granularity({}));
    return 1;
  }
  cuvmm::AddressRange range(backend, 4 * 64 * cuvmm::KiB);
  cuvmm::PhysicalChunk chunk(backend, 64 * cuvmm::KiB);
  cuvmm::AccessGrant const read_write[] = {{.device = 0, .access = cuvmm::Access::read_write}};
  cuvmm::Mapping mapping(range, 64 * cuvmm::KiB, chunk, read_write);
  auto* words = reinterpret_cast<std::uint64_t*>(mapping.address());
  std::size_t const count = mapping.size() / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < count; ++i) words[i] = i * 0x9E3779B97F4A7C15ull;
  for (std::size_t i = 0; i < count; ++i) {
    if (words[i] != i * 0x9E3779B97F4A7C15ull) {
      std::printf("consumer: mismatch at word %zu\n", i);
      return 1;
    }
  }
  cuvmm::DriverStatus const driver = cuvmm::driver_status();
  std::printf("consumer: cuvmm %s works (CUDA driver: %s)\n", cuvmm::version_string,
              driver.available ? "available" : driver.reason.c_str());
  return 0;
}
