// cuda_allocator.hpp: cuvmm's Arena as PyTorch's whole CUDA allocator.
//
// CuvmmAllocator implements c10::cuda::CUDACachingAllocator::CUDAAllocator, the interface PyTorch's
// own caching allocator implements, so that torch.cuda's memory statistics, record_stream, CUDA
// graph private pools (torch.cuda.graph, make_graphed_callables, torch.compile's
// "reduce-overhead"), pool checkpoints, empty_cache, the memory fraction and torch.cuda.MemPool
// work as they do with PyTorch's allocator. The memory comes from one cuvmm::Arena per device
// (DeviceState, allocator_state.hpp). What it cannot do (IPC handles, allocator trace trackers, peer
// access between devices, MemPools with another allocator, use_on_oom) raises a RuntimeError naming it.
//
// History (torch.cuda.memory._record_memory_history, _snapshot's device_traces and frames, the
// memory visualizer): recordHistory configures every device's History (history.hpp); the context
// recorder is called before the lock is taken, as PyTorch does (it takes the GIL, which a thread
// waiting for the lock may hold), and only when recording is on and `when` asks for that call's
// context: allocations at STATE and above, frees and empty_cache at ALL. snapshot() converts the
// entries' approximate-clock times to microseconds since the Unix epoch.
//
// One instance per process (instance()), installed by Python through
// torch._C._cuda_changeCurrentAllocator before CUDA is initialized; never destroyed (tensors are
// freed during interpreter shutdown). One recursive lock guards every call: PyTorch may call back
// into the allocator from an out-of-memory observer.
//
// torch.cuda.caching_allocator_enable(False) turns caching off as it does for PyTorch's allocator:
// until it is turned on again, requests go straight to cudaMalloc and frees to cudaFree, outside
// the Arena and the statistics.
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/ApproximateClock.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocator_state.hpp"

namespace cuvmm_torch {

class CuvmmAllocator final : public c10::cuda::CUDACachingAllocator::CUDAAllocator {
 public:
  using SnapshotInfo = c10::cuda::CUDACachingAllocator::SnapshotInfo;
  using CheckpointDelta = c10::cuda::CUDACachingAllocator::CheckpointDelta;
  using AllocatorState = c10::cuda::CUDACachingAllocator::AllocatorState;

  /// The process's allocator (PyTorch keeps a shared_ptr to it once installed).
  static const std::shared_ptr<CuvmmAllocator>& instance();

  // c10::Allocator
  c10::DataPtr allocate(size_t n) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // c10::DeviceAllocator
  bool initialized() override;
  void emptyCache(MempoolId_t mempool_id) override;
  DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;

  // c10::cuda::CUDACachingAllocator::CUDAAllocator
  void* raw_alloc(size_t nbytes) override;
  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override;
  void raw_delete(void* ptr) override;
  void init(int device_count) override;
  double getMemoryFraction(c10::DeviceIndex device) override;
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override;
  std::vector<c10::cuda::CUDACachingAllocator::StreamSegmentSize> getExpandableSegmentSizes(
      c10::DeviceIndex device) override;
  void enable(bool value) override;
  bool isEnabled() const override;
  void cacheInfo(c10::DeviceIndex device, size_t* largestBlock) override;
  void* getBaseAllocation(void* ptr, size_t* size) override;
  using CUDAAllocator::recordStream;
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override;
  SnapshotInfo snapshot(MempoolId_t mempool_id, bool include_traces) override;
  void beginAllocateToPool(c10::DeviceIndex device, MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override;
  void endAllocateToPool(c10::DeviceIndex device, MempoolId_t mempool_id) override;
  void releasePool(c10::DeviceIndex device, MempoolId_t mempool_id) override;
  int getPoolUseCount(c10::DeviceIndex device, MempoolId_t mempool_id) override;
  void createOrIncrefPool(c10::DeviceIndex device, MempoolId_t mempool_id,
                          std::shared_ptr<CUDAAllocator> allocator) override;
  void setUseOnOOM(c10::DeviceIndex device, MempoolId_t mempool_id, bool use_on_oom) override;
  void setNoSplit(c10::DeviceIndex device, MempoolId_t mempool_id) override;
  bool checkPoolLiveAllocations(c10::DeviceIndex device, MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override;
  c10::cuda::CUDACachingAllocator::ShareableHandle shareIpcHandle(void* ptr) override;
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override;
  bool isHistoryEnabled() override;
  void recordHistory(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                     size_t alloc_trace_max_entries, c10::CachingDeviceAllocator::RecordContext when,
                     bool clearHistory, const std::vector<std::string>& skip_actions) override;
  void pushCompileContext(std::string& md) override;
  void popCompileContext() override;
  void setUserMetadata(const std::string& metadata) override;
  std::string getUserMetadata() override;
  void attachOutOfMemoryObserver(c10::cuda::CUDACachingAllocator::OutOfMemoryObserver observer) override;
  void attachAllocatorTraceTracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker) override;
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override;
  cudaError_t memcpyAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                          cudaStream_t stream, bool p2p_enabled) override;
  std::shared_ptr<AllocatorState> getCheckpointState(c10::DeviceIndex device, MempoolId_t id) override;
  CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device, std::shared_ptr<AllocatorState> pps) override;
  std::string name() override;

  // For cuvmm_torch's own Python functions.
  /// The device's Arena statistics; false when nothing was allocated on it yet.
  bool arena_stats(int device, cuvmm::ArenaStats& out);
  std::size_t trim(int device);
  /// Frees `ptr` if this allocator gave it; the deleter of every DataPtr it returns.
  void free_pointer(void* ptr, bool throw_if_unknown);

 private:
  CuvmmAllocator() = default;
  DeviceState& state(c10::DeviceIndex device);
  void* allocate_on(c10::DeviceIndex device, size_t nbytes, cudaStream_t stream);
  /// The caller's context for the history when recording asks for it at `level`, else null. Call
  /// without holding the lock.
  std::shared_ptr<GatheredContext> gather_context(RecordContext level);
  void* allocate_uncached(size_t nbytes);  // cudaMalloc, while caching is off

  std::recursive_mutex mutex_;
  bool initialized_ = false;
  bool enabled_ = true;
  std::vector<std::unique_ptr<DeviceState>> states_;
  std::unordered_map<void*, Block> live_;  // every live block, all devices
  std::unordered_set<void*> uncached_;     // live cudaMalloc allocations made while caching was off
  std::vector<c10::cuda::CUDACachingAllocator::OutOfMemoryObserver> oom_observers_;
  HistorySettings history_;  // the last recordHistory's, given to every device (init too)
  // Read without the lock by gather_context; written under it by recordHistory.
  std::atomic<RecordContext> record_context_{RecordContext::NEVER};
  std::atomic<c10::CachingDeviceAllocator::CreateContextFn> context_recorder_{nullptr};
  c10::ApproximateClockToUnixTimeConverter clock_converter_;  // trace times to Unix time
};

}  // namespace cuvmm_torch
