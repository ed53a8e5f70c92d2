// docs/vmm-features.md's example of one buffer over several devices. Needs five GPUs (four hold chunks, a fifth
// is granted read access).
#include <cuvmm/growable_buffer.hpp>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(5)) return example::skipped;

  // [readme]
  cuvmm::GrowableOptions options;
  options.devices = {0, 1, 2, 3};                      // chunks of all four in one range
  options.placement = cuvmm::Placement::balanced;      // each chunk on the device holding least (or ::striped)
  cuvmm::GrowableBuffer<float> values(options);        // read-write for those four devices, per allocation
  cuvmm::AccessGrant const peer[] = {{.device = 4, .access = cuvmm::Access::read}};
  values.grant_access(peer);                           // now and for later growth; Access::none revokes
  std::size_t const on_1 = values.storage().bytes_on_device(1);
  // [readme]

  values.resize(std::size_t{1} << 28);  // 1 GiB: at least one chunk on each device
  example::check(on_1 == 0 && values.storage().bytes_on_device(1) > 0, "balanced placement");
  return 0;
}
