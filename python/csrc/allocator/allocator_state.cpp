// allocator_state.cpp: see allocator_state.hpp for what a DeviceState owns and guarantees.
#include "allocator_state.hpp"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>

#include <cuvmm/error.hpp>

namespace cuvmm_torch {

namespace {

using c10::CachingDeviceAllocator::StatType;
using Stat = c10::CachingAllocator::Stat;

std::size_t round_up(std::size_t bytes) { return (std::max<std::size_t>(bytes, 1) + round_bytes - 1) / round_bytes * round_bytes; }

/// "106.00 GiB (113816633344 bytes)": the unit PyTorch's messages use, then the exact count.
/// A size as PyTorch's messages print it: bytes up to 1 KiB, then KiB, MiB or GiB with two decimals.
std::string size_text(std::size_t bytes) {
  static constexpr std::array<const char*, 3> units = {"KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes);
  const char* unit = nullptr;
  for (const char* u : units) {
    if (value <= 1024) break;
    value /= 1024;
    unit = u;
  }
  if (unit == nullptr) return std::to_string(bytes) + " bytes";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %s", value, unit);
  return text;
}

/// The size and, when it is not whole bytes already, the exact count: "2.00 MiB (2097152 bytes)".
std::string bytes_text(std::size_t bytes) {
  std::string text = size_text(bytes);
  if (bytes > 1024) text += " (" + std::to_string(bytes) + " bytes)";
  return text;
}

std::size_t index(StatType t) { return static_cast<std::size_t>(t); }

StatType pool_type(std::size_t size) { return size <= small_pool_max ? StatType::SMALL_POOL : StatType::LARGE_POOL; }

void change(Stat& stat, std::size_t amount, bool up) {
  if (up) {
    stat.increase(amount);
  } else {
    stat.decrease(amount);
  }
}

/// Sets a statistic that is measured (not counted) to `value`, keeping its peak and totals.
void set_measured(Stat& stat, std::size_t value) {
  auto const v = static_cast<std::int64_t>(value);
  if (v > stat.current) {
    stat.allocated += v - stat.current;
  } else {
    stat.freed += stat.current - v;
  }
  stat.current = v;
  stat.peak = std::max(stat.peak, v);
}

cuvmm::ArenaOptions options_from_environment(int device) {
  const char* const conf = std::getenv(cuvmm::arena_conf_variable);
  cuvmm::ArenaOptions options;
  try {
    options = cuvmm::parse_arena_options(conf != nullptr ? conf : "");
  } catch (const cuvmm::Error& e) {
    TORCH_CHECK_VALUE(false, "cuvmm_torch: ", cuvmm::arena_conf_variable, "=\"", conf, "\": ", e.context());
  }
  options.device = device;
  return options;
}

/// Relaxed capture mode while a capture is underway: the Arena's driver calls (creating and
/// mapping pages) and the host waits below are then allowed, as PyTorch allows its cudaMalloc.
class RelaxedDuringCapture {
 public:
  explicit RelaxedDuringCapture(bool capturing) {
    if (capturing) guard_.emplace(cudaStreamCaptureModeRelaxed);
  }

 private:
  std::optional<c10::cuda::CUDAStreamCaptureModeGuard> guard_;
};

}  // namespace

cuvmm::Arena& DeviceState::arena() {
  if (!arena_) {
    RelaxedDuringCapture const relaxed(true);  // the first allocation may come during a capture
    try {
      if (fraction_ < 1 && limit_ == no_limit) set_memory_fraction(fraction_);
      arena_ = std::make_unique<cuvmm::Arena>(options_from_environment(device_));
    } catch (const c10::Error&) {
      throw;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "cuvmm_torch: making the arena of device ", device_, " failed: ", e.what());
    }
  }
  return *arena_;
}

std::size_t DeviceState::device_total_memory() {
  if (total_memory_ == 0) {
    c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
    std::size_t free = 0;
    C10_CUDA_CHECK(cudaMemGetInfo(&free, &total_memory_));
  }
  return total_memory_;
}

std::size_t DeviceState::device_free_memory() {
  std::size_t free = 0;
  std::size_t total = 0;
  c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
  RelaxedDuringCapture const relaxed(capture_underway());
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) (void)cudaGetLastError();
  return free;
}

