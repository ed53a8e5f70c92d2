// rmm_replay.cpp: RMM's pool and arena resources as TraceAllocators (rmm_replay.hpp). Compiled with
// RMM's own headers (the librmm-cu13 wheel brings the CCCL they need) when cuvmm-plan has RMM, and
// as the stubs at the end otherwise.
#include "rmm_replay.hpp"

#include <string>

#include <cuda_runtime_api.h>

#include <cuvmm/error.hpp>

#include "cuda_check.hpp"

#if CUVMM_PLAN_RMM
#include <cuda/stream_ref>
#include <rmm/aligned.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <optional>
#endif

namespace cuvmm::plan {

std::string_view rmm_replay_name(RmmResource which) noexcept {
  return which == RmmResource::pool ? "rmm_pool" : "rmm_arena";
}

#if CUVMM_PLAN_RMM

bool rmm_replay_built() noexcept { return true; }

namespace {

/// `Resource` made over cudaMalloc behind a statistics adaptor, which counts what it holds.
template <class Resource>
class RmmAllocator final : public TraceAllocator {
 public:
  template <class... Options>
  explicit RmmAllocator(cudaStream_t stream, Options... options)
      : held_(rmm::mr::cuda_memory_resource{}), resource_(held_, options...), stream_(stream) {}
  void* allocate(std::size_t bytes) override {
    try {
      return resource_.allocate(cuda::stream_ref{stream_}, bytes, rmm::CUDA_ALLOCATION_ALIGNMENT);
    } catch (const rmm::out_of_memory&) {
      return nullptr;
    }
  }
  void deallocate(void* p, std::size_t bytes) override {
    resource_.deallocate(cuda::stream_ref{stream_}, p, bytes, rmm::CUDA_ALLOCATION_ALIGNMENT);
  }
  std::size_t held_bytes() override { return static_cast<std::size_t>(held_.get_bytes_counter().value); }
  std::optional<std::size_t> exact_peak_held_bytes() override {
    return static_cast<std::size_t>(held_.get_bytes_counter().peak);
  }
  void finish() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  rmm::mr::statistics_resource_adaptor held_;  // what the resource took from cudaMalloc
  Resource resource_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<TraceAllocator> make_rmm_allocator(RmmResource which, Stream stream) {
  if (which == RmmResource::pool) {  // growing from nothing, as far as the device allows
    return std::make_unique<RmmAllocator<rmm::mr::pool_memory_resource>>(stream, std::size_t{0});
  }
  return std::make_unique<RmmAllocator<rmm::mr::arena_memory_resource>>(stream);  // RMM's default size
}

#else

bool rmm_replay_built() noexcept { return false; }

std::unique_ptr<TraceAllocator> make_rmm_allocator(RmmResource which, Stream) {
  throw_unsupported_capability("RMM's " + std::string(rmm_replay_name(which)) + " replay",
                               "configure cuvmm-plan with -Drmm_root=DIR, DIR holding the librmm-cu13 wheel",
                               "make_rmm_allocator", "cuvmm-plan was built without RMM");
}

#endif

}  // namespace cuvmm::plan
