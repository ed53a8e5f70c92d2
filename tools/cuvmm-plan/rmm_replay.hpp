// rmm_replay.hpp: the trace's other C++ peers, RMM's pool and arena resources, as TraceAllocators.
//
// What RAPIDS users run where they might run the Arena: rmm::mr::pool_memory_resource (a pool that
// grows from nothing over cudaMalloc, and keeps what it took) and rmm::mr::arena_memory_resource
// (RMM's default size: half of the free memory, taken at once). Each is made fresh over
// rmm::mr::cuda_memory_resource behind a statistics adaptor, which counts what the resource holds
// from the device exactly (current and peak). Built only when cuvmm-plan is configured with RMM
// (meson option rmm_root, the librmm-cu13 wheel's folder); rmm_replay_built() says whether it was.
#pragma once

#include <memory>
#include <string_view>

#include <cuvmm/types.hpp>

#include "measure.hpp"

namespace cuvmm::plan {

enum class RmmResource { pool, arena };
/// Every RMM resource a trace is replayed on, in the order they are reported.
inline constexpr RmmResource rmm_resources[] = {RmmResource::pool, RmmResource::arena};

/// Whether cuvmm-plan was built with RMM.
[[nodiscard]] bool rmm_replay_built() noexcept;
/// The name a replay on `which` is reported under ("rmm_pool", "rmm_arena").
[[nodiscard]] std::string_view rmm_replay_name(RmmResource which) noexcept;
/// A fresh resource of RMM's on `stream` (an out-of-memory request gives nullptr); cuvmm::Unsupported
/// when cuvmm-plan was built without RMM.
[[nodiscard]] std::unique_ptr<TraceAllocator> make_rmm_allocator(RmmResource which, Stream stream);

}  // namespace cuvmm::plan