Block DeviceState::allocate(std::size_t requested, cudaStream_t stream, const std::shared_ptr<GatheredContext>& context) {
  bool const capturing = capture_underway();
  if (!capturing) {
    process_pending(false, context);
    process_deferred();
    give_back_dead_pools(context);
  }
  Block block;
  block.size = round_up(requested);
  block.requested = requested;
  block.device = device_;
  block.stream = stream;
  block.context = context;
  RelaxedDuringCapture const relaxed(capturing);
  for (auto it = captures_.rbegin(); it != captures_.rend(); ++it) {
    if (it->second(stream)) {
      block.pool = it->first;
      break;
    }
  }
  try {
    if (is_default_pool(block.pool)) {
      block.ptr = allocate_from_arena(block.size, stream);
      trace_block(TraceEntry::SEGMENT_ALLOC, block, block.size, context);
    } else {
      PrivatePool& pool = pools_.at(block.pool);
      auto const found = pool.free_blocks.lower_bound({stream, block.size, nullptr});
      // A free block of the pool on this stream, if one is at most twice the size asked for.
      if (found != pool.free_blocks.end() && std::get<0>(*found) == stream && std::get<1>(*found) <= 2 * block.size) {
        block.ptr = std::get<2>(*found);
        block.size = std::get<1>(*found);
        pool.free_blocks.erase(found);
        pool.blocks.at(block.ptr).live = true;
      } else {
        block.ptr = allocate_in_pool(pool, block.size, stream, context);
        trace_block(TraceEntry::SEGMENT_ALLOC, block, block.size, context);
      }
      ++pool.live;
    }
  } catch (const c10::OutOfMemoryError&) {
    history_.record(TraceEntry::OOM, device_, device_free_memory(), block.size, stream, block.pool, context);
    throw;
  }
  trace_block(TraceEntry::ALLOC, block, block.requested, context);
  count_allocated(block, true);
  count_active(block.size, true);
  return block;
}

void* DeviceState::allocate_from_arena(std::size_t size, cudaStream_t stream) {
  cuvmm::Arena& a = arena();
  void* p = nullptr;
  try {
    p = a.allocate(size, stream);
  } catch (const cuvmm::OutOfMemory& e) {
    if (capture_underway()) out_of_memory(size, e.what());
    // What the pending frees hold and the dead pools' blocks may be enough: wait, then try again.
    ++stats_.num_alloc_retries;
    process_pending(true, nullptr);
    give_back_dead_pools(nullptr);
    try {
      p = a.allocate(size, stream);
    } catch (const cuvmm::OutOfMemory& again) {
      out_of_memory(size, again.what());
    }
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cuvmm_torch: allocating ", size, " bytes on device ", device_, " failed: ", e.what());
  }
  sample_arena();
  enforce_limit(p, size, stream);
  return p;
}

void DeviceState::make_pool_stream() {
  if (pool_stream_ != nullptr) return;
  c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
  // A CUDA capture may have begun already (on this thread, before beginAllocateToPool).
  RelaxedDuringCapture const relaxed(true);
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&pool_stream_, cudaStreamNonBlocking));
}

void* DeviceState::allocate_in_pool(PrivatePool& pool, std::size_t size, cudaStream_t stream,
                                    const std::shared_ptr<GatheredContext>& context) {
  make_pool_stream();
  void* const p = allocate_from_arena(size, pool_stream_);
  // The Arena may have made the pool stream wait for another stream's work on this memory: wait
  // for it on the host, as nothing orders the graph's stream after the pool stream.
  cudaError_t const waited = cudaStreamSynchronize(pool_stream_);
  if (waited != cudaSuccess) {
    arena().deallocate(p, size, pool_stream_);
    C10_CUDA_CHECK(waited);
  }
  pool.blocks.emplace(p, PoolBlock{size, stream, true, context});
  return p;
}

