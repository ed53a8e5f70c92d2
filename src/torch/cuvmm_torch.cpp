// cuvmm_torch: C entry points that let PyTorch allocate through cuvmm's Arena, via
//   torch.cuda.memory.CUDAPluggableAllocator("libcuvmm_torch.so", "cuvmm_torch_malloc", "cuvmm_torch_free")
// One Arena per device, made on first use and kept for the life of the process. No C++ exception
// crosses these functions: a failed allocation returns null (PyTorch raises its out-of-memory
// error), a bad free is reported on stderr and leaves the arena as it was.
#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>

#include <cuvmm/arena.hpp>

namespace {

constexpr int max_devices = 64;

cuvmm::Arena* arena_for(int device) {
  static std::mutex made;
  static std::array<std::unique_ptr<cuvmm::Arena>, max_devices> arenas;
  if (device < 0 || device >= max_devices) return nullptr;
  std::lock_guard const lock(made);
  auto& arena = arenas[static_cast<std::size_t>(device)];
  if (!arena) {
    cuvmm::ArenaOptions options;
    options.device = device;
    arena = std::make_unique<cuvmm::Arena>(options);
  }
  return arena.get();
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* cuvmm_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  try {
    cuvmm::Arena* arena = arena_for(device);
    return arena == nullptr || size < 0 ? nullptr : arena->allocate(static_cast<std::size_t>(size), stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvmm_torch_malloc(%zd bytes, device %d): %s\n", size, device, e.what());
    return nullptr;
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
