// The README's GrowableBuffer example: growth in place, appends, Thrust, shrinking. Needs a GPU.
// [readme]
#include <cuvmm/growable_buffer.hpp>
// [readme]

#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <vector>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;
  cudaStream_t const stream = example::new_stream();
  std::vector<float> const host_vector(1000, 2.0f);

  // [readme]
  cuvmm::GrowableBuffer<float> values;        // reserves nothing yet: constructible anywhere
  values.resize(1 << 20, 1.0f, stream);       // reserves a range as large as device 0, maps chunks
  float* const p = values.data();             // ... and from now on this pointer never changes
  values.append(host_vector, stream);         // host or device memory; Thrust iterators under nvcc
  thrust::sort(thrust::cuda::par.on(stream), values.begin(), values.end());  // device_ptr iterators
  values.clear();
  values.shrink_to_fit(stream);               // waits for `stream` only, then gives the chunks back
  // [readme]

  example::check(values.data() == p, "data() moved");
  example::check(values.empty() && values.capacity() == 0, "shrink_to_fit kept memory");
  return 0;
}