void DeviceState::enforce_limit(void* p, std::size_t size, cudaStream_t stream) {
  if (limit_ == no_limit || static_cast<std::size_t>(stats_.reserved_bytes[index(StatType::AGGREGATE)].current) <= limit_) {
    return;
  }
  if (!capture_underway()) trim();
  if (static_cast<std::size_t>(stats_.reserved_bytes[index(StatType::AGGREGATE)].current) <= limit_) return;
  arena().deallocate(p, size, stream);
  if (!capture_underway()) trim();
  out_of_memory(size, "the process may use " + std::to_string(limit_) + " bytes of the device (memory fraction " +
                          std::to_string(fraction_) + ")");
}

void DeviceState::out_of_memory(std::size_t size, const std::string& cause) {
  ++stats_.num_ooms;
  // Pages that back no allocation go back to the device, so that other users of it can have them.
  std::size_t given_back = 0;
  std::string trim_failure;
  if (!capture_underway() && arena_) {
    try {
      given_back = arena_->trim();
    } catch (const std::exception& e) {
      trim_failure = std::string("; giving back cached pages failed: ") + e.what();
    }
  }
  sample_arena();
  std::size_t const free = device_free_memory();
  std::size_t const total = device_total_memory();
  cuvmm::ArenaStats const s = arena_ ? arena_->stats() : cuvmm::ArenaStats{};
  // PyTorch's sentences first (code that parses out-of-memory messages reads them), then cuvmm's.
  std::size_t const allocated = static_cast<std::size_t>(stats_.allocated_bytes[index(StatType::AGGREGATE)].current);
  std::size_t const reserved = static_cast<std::size_t>(stats_.reserved_bytes[index(StatType::AGGREGATE)].current);
  TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", size_text(size), ". GPU ", device_,
                   " has a total capacity of ", size_text(total), " of which ", size_text(free),
                   " is free. Of the allocated memory ", size_text(allocated), " is allocated by PyTorch, and ",
                   size_text(reserved > allocated ? reserved - allocated : 0),
                   " is reserved by PyTorch but unallocated. cuvmm: the arena holds ", bytes_text(s.bytes_requested.current),
                   " in ", s.allocations.current, " live allocations and ", bytes_text(s.bytes_physical.current),
                   " of physical memory in all, after giving back ", bytes_text(given_back), " of cached pages",
                   trim_failure, " (", cause, ")");
}


void DeviceState::trace_block(TraceEntry::Action action, const Block& block, std::size_t size,
                              const std::shared_ptr<GatheredContext>& context) {
  history_.record(action, device_, reinterpret_cast<std::size_t>(block.ptr), size, block.stream, block.pool,
                  context ? context : block.context);
}

void DeviceState::free(Block block, const std::shared_ptr<GatheredContext>& context) {
  count_allocated(block, false);
  trace_block(TraceEntry::FREE_REQUESTED, block, block.requested, context);
  RelaxedDuringCapture const relaxed(capture_underway());  // the Arena may make a stream's marker
  if (!block.stream_uses.empty()) {
    if (capture_underway()) {
      deferred_.push_back(std::move(block));
    } else {
      pend(std::move(block));
    }
    return;
  }
  release(block, context);
}

void DeviceState::pend(Block block) {
  PendingFree pending{std::move(block), {}};
  c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
  for (cudaStream_t s : pending.block.stream_uses) {
    cudaEvent_t const event = take_event();
    C10_CUDA_CHECK(cudaEventRecord(event, s));
    pending.events.push_back(event);
  }
  pending_.push_back(std::move(pending));
}

