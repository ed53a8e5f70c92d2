// The Arena as a cuda::mr resource (cuvmm/arena_resource.hpp), through the type-erased references
// of the CCCL it is compiled with (cuvmm::cccl picks the names of CCCL 3.0 or of 3.1 and later).
// Runs on the HostBackend: allocates through both references, writes, reads back, frees, and
// checks the Arena's counters at each step. Prints which CCCL it was built with.
#include <cuvmm/arena_resource.hpp>
#include <cuvmm/host_backend.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

constexpr std::size_t page = 64 * cuvmm::KiB;

bool expect(bool ok, const char* what) {
  if (!ok) std::printf("cuda_mr_arena: FAILED: %s\n", what);
  return ok;
}

}  // namespace

int main() {
  cuvmm::HostBackend host({.granularity = page});
  cuvmm::ArenaOptions options;
  options.address_space_bytes = 64 * page;
  options.large_page_bytes = 0;
  cuvmm::Arena arena(host, options);

  cuvmm::ArenaResource resource(arena);
  cuvmm::cccl::stream_resource_ref<cuda::mr::device_accessible> stream_ref(resource);
  cuvmm::cccl::sync_resource_ref<cuda::mr::device_accessible> sync_ref(resource);
  cuda::stream_ref const default_stream(cudaStream_t{nullptr});

  bool ok = expect(cuvmm::ArenaResource(arena) == resource, "two views of one arena compare equal");
#if CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES
  void* a = stream_ref.allocate(default_stream, 3 * page, 4096);
  void* b = sync_ref.allocate_sync(1000, 256);
#else
  void* a = stream_ref.allocate_async(3 * page, 4096, default_stream);
  void* b = sync_ref.allocate(1000, 256);
#endif
  ok &= expect(a != nullptr && b != nullptr, "both allocations succeed");
  ok &= expect(reinterpret_cast<std::uintptr_t>(a) % 4096 == 0, "the 4096-byte alignment is kept");
  ok &= expect(arena.stats().allocations.current == 2, "the arena counts 2 live allocations");
  ok &= expect(arena.stats().bytes_requested.current == 3 * page + 1000, "the arena counts the bytes asked for");
  std::memset(a, 0xA5, 3 * page);
  std::memset(b, 0x5A, 1000);
  ok &= expect(static_cast<unsigned char*>(a)[3 * page - 1] == 0xA5 && static_cast<unsigned char*>(b)[999] == 0x5A,
               "the memory holds what was written");
#if CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES
  stream_ref.deallocate(default_stream, a, 3 * page, 4096);
  sync_ref.deallocate_sync(b, 1000, 256);
#else
  stream_ref.deallocate_async(a, 3 * page, 4096, default_stream);
  sync_ref.deallocate(b, 1000, 256);
#endif
  ok &= expect(arena.stats().allocations.current == 0, "nothing is live after both frees");
  if (!ok) return 1;
  std::printf("cuda_mr_arena: CCCL %d.%d.%d (%s names): allocated, wrote and freed through both references\n",
              CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION, CCCL_PATCH_VERSION,
              CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES ? "synchronous_resource" : "experimental async_resource");
  return 0;
}
