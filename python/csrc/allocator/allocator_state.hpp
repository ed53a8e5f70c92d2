// allocator_state.hpp: the state behind cuvmm_torch's CUDA allocator, one DeviceState per device.
//
// Owns, per device: the Arena that serves every allocation (made on the device's first request,
// with $CUVMM_ARENA_CONF's options; never destroyed: PyTorch frees tensors during interpreter
// shutdown), the table of live blocks, the frees that wait for other streams (record_stream), the
// private pools of CUDA graphs and torch.cuda.MemPool, and PyTorch's statistics (DeviceStats).
//
// Private pools. A block allocated while a pool is the target of allocation (a graph capture, or
// use_mem_pool) belongs to that pool until the pool dies: freeing it puts it on the pool's free
// list, where only later allocations to the same pool (on the same stream) find it. So a graph's
// replays keep using the addresses recorded in it, and nothing outside the graph reuses them. The
// pool's blocks come from the device Arena, requested on a stream of the allocator's own (the pool
// stream) that no kernel ever uses: the Arena then never records an event on, or makes wait, a
// stream that is being captured (which would invalidate the capture); when the Arena hands the pool
// stream memory that another stream freed, the allocator waits on the host for that stream's
// work, so the memory is idle before the graph uses it. A pool dies when its users released it
// (releasePool) and it has no live block; its blocks then go back to the Arena after the device
// finished all its work (a graph may still be replaying), outside any capture.
//
// Stream uses (record_stream). A block used on streams other than its own is returned to the Arena
// (or its pool's free list) only after events recorded on those streams at the free have completed:
// polled at each allocation outside capture, waited for by empty_cache and before an out-of-memory
// error. A free during a capture records no event (that would be captured): it waits until no
// capture is underway.
//
// History (torch.cuda.memory._record_memory_history): every block is its own segment, as the
// snapshot describes it (describe), and the trace says so too. A block the Arena gives is traced
// segment_alloc (its rounded size) then alloc (the bytes asked for); its free is free_requested,
// then free_completed when it really goes back (at once, or once the events recorded for its other
// streams completed), then segment_free as the Arena takes it back. A private pool's block is a
// segment from when the pool takes it from the Arena until the dead pool gives it back (segment_free
// then); reusing or freeing it inside the pool traces alloc and free_requested/free_completed only.
// A request that fails traces oom (addr: the bytes the device has free; size: the rounded request),
// a snapshot traces snapshot (size: the active bytes described). Contexts come from the caller,
// gathered before the allocator's lock (see history.hpp); a live block keeps its allocation's, and
// a pool block the one of its segment's making.
//
// Statistics follow PyTorch's definitions where the Arena allows: allocated and requested bytes
// and counts are kept here exactly (sizes rounded to 512 bytes, as PyTorch does); reserved bytes
// are the Arena's physical bytes (pages held, mapped or pooled) and segments its pages' chunks.
// The small pool is blocks of up to 1 MiB. Peaks are kept here so that resetting them works.
//
// Never does: call the CUDA driver for memory (only the Arena does), or hold a lock while calling
// back into PyTorch. Not thread-safe by itself: the allocator's one lock guards every call.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <cuvmm/arena.hpp>

#include "history.hpp"

namespace cuvmm_torch {

using DeviceStats = c10::CachingDeviceAllocator::DeviceStats;

/// PyTorch rounds every request to this many bytes (kMinBlockSize); so do the statistics here.
inline constexpr std::size_t round_bytes = 512;
/// Blocks up to this size count in PyTorch's small pool (kSmallSize).
inline constexpr std::size_t small_pool_max = std::size_t{1} << 20;

struct MempoolIdHash {
  std::size_t operator()(const MempoolId_t& id) const noexcept {
    return std::hash<std::uint64_t>{}(id.first * 0x9e3779b97f4a7c15ULL ^ id.second);
  }
};

inline bool is_default_pool(const MempoolId_t& id) { return id.first == 0 && id.second == 0; }

/// One live allocation.
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;       // bytes the Arena (or the pool) gave: the request rounded to 512
  std::size_t requested = 0;  // bytes PyTorch asked for
  int device = 0;
  cudaStream_t stream = nullptr;  // the stream it was allocated on
  MempoolId_t pool{0, 0};         // {0, 0}: no private pool
  std::vector<cudaStream_t> stream_uses;  // other streams that use it (record_stream)
  std::shared_ptr<GatheredContext> context;  // where it was allocated (history); null when not recorded
};

/// A block of a private pool, live or on its free list.
struct PoolBlock {
  std::size_t size = 0;
  cudaStream_t stream = nullptr;
  bool live = false;
  std::shared_ptr<GatheredContext> segment_context;  // where the pool took it from the Arena (history)
};

struct PrivatePool {
  int use_count = 0;                     // users: graphs, MemPools, use_mem_pool scopes
  std::map<void*, PoolBlock> blocks;     // every block the pool holds from the Arena
  std::set<std::tuple<cudaStream_t, std::size_t, void*>> free_blocks;  // by stream, then size
  std::size_t live = 0;
};

/// A free waiting for events recorded on the streams that used the block.
struct PendingFree {
  Block block;
  std::vector<cudaEvent_t> events;
};

/// What getCheckpointState returns: the live blocks of one pool.
struct PoolCheckpoint final : c10::cuda::CUDACachingAllocator::AllocatorState {
  int device = 0;
  MempoolId_t pool{0, 0};
  std::vector<Block> live;
};

class DeviceState {
 public:
  /// `fraction`: the share of the device the process may hold (PYTORCH_CUDA_ALLOC_CONF's
  /// per_process_memory_fraction); its byte limit is computed when the arena is made, so that
  /// making the state touches no device.
  explicit DeviceState(int device, double fraction = 1.0) : device_(device), fraction_(fraction) {}
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;
  ~DeviceState() = default;  // never run: the states are leaked (see the note at the top)