void DeviceState::release(const Block& block, const std::shared_ptr<GatheredContext>& context) {
  count_active(block.size, false);
  trace_block(TraceEntry::FREE_COMPLETED, block, block.requested, context);
  if (!is_default_pool(block.pool)) {
    return_block_to_pool(block, context);
    return;
  }
  try {
    arena().deallocate(block.ptr, block.size, block.stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvmm_torch: freeing %p (%zu bytes, device %d) failed: %s\n", block.ptr, block.size, device_,
                 e.what());
  }
  trace_block(TraceEntry::SEGMENT_FREE, block, block.size, context);  // the block was its own segment
}

void DeviceState::return_block_to_pool(const Block& block, const std::shared_ptr<GatheredContext>& context) {
  PrivatePool& pool = pools_.at(block.pool);
  PoolBlock& pb = pool.blocks.at(block.ptr);
  pb.live = false;
  --pool.live;
  pool.free_blocks.emplace(pb.stream, pb.size, block.ptr);
  maybe_kill_pool(block.pool, context);
}

void DeviceState::record_stream(Block& block, cudaStream_t stream) {
  if (stream == block.stream) return;
  if (std::find(block.stream_uses.begin(), block.stream_uses.end(), stream) == block.stream_uses.end()) {
    block.stream_uses.push_back(stream);
  }
}

