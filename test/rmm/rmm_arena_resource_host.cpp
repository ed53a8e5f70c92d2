// cuvmm::RmmArenaResource on the host backend, so that the rmm package check runs it on any machine
// (g++ with RMM's headers; test/rmm/rmm_consumer.cu checks it on a GPU with RMM's containers):
//   1. an allocation within the Arena's byte_limit succeeds, stream-ordered and not, and is freed;
//   2. a request beyond byte_limit throws rmm::out_of_memory carrying the Arena's message, caught
//      as rmm::bad_alloc too, and leaves nothing allocated;
//   3. other errors stay cuvmm::Error: an alignment that is not a power of two;
//   4. the resource contract (resource_contract.hpp: basic, allocation, out of memory,
//      multi-threaded) on host memory.
// Exit status: 0 all passed, 1 a check failed.
#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/rmm_arena_resource.hpp>

#include <rmm/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "resource_contract.hpp"

namespace {

using contract::report;  // one tally for these checks and the contract's

/// Host memory: written and read where it lies; the streams are distinct handles the Arena orders
/// by (the host backend's work is done when a call returns).
class HostMemory final : public contract::ContractMemory {
 public:
  void fill(void* p, std::size_t bytes, unsigned char value, cuda::stream_ref) override { std::memset(p, value, bytes); }
  bool holds(const void* p, std::size_t bytes, unsigned char value, cuda::stream_ref) override {
    auto const* const b = static_cast<const unsigned char*>(p);
    std::size_t const n = bytes < 64 ? bytes : 64;
    for (std::size_t i = 0; i < n; ++i) {
      if (b[i] != value || b[bytes - 1 - i] != value) return false;
    }
    return true;
  }
  cuda::stream_ref stream(int i) override {
    return cuda::stream_ref{reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(i + 1) * 256)};
  }
};

}  // namespace

int main() {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  cuvmm::HostBackend backend({.granularity = 2 * MiB, .physical_limit = 256 * MiB});
  cuvmm::ArenaOptions options;
  options.address_space_bytes = 1024 * MiB;
  options.byte_limit = 64 * MiB;
  cuvmm::Arena arena(backend, options);
  cuvmm::RmmArenaResource resource(arena);
  cuda::stream_ref const stream{cudaStream_t{}};

  void* p = resource.allocate(stream, 3 * MiB, 256);
  void* q = resource.allocate_sync(1000, 256);
  std::memset(p, 0x5A, 3 * MiB);
  report(static_cast<unsigned char*>(p)[3 * MiB - 1] == 0x5A, "allocate(stream, 3 MiB): usable memory");
  report(arena.stats().allocations.current == 2, "two live Arena allocations");
  resource.deallocate(stream, p, 3 * MiB, 256);
  resource.deallocate_sync(q, 1000, 256);
  report(arena.stats().allocations.current == 0, "both freed");

  std::string message;
  try {
    (void)resource.allocate(stream, 128 * MiB, 256);
  } catch (const rmm::out_of_memory& e) {
    message = e.what();
  } catch (...) {
  }
  report(message.find("Arena::allocate") != std::string::npos,
         "128 MiB beyond a 64 MiB byte_limit: rmm::out_of_memory with the Arena's message");
  bool as_bad_alloc = false;
  try {
    (void)resource.allocate_sync(128 * MiB, 256);
  } catch (const rmm::bad_alloc&) {
    as_bad_alloc = true;
  }
  report(as_bad_alloc, "allocate_sync: caught as rmm::bad_alloc");
  report(arena.stats().allocations.current == 0 && backend.live_counts().bytes_physical <= 64 * MiB,
         "the failed requests left nothing allocated, within byte_limit");

  bool invalid = false;
  try {
    (void)resource.allocate_sync(4096, 3);
  } catch (const cuvmm::Error& e) {
    invalid = e.is(cuvmm::ErrorCode::invalid_argument);
  }
  report(invalid, "alignment 3: cuvmm::Error (invalid_argument), not an out-of-memory error");

  std::printf("the resource contract, host memory:\n");
  cuvmm::HostBackend roomy({.granularity = 2 * MiB, .physical_limit = 2048 * MiB});
  cuvmm::ArenaOptions big;
  big.address_space_bytes = 4096 * MiB;
  cuvmm::Arena main_arena(roomy, big);
  cuvmm::Arena other_arena(roomy, big);
  HostMemory memory;
  contract::check_resource_contract(main_arena, other_arena, arena, 64 * MiB, memory);
  std::printf("rmm_arena_resource_host: %d failed\n", contract::failures);
  return contract::failures == 0 ? 0 : 1;
}