  /// A block of `requested` bytes for work on `stream`, from the pool that an active
  /// beginAllocateToPool routes `stream` to, else from the Arena. Throws c10::OutOfMemoryError.
  /// `context`: the caller's, gathered for the history (null when not recorded).
  Block allocate(std::size_t requested, cudaStream_t stream, const std::shared_ptr<GatheredContext>& context);
  /// Frees a live block, which the caller took out of its table (stream uses first, see the note
  /// at the top). `context`: the free's, for the history (null: the block's own is traced).
  void free(Block block, const std::shared_ptr<GatheredContext>& context);
  void record_stream(Block& block, cudaStream_t stream);

  void begin_allocate_to_pool(MempoolId_t pool, std::function<bool(cudaStream_t)> filter);
  void end_allocate_to_pool(MempoolId_t pool);
  void release_pool(MempoolId_t pool);
  void create_or_incref_pool(MempoolId_t pool);
  int pool_use_count(MempoolId_t pool) const;
  bool pool_live_allocations_are(MempoolId_t pool, const std::unordered_set<void*>& expected) const;
  /// `live` is the allocator's table of live blocks (all devices).
  std::shared_ptr<PoolCheckpoint> checkpoint(MempoolId_t pool, const std::unordered_map<void*, Block>& live) const;
  /// Makes the pool's live blocks those of `checkpoint`: every block live now is freed (returned
  /// in `freed`), every block live in the checkpoint is live again (returned in `allocated`).
  void restore(const PoolCheckpoint& checkpoint, std::unordered_map<void*, Block>& live, std::vector<void*>& freed,
               std::vector<Block>& allocated);

  /// Waits for pending frees, gives dead pools back and trims the Arena; the bytes given back.
  /// Nothing during a capture. `context`: the caller's, for the history.
  std::size_t empty_cache(const std::shared_ptr<GatheredContext>& context);
  void set_memory_fraction(double fraction);
  [[nodiscard]] double memory_fraction() const { return fraction_; }

  DeviceStats stats();
  void reset_peaks();
  void reset_accumulated();
  /// The largest request that could be served: what the device has free plus what the arena
  /// holds beyond its live allocations, within the memory fraction.
  std::size_t largest_cached_block();
  /// Live blocks and the free blocks of private pools, as PyTorch's snapshot segments, with the
  /// contexts recorded for them; traces a snapshot entry.
  void describe(std::vector<c10::CachingDeviceAllocator::SegmentInfo>& segments, MempoolId_t only,
                const std::unordered_map<void*, Block>& live);

  History& history() { return history_; }

  [[nodiscard]] bool capture_underway() const { return !captures_.empty(); }
  cuvmm::Arena* arena_if_made() const { return arena_.get(); }
  cuvmm::Arena& arena();
  std::size_t trim();

 private:
  void* allocate_from_arena(std::size_t size, cudaStream_t stream);
  void make_pool_stream();
  void* allocate_in_pool(PrivatePool& pool, std::size_t size, cudaStream_t stream,
                         const std::shared_ptr<GatheredContext>& context);
  /// Traces `action` on `block` (its address, pool and stream; `size`) with `context`, or the
  /// block's own where `context` is null.
  void trace_block(TraceEntry::Action action, const Block& block, std::size_t size,
                   const std::shared_ptr<GatheredContext>& context);

  /// Back to the Arena or the pool's free list; `context` as for trace_block.
  void release(const Block& block, const std::shared_ptr<GatheredContext>& context);
  void return_block_to_pool(const Block& block, const std::shared_ptr<GatheredContext>& context);
  /// Holds `block`, freed while its other streams may still use it, until events recorded on
  /// each of them now are done (process_pending then releases it).
  void pend(Block block);
  void process_pending(bool wait, const std::shared_ptr<GatheredContext>& context);
  void process_deferred();
  void give_back_dead_pools(const std::shared_ptr<GatheredContext>& context);
  void maybe_kill_pool(MempoolId_t id, const std::shared_ptr<GatheredContext>& context);
  void count_allocated(const Block& block, bool up);
  void count_active(std::size_t size, bool up);
  void sample_arena();
  cudaEvent_t take_event();
  void enforce_limit(void* p, std::size_t size, cudaStream_t stream);
  [[noreturn]] void out_of_memory(std::size_t size, const std::string& cause);
  std::size_t device_total_memory();
  /// What cudaMemGetInfo says is free; 0 where it fails (allowed during a capture).
  std::size_t device_free_memory();

  int device_;
  std::unique_ptr<cuvmm::Arena> arena_;
  cudaStream_t pool_stream_ = nullptr;
  std::unordered_map<MempoolId_t, PrivatePool, MempoolIdHash> pools_;
  std::vector<std::pair<MempoolId_t, std::function<bool(cudaStream_t)>>> captures_;
  std::deque<PendingFree> pending_;
  std::vector<Block> deferred_;             // freed with stream uses during a capture
  std::vector<MempoolId_t> dead_pools_;     // died during a capture: given back after it
  std::vector<cudaEvent_t> spare_events_;
  DeviceStats stats_;
  double fraction_ = 1.0;
  static constexpr std::size_t no_limit = static_cast<std::size_t>(-1);
  std::size_t limit_ = no_limit;  // bytes the process may hold on the device (a fraction of 0: none)
  std::size_t total_memory_ = 0;
  std::int64_t device_alloc_base_ = 0;  // the Arena's chunk counts at the last reset_accumulated
  std::int64_t device_free_base_ = 0;
  History history_;
};

}  // namespace cuvmm_torch