cudaEvent_t DeviceState::take_event() {
  if (!spare_events_.empty()) {
    cudaEvent_t const e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  C10_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void DeviceState::process_pending(bool wait, const std::shared_ptr<GatheredContext>& context) {
  if (pending_.empty()) return;
  c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    for (cudaEvent_t e : it->events) {
      cudaError_t const r = wait ? cudaEventSynchronize(e) : cudaEventQuery(e);
      if (r == cudaErrorNotReady) {
        (void)cudaGetLastError();
        done = false;
        break;
      }
      C10_CUDA_CHECK(r);
    }
    if (!done) {
      ++it;
      continue;
    }
    spare_events_.insert(spare_events_.end(), it->events.begin(), it->events.end());
    Block const block = std::move(it->block);
    it = pending_.erase(it);
    release(block, context);
  }
}

void DeviceState::process_deferred() {
  if (deferred_.empty()) return;
  std::vector<Block> blocks;
  blocks.swap(deferred_);
  for (Block& b : blocks) pend(std::move(b));  // counted as freed already: the events recorded now, outside the capture
}

void DeviceState::maybe_kill_pool(MempoolId_t id, const std::shared_ptr<GatheredContext>& context) {
  auto const it = pools_.find(id);
  if (it == pools_.end() || it->second.use_count > 0 || it->second.live > 0) return;
  if (std::find(dead_pools_.begin(), dead_pools_.end(), id) == dead_pools_.end()) dead_pools_.push_back(id);
  if (!capture_underway()) give_back_dead_pools(context);
}

void DeviceState::give_back_dead_pools(const std::shared_ptr<GatheredContext>& context) {
  if (dead_pools_.empty()) return;
  std::vector<MempoolId_t> dead;
  dead.swap(dead_pools_);
  bool synchronized = false;
  for (MempoolId_t const& id : dead) {
    auto const it = pools_.find(id);
    // Revived (a new capture into it) or already gone.
    if (it == pools_.end() || it->second.use_count > 0 || it->second.live > 0) continue;
    if (!synchronized) {
      // A graph may still be replaying in these blocks, on any stream.
      c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
      C10_CUDA_CHECK(cudaDeviceSynchronize());
      synchronized = true;
    }
    for (auto const& [ptr, block] : it->second.blocks) {
      try {
        arena().deallocate(ptr, block.size, pool_stream_);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cuvmm_torch: giving back a pool block %p failed: %s\n", ptr, e.what());
      }
      history_.record(TraceEntry::SEGMENT_FREE, device_, reinterpret_cast<std::size_t>(ptr), block.size, block.stream,
                      id, context ? context : block.segment_context);
    }
    pools_.erase(it);
  }
}

void DeviceState::create_or_incref_pool(MempoolId_t pool) { ++pools_[pool].use_count; }

void DeviceState::begin_allocate_to_pool(MempoolId_t pool, std::function<bool(cudaStream_t)> filter) {
  for (auto const& capture : captures_) {
    TORCH_CHECK(capture.first != pool, "cuvmm_torch: beginAllocateToPool: already allocating to pool (", pool.first,
                ", ", pool.second, ")");
  }
  make_pool_stream();
  create_or_incref_pool(pool);
  captures_.emplace_back(pool, std::move(filter));
}

void DeviceState::end_allocate_to_pool(MempoolId_t pool) {
  auto const it = std::find_if(captures_.begin(), captures_.end(), [&](auto const& c) { return c.first == pool; });
  TORCH_CHECK(it != captures_.end(), "cuvmm_torch: endAllocateToPool: no allocation to pool (", pool.first, ", ",
              pool.second, ") is underway");
  captures_.erase(it);
  if (!capture_underway()) {
    process_deferred();
    give_back_dead_pools(nullptr);
  }
}

void DeviceState::release_pool(MempoolId_t pool) {
  auto const it = pools_.find(pool);
  TORCH_CHECK(it != pools_.end(), "cuvmm_torch: releasePool: no pool (", pool.first, ", ", pool.second, ")");
  TORCH_CHECK(it->second.use_count > 0, "cuvmm_torch: releasePool: pool (", pool.first, ", ", pool.second,
              ") was released more often than it was used");
  --it->second.use_count;
  maybe_kill_pool(pool, nullptr);
}

int DeviceState::pool_use_count(MempoolId_t pool) const {
  auto const it = pools_.find(pool);
  return it == pools_.end() ? 0 : it->second.use_count;
}

bool DeviceState::pool_live_allocations_are(MempoolId_t pool, const std::unordered_set<void*>& expected) const {
  auto const it = pools_.find(pool);
  if (it == pools_.end()) return expected.empty();
  std::size_t live = 0;
  for (auto const& [ptr, block] : it->second.blocks) {
    if (!block.live) continue;
    ++live;
    if (expected.count(ptr) == 0) return false;
  }
  return live == expected.size();
}

std::shared_ptr<PoolCheckpoint> DeviceState::checkpoint(MempoolId_t pool, const std::unordered_map<void*, Block>& live) const {
  TORCH_CHECK(pools_.count(pool) == 1, "cuvmm_torch: getCheckpointState: no pool (", pool.first, ", ", pool.second, ")");
  auto cp = std::make_shared<PoolCheckpoint>();
  cp->device = device_;
  cp->pool = pool;
  for (auto const& [ptr, block] : live) {
    if (block.device == device_ && block.pool == pool) cp->live.push_back(block);
  }
  return cp;
}

void DeviceState::restore(const PoolCheckpoint& checkpoint, std::unordered_map<void*, Block>& live,
                          std::vector<void*>& freed, std::vector<Block>& allocated) {
  TORCH_CHECK(!capture_underway(), "cuvmm_torch: setCheckpointPoolState during a capture is not supported");
  auto const pool_it = pools_.find(checkpoint.pool);
  TORCH_CHECK(pool_it != pools_.end(), "cuvmm_torch: setCheckpointPoolState: pool (", checkpoint.pool.first, ", ",
              checkpoint.pool.second, ") no longer exists");
  PrivatePool& pool = pool_it->second;
  process_pending(true, nullptr);  // a block whose free waits for other streams is not free in the pool yet
  for (Block const& b : checkpoint.live) {
    auto const known = pool.blocks.find(b.ptr);
    TORCH_CHECK(known != pool.blocks.end() && known->second.size == b.size,
                "cuvmm_torch: setCheckpointPoolState: the checkpoint names a block the pool no longer holds");
  }
  // Every block of the pool live now is freed (the pool stays alive: its user holds it).
  ++pool.use_count;
  for (auto it = live.begin(); it != live.end();) {
    if (it->second.device == device_ && it->second.pool == checkpoint.pool) {
      Block const b = std::move(it->second);
      it = live.erase(it);
      freed.push_back(b.ptr);
      count_allocated(b, false);
      trace_block(TraceEntry::FREE_REQUESTED, b, b.requested, nullptr);
      release(b, nullptr);
    } else {
      ++it;
    }
  }
  --pool.use_count;
  for (Block b : checkpoint.live) {
    PoolBlock& pb = pool.blocks.at(b.ptr);
    pool.free_blocks.erase({pb.stream, pb.size, b.ptr});
    pb.live = true;
    ++pool.live;
    b.stream_uses.clear();
    trace_block(TraceEntry::ALLOC, b, b.requested, nullptr);
    count_allocated(b, true);
    count_active(b.size, true);
    live.emplace(b.ptr, b);
    allocated.push_back(b);
  }
}

std::size_t DeviceState::empty_cache(const std::shared_ptr<GatheredContext>& context) {
  if (capture_underway()) return 0;  // nothing may wait or unmap while a capture records
  process_pending(true, context);
  process_deferred();
  process_pending(true, context);
  give_back_dead_pools(context);
  return trim();
}

std::size_t DeviceState::trim() {
  if (!arena_) return 0;
  std::size_t given_back = 0;
  try {
    given_back = arena_->trim();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "cuvmm_torch: giving back the cached pages of device ", device_, " failed: ", e.what());
  }
  sample_arena();
  return given_back;
}

