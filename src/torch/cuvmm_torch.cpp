// cuvmm_torch: C entry points that let PyTorch allocate through cuvmm's Arena, via
//   torch.cuda.memory.CUDAPluggableAllocator("libcuvmm_torch.so", "cuvmm_torch_malloc", "cuvmm_torch_free")
// The plain plug-in: it needs no PyTorch to build. The Python package `cuvmm_torch` (python/) does
// the same through PyTorch's headers and raises torch.OutOfMemoryError; prefer it.
//
// Owns: one Arena per device, made on first use and never destroyed (PyTorch may free tensors
// after static destructors ran; the driver takes the memory back when the process ends). Its
// options are the defaults with what $CUVMM_ARENA_CONF sets (cuvmm::parse_arena_options), read
// when the arena is made; with a bad one no arena is made and every allocation throws saying why.
// Invariants: cuvmm_torch_malloc returns memory or throws, never null for a failure (PyTorch 2.11
// does not check a pluggable allocator's result: a null tensor poisons the process at its first
// kernel). A request the arena cannot back throws cuvmm::OutOfMemory (a std::bad_alloc: Python
// sees RuntimeError with its message) after the arena's unused pages were given back to the
// device. cuvmm_torch_free never throws: a bad free is reported on stderr and changes nothing.
// Never does: call the driver itself, or synchronize beyond what Arena::trim does.
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>

namespace {

constexpr int max_devices = 64;

cuvmm::Arena* arena_for(int device) {
  static std::mutex made;
  static auto* const arenas = new std::array<std::unique_ptr<cuvmm::Arena>, max_devices>;  // leaked: see above
  if (device < 0 || device >= max_devices) return nullptr;
  std::lock_guard const lock(made);
  auto& arena = (*arenas)[static_cast<std::size_t>(device)];
  if (!arena) {
    const char* const conf = std::getenv(cuvmm::arena_conf_variable);
    cuvmm::ArenaOptions options = cuvmm::parse_arena_options(conf != nullptr ? conf : "");
    options.device = device;
    arena = std::make_unique<cuvmm::Arena>(options);
  }
  return arena.get();
}

}  // namespace

extern "C" {

/// Memory for `size` bytes, or a C++ exception (see above); PyTorch turns it into a RuntimeError.
__attribute__((visibility("default"))) void* cuvmm_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  if (size < 0) throw std::invalid_argument("cuvmm_torch_malloc: negative size " + std::to_string(size));
  cuvmm::Arena* arena = arena_for(device);
  if (arena == nullptr) {
    throw std::invalid_argument("cuvmm_torch_malloc: device " + std::to_string(device) + " is outside 0.." +
                                std::to_string(max_devices - 1));
  }
  try {
    return arena->allocate(static_cast<std::size_t>(size), stream);
  } catch (const cuvmm::OutOfMemory& e) {
    cuvmm::ErrorDetails details = e.details();
    std::size_t given_back = 0;
    try {
      given_back = arena->trim();
    } catch (const std::exception&) {  // the out-of-memory error is the one to report
    }
    details.context += "; cuvmm_torch_malloc(" + std::to_string(size) + " bytes) gave back " +
                       std::to_string(given_back) + " bytes of cached pages, the arena now holds " +
                       std::to_string(arena->stats().bytes_physical.current) + " bytes";
    throw cuvmm::OutOfMemory(std::move(details));
  }
}

__attribute__((visibility("default"))) void cuvmm_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  try {
    if (cuvmm::Arena* arena = arena_for(device)) arena->deallocate(ptr, static_cast<std::size_t>(size), stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvmm_torch_free(%p, %zd bytes, device %d): %s\n", ptr, size, device, e.what());
  }
}

/// Returns the device's unused pages to the driver; the bytes given back (0 on error).
__attribute__((visibility("default"))) size_t cuvmm_torch_trim(int device) {
  try {
    cuvmm::Arena* arena = arena_for(device);
    return arena == nullptr ? 0 : arena->trim();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvmm_torch_trim(device %d): %s\n", device, e.what());
    return 0;
  }
}

/// Peak bytes requested and peak bytes of device memory held by the device's arena.
__attribute__((visibility("default"))) int cuvmm_torch_peaks(int device, size_t* requested, size_t* held) {
  try {
    cuvmm::Arena* arena = arena_for(device);
    if (arena == nullptr) return -1;
    cuvmm::ArenaStats const s = arena->stats();
    *requested = s.bytes_requested.peak;
    *held = s.bytes_physical.peak;
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
}
