// docs/nccl-rdma.md's example of a growth observer, on host memory (so it runs anywhere): an observer
// that keeps a registry of the buffer's chunks in step with its growth and shrinking.
#include <cuvmm/growth_observer.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "example_support.hpp"

namespace {

// [readme]
/// Keeps what a registration would: one entry per chunk, added after the map, removed before the unmap.
class Registry final : public cuvmm::GrowthObserver {
 public:
  std::map<cuvmm::Address, std::size_t> registered;  // address -> bytes
  void on_mapped(const cuvmm::BackedRange& r) override { registered[r.address] = r.bytes; }
  void on_unmapping(const cuvmm::BackedRange& r) noexcept override { registered.erase(r.address); }
};
// [readme]

std::size_t total(const std::map<cuvmm::Address, std::size_t>& m) {
  std::size_t bytes = 0;
  for (const auto& [address, size] : m) bytes += size;
  return bytes;
}

}  // namespace

int main() {
  cuvmm::HostBackend host({.granularity = 64 * cuvmm::KiB});
  cuvmm::GrowableOptions options;
  options.max_capacity_bytes = 64 * cuvmm::MiB;
  std::vector<float> const values(1 << 20, 1.0f);

  // [readme]
  auto registry = std::make_shared<Registry>();
  cuvmm::HostGrowableBuffer<float> buffer(host, options);
  buffer.add_observer(registry);  // told of every chunk from now on
  buffer.append(values);          // on_mapped for each new chunk, before the copy
  buffer.resize(10);
  buffer.shrink_to_fit();         // on_unmapping for each chunk released, before the unmap
  // [readme]

  example::check(total(registry->registered) == buffer.capacity() * sizeof(float),
                 "the registry holds exactly the mapped chunks");
  example::check(registry->registered.begin()->first == reinterpret_cast<cuvmm::Address>(buffer.data()),
                 "the first chunk starts at data()");
  return 0;
}