void DeviceState::set_memory_fraction(double fraction) {
  TORCH_CHECK_VALUE(fraction >= 0 && fraction <= 1, "cuvmm_torch: invalid memory fraction ", fraction,
                    ": it must be between 0 and 1");
  fraction_ = fraction;
  limit_ = fraction < 1 ? static_cast<std::size_t>(fraction * static_cast<double>(device_total_memory())) : no_limit;
}

void DeviceState::count_allocated(const Block& block, bool up) {
  for (StatType t : {StatType::AGGREGATE, pool_type(block.size)}) {
    change(stats_.allocation[index(t)], 1, up);
    change(stats_.allocated_bytes[index(t)], block.size, up);
    change(stats_.requested_bytes[index(t)], block.requested, up);
  }
}

void DeviceState::count_active(std::size_t size, bool up) {
  for (StatType t : {StatType::AGGREGATE, pool_type(size)}) {
    change(stats_.active[index(t)], 1, up);
    change(stats_.active_bytes[index(t)], size, up);
  }
}

void DeviceState::sample_arena() {
  if (!arena_) return;
  cuvmm::ArenaPhysical const p = arena_->physical();  // at every allocation: not stats(), which visits the fronts
  for (StatType t : {StatType::AGGREGATE, StatType::LARGE_POOL}) {
    set_measured(stats_.reserved_bytes[index(t)], p.bytes);
    set_measured(stats_.segment[index(t)], p.chunks_created - p.chunks_released);
  }
  stats_.num_device_alloc = static_cast<std::int64_t>(p.chunks_created) - device_alloc_base_;
  stats_.num_device_free = static_cast<std::int64_t>(p.chunks_released) - device_free_base_;
}

DeviceStats DeviceState::stats() {
  sample_arena();
  return stats_;
}

namespace {

/// Calls `reset` on every counted statistic of `stats` (the per-pool arrays and the oversize pair).
template <typename Reset>
void for_each_stat(DeviceStats& stats, Reset reset) {
  for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split, &stats.allocated_bytes,
                      &stats.reserved_bytes, &stats.active_bytes, &stats.inactive_split_bytes, &stats.requested_bytes}) {
    for (Stat& s : *array) reset(s);
  }
  reset(stats.oversize_allocations);
  reset(stats.oversize_segments);
}

}  // namespace

void DeviceState::reset_peaks() {
  sample_arena();
  for_each_stat(stats_, [](Stat& s) { s.reset_peak(); });
}

