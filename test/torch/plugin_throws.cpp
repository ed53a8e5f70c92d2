// The plain plug-in (libcuvmm_torch.so) never returns null for a failed allocation: it throws, and
// PyTorch turns the exception into a Python error. Loads the plug-in as PyTorch does (dlopen,
// dlsym) and calls cuvmm_torch_malloc with requests that must fail: a device index out of range,
// a negative size, and (on a machine without a GPU) any request. Exit status 0 when each threw.
//   plugin_throws PATH/libcuvmm_torch.so
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <exception>

namespace {

using Malloc = void* (*)(ssize_t, int, void*);
using Free = void (*)(void*, ssize_t, int, void*);

/// 0 when malloc(size, device) threw; 1 when it returned null (the bug); 2 when it returned memory.
int call(Malloc malloc_fn, Free free_fn, ssize_t size, int device, const char* what) {
  void* p = nullptr;
  try {
    p = malloc_fn(size, device, nullptr);
  } catch (const std::exception& e) {
    std::printf("ok: %s threw: %s\n", what, e.what());
    return 0;
  }
  if (p == nullptr) {
    std::printf("FAIL: %s returned null instead of throwing\n", what);
    return 1;
  }
  std::printf("note: %s returned memory (a GPU is present)\n", what);
  free_fn(p, size, device, nullptr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s libcuvmm_torch.so\n", argv[0]);
    return 2;
  }
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    std::printf("FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  auto malloc_fn = reinterpret_cast<Malloc>(dlsym(plugin, "cuvmm_torch_malloc"));
  auto free_fn = reinterpret_cast<Free>(dlsym(plugin, "cuvmm_torch_free"));
  if (malloc_fn == nullptr || free_fn == nullptr) {
    std::printf("FAIL: the plug-in lacks cuvmm_torch_malloc or cuvmm_torch_free\n");
    return 1;
  }
  bool failed = call(malloc_fn, free_fn, 1 << 20, 64, "malloc on device index 64") != 0;
  failed = call(malloc_fn, free_fn, -1, 0, "malloc of -1 bytes") != 0 || failed;
  int const plain = call(malloc_fn, free_fn, 1 << 20, 0, "malloc of 1 MiB on device 0");
  failed = plain == 1 || failed;
  return failed ? 1 : 0;
}
