// Uses the installed (or subproject) cuvmm through its umbrella header: reserve, create, map, grant,
// write, read back (host backend). Also compiles backend.granularity({}) through each backend type
// (the overrides must repeat the base's default argument). The README's layers snippet is compiled
// from its own program, examples/layers.cpp, by this project's build files.
#include <cuvmm/cuvmm.hpp>

#include <cstdint>
#include <cstdio>

// Compiled, not run (a CudaBackend needs a GPU).
[[maybe_unused]] std::size_t default_granularities(cuvmm::CudaBackend& gpu, cuvmm::HostBackend& host,
                                                   cuvmm::FaultInjectingBackend& faulty, cuvmm::Backend& any) {
  return gpu.granularity({}) + host.granularity({}) + faulty.granularity({}) + any.granularity({});
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
