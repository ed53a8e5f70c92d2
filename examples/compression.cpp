// docs/vmm-features.md's example of compressible memory. Needs a GPU (one that refuses compression still runs
// it: `preferred` falls back to ordinary memory and counts the bytes).
#include <cuvmm/growable_buffer.hpp>

#include <cstddef>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;
  std::size_t const n = std::size_t{1} << 24;

  // [readme]
  cuvmm::GrowableOptions options;
  options.compression = cuvmm::Compression::preferred;   // or ::required, or ::none (the default)
  cuvmm::GrowableBuffer<float> values(options);
  values.resize(n, 0.0f);
  cuvmm::GrowableStats const s = values.stats();         // s.compressed_bytes, s.compression_fallback_bytes
  // [readme]

  example::check(s.compressed_bytes + s.compression_fallback_bytes == s.capacity_bytes,
                 "every mapped byte is either compressed or counted as a fallback");
  example::check(values.element(n - 1) == 0.0f, "the last element");
  return 0;
}
