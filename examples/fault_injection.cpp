// docs/cpp.md's example of testing a failure path without a GPU: a growable buffer in host memory over
// a backend that fails the call it is armed for. Runs on any Linux machine (CI runs it).
// [readme]
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>
// [readme]

#include <cassert>

#include "example_support.hpp"

int main() {
  // [readme]
  cuvmm::HostBackend host;                         // Linux virtual memory, the same contract as a GPU's
  cuvmm::FaultInjectingBackend faulty(host);       // forwards every call, fails the one it is armed for
  cuvmm::HostGrowableBuffer<int> numbers(faulty);
  numbers.resize(1000, 7);
  int* const p = numbers.data();
  faulty.fail_nth(1, {cuvmm::BackendOp::map});     // the next map fails (a new chunk exists by then)
  try {
    numbers.resize(1 << 24);                       // needs a new chunk, mapped behind the end
  } catch (const cuvmm::Error& error) {            // the buffer is as it was, nothing leaked
    assert(error.call() == "map" && numbers.size() == 1000 && numbers.data() == p && p[999] == 7);
  }
  // [readme]

  example::check(faulty.fired(), "the armed failure was thrown");
  example::check(numbers.size() == 1000 && numbers.data() == p && p[999] == 7, "the failed growth changed nothing");
  example::check(host.live_counts().chunks == numbers.storage().chunk_count(), "no chunk leaked");
  return 0;
}