void DeviceState::reset_accumulated() {
  sample_arena();
  for_each_stat(stats_, [](Stat& s) { s.reset_accumulated(); });
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_sync_all_streams = 0;
  device_alloc_base_ += stats_.num_device_alloc;
  device_free_base_ += stats_.num_device_free;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

std::size_t DeviceState::largest_cached_block() {
  // Any free page of the device or of the arena can back a request: what is free on the device
  // plus what the arena holds beyond its live allocations.
  std::size_t free = 0;
  std::size_t total = 0;
  {
    c10::cuda::CUDAGuard const on(static_cast<c10::DeviceIndex>(device_));
    RelaxedDuringCapture const relaxed(capture_underway());
    C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  }
  std::size_t held = 0;
  if (arena_) {
    cuvmm::ArenaStats const s = arena_->stats();
    held = s.bytes_physical.current - std::min(s.bytes_physical.current, s.bytes_requested.current);
  }
  std::size_t largest = free + held;
  if (limit_ != no_limit) {
    auto const reserved = static_cast<std::size_t>(std::max<std::int64_t>(0, stats_.reserved_bytes[0].current));
    largest = std::min(largest, limit_ > reserved ? limit_ - reserved + held : held);
  }
  return largest;
}

void DeviceState::describe(std::vector<c10::CachingDeviceAllocator::SegmentInfo>& segments, MempoolId_t only,
                           const std::unordered_map<void*, Block>& live) {
  std::size_t active_bytes = 0;
  // One segment of one block. `block_context`: the live or pending block's allocation;
  // `segment_context`: where the segment was made (a pool block's differs from its current use's).
  auto segment_of = [&](void* ptr, std::size_t size, std::size_t requested, void* stream, MempoolId_t pool,
                        bool allocated, bool active, const std::shared_ptr<GatheredContext>& block_context,
                        const std::shared_ptr<GatheredContext>& segment_context) {
    c10::CachingDeviceAllocator::SegmentInfo s;
    s.device = static_cast<c10::DeviceIndex>(device_);
    s.address = reinterpret_cast<std::size_t>(ptr);
    s.total_size = size;
    s.requested_size = allocated ? requested : 0;
    s.allocated_size = allocated ? size : 0;
    s.active_size = active ? size : 0;
    s.stream = stream;
    s.is_large = size > small_pool_max;
    s.owner_private_pool_id = pool;
    s.context_when_allocated = segment_context;
    c10::CachingDeviceAllocator::BlockInfo b;
    b.size = size;
    b.requested_size = s.requested_size;
    b.allocated = allocated;
    b.active = active;
    b.context_when_allocated = block_context;
    s.blocks.push_back(b);
    active_bytes += s.active_size;
    segments.push_back(std::move(s));
  };
  // A pool block's segment was made when the pool took it from the Arena; a default block's with it.
  auto segment_context_of = [&](const Block& b) -> const std::shared_ptr<GatheredContext>& {
    return is_default_pool(b.pool) ? b.context : pools_.at(b.pool).blocks.at(b.ptr).segment_context;
  };
  bool const all = is_default_pool(only);
  for (auto const& [ptr, b] : live) {
    if (b.device != device_ || (!all && b.pool != only)) continue;
    segment_of(ptr, b.size, b.requested, b.stream, b.pool, true, true, b.context, segment_context_of(b));
  }
  for (PendingFree const& p : pending_) {
    if (!all && p.block.pool != only) continue;
    segment_of(p.block.ptr, p.block.size, p.block.requested, p.block.stream, p.block.pool, false, true, p.block.context,
               segment_context_of(p.block));
  }
  for (Block const& d : deferred_) {
    if (!all && d.pool != only) continue;
    segment_of(d.ptr, d.size, d.requested, d.stream, d.pool, false, true, d.context, segment_context_of(d));
  }
  for (auto const& [id, pool] : pools_) {
    if (!all && id != only) continue;
    for (auto const& [ptr, b] : pool.blocks) {
      if (!b.live) segment_of(ptr, b.size, 0, b.stream, id, false, false, nullptr, b.segment_context);
    }
  }
  history_.record(TraceEntry::SNAPSHOT, device_, 0, active_bytes, nullptr, {0, 0}, nullptr);
}

}  // namespace cuvmm_torch
