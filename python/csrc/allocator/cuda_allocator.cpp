// cuda_allocator.cpp: see cuda_allocator.hpp.
#include "cuda_allocator.hpp"

#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cstdio>

namespace cuvmm_torch {

namespace {

void delete_pointer(void* ptr) { CuvmmAllocator::instance()->free_pointer(ptr, false); }
// A distinct deleter for memory made while caching was off: record_stream ignores it, as PyTorch's
// allocator ignores its uncached memory.
void delete_uncached(void* ptr) { CuvmmAllocator::instance()->free_pointer(ptr, false); }

std::string pool_text(MempoolId_t id) { return "(" + std::to_string(id.first) + ", " + std::to_string(id.second) + ")"; }

}  // namespace

const std::shared_ptr<CuvmmAllocator>& CuvmmAllocator::instance() {
  // Leaked on purpose: tensors are freed during interpreter shutdown, after static destructors.
  static auto* const allocator = new std::shared_ptr<CuvmmAllocator>(new CuvmmAllocator);
  return *allocator;
}

DeviceState& CuvmmAllocator::state(c10::DeviceIndex device) {
  TORCH_CHECK(initialized_, "cuvmm_torch: the allocator was used before PyTorch initialized CUDA");
  TORCH_CHECK_INDEX(device >= 0 && static_cast<std::size_t>(device) < states_.size(), "cuvmm_torch: invalid device ",
                    static_cast<int>(device), " (", states_.size(), " devices)");
  return *states_[static_cast<std::size_t>(device)];
}

void CuvmmAllocator::init(int device_count) {
  std::lock_guard const lock(mutex_);
  double const fraction = c10::cuda::CUDACachingAllocator::CUDAAllocatorConfig::per_process_memory_fraction();
  for (auto i = static_cast<int>(states_.size()); i < device_count; ++i) {
    states_.push_back(std::make_unique<DeviceState>(i, fraction));
    states_.back()->history().configure(history_, false);
  }
  initialized_ = true;
}

bool CuvmmAllocator::initialized() { return initialized_; }

std::shared_ptr<GatheredContext> CuvmmAllocator::gather_context(RecordContext level) {
  if (record_context_.load() < level) return nullptr;
  c10::CachingDeviceAllocator::CreateContextFn const recorder = context_recorder_.load();
  return recorder != nullptr ? recorder() : nullptr;
}

void* CuvmmAllocator::allocate_on(c10::DeviceIndex device, size_t nbytes, cudaStream_t stream) {
  std::shared_ptr<GatheredContext> const context = gather_context(RecordContext::STATE);
  std::lock_guard const lock(mutex_);
  DeviceState& s = state(device);
  Block block;
  try {
    block = s.allocate(nbytes, stream, context);
  } catch (const c10::OutOfMemoryError&) {
    if (!oom_observers_.empty()) {
      DeviceStats const stats = s.stats();
      auto const [free, total] = getMemoryInfo(device);
      for (auto const& observer : oom_observers_) {
        observer(device, static_cast<size_t>(stats.allocated_bytes[0].current), total, free);
      }
    }
    throw;
  }
  live_.emplace(block.ptr, block);
  return block.ptr;
}

c10::DataPtr CuvmmAllocator::allocate(size_t n) {
  // As PyTorch's allocators do, before anything is asked of the device (and not counted as an OOM).
  constexpr std::size_t one_exbibyte = std::size_t{1} << 60;
  TORCH_CHECK_WITH(OutOfMemoryError, n < one_exbibyte, "CUDA out of memory. Tried to allocate more than 1EB memory. (cuvmm: ",
                   n, " bytes)");
  c10::DeviceIndex const device = c10::cuda::current_device();
  if (!enabled_) {
    void* const p = n == 0 ? nullptr : allocate_uncached(n);
    return {p, p, &delete_uncached, c10::Device(c10::DeviceType::CUDA, device)};
  }
  void* const p = n == 0 ? nullptr : allocate_on(device, n, c10::cuda::getCurrentCUDAStream(device).stream());
  return {p, p, &delete_pointer, c10::Device(c10::DeviceType::CUDA, device)};
}

c10::DeleterFnPtr CuvmmAllocator::raw_deleter() const { return &delete_pointer; }

void CuvmmAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
}

void* CuvmmAllocator::raw_alloc(size_t nbytes) {
  c10::DeviceIndex const device = c10::cuda::current_device();
  return raw_alloc_with_stream(nbytes, c10::cuda::getCurrentCUDAStream(device).stream());
}

void* CuvmmAllocator::raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) {
  if (nbytes == 0) return nullptr;
  if (!enabled_) return allocate_uncached(nbytes);
  return allocate_on(c10::cuda::current_device(), nbytes, stream);
}

void* CuvmmAllocator::allocate_uncached(size_t nbytes) {
  void* p = nullptr;
  cudaError_t const status = cudaMalloc(&p, nbytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", nbytes,
                     " bytes with caching turned off (cudaMalloc)");
  }
  C10_CUDA_CHECK(status);
  std::lock_guard const lock(mutex_);
  uncached_.insert(p);
  return p;
}

void CuvmmAllocator::raw_delete(void* ptr) { free_pointer(ptr, true); }

void CuvmmAllocator::free_pointer(void* ptr, bool throw_if_unknown) {
  if (ptr == nullptr) return;
  std::shared_ptr<GatheredContext> const context = gather_context(RecordContext::ALL);
  std::lock_guard const lock(mutex_);
  auto const it = live_.find(ptr);
  if (it == live_.end() && uncached_.erase(ptr) == 1) {
    cudaError_t const status = cudaFree(ptr);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      std::fprintf(stderr, "cuvmm_torch: cudaFree(%p) failed: %s\n", ptr, cudaGetErrorString(status));
    }
    return;
  }
  if (it == live_.end()) {
    TORCH_CHECK(!throw_if_unknown, "cuvmm_torch: invalid device pointer ", ptr, " (not allocated by cuvmm, or freed)");
    std::fprintf(stderr, "cuvmm_torch: freeing %p, which cuvmm did not allocate (or freed already): ignored\n", ptr);
    return;
  }
  Block block = std::move(it->second);
  live_.erase(it);
  try {
    states_[static_cast<std::size_t>(block.device)]->free(std::move(block), context);
  } catch (const std::exception& e) {
    if (throw_if_unknown) throw;
    std::fprintf(stderr, "cuvmm_torch: freeing %p failed: %s\n", ptr, e.what());
  }
}

void CuvmmAllocator::emptyCache(MempoolId_t /*mempool_id*/) {
  // Every pool's blocks stay while the pool lives; a dead pool's go back with everything else.
  std::shared_ptr<GatheredContext> const context = gather_context(RecordContext::ALL);
  std::lock_guard const lock(mutex_);
  for (auto& s : states_) s->empty_cache(context);
}

DeviceStats CuvmmAllocator::getDeviceStats(c10::DeviceIndex device) {
  std::lock_guard const lock(mutex_);
  return state(device).stats();
}

void CuvmmAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  std::lock_guard const lock(mutex_);
  state(device).reset_accumulated();
}

void CuvmmAllocator::resetPeakStats(c10::DeviceIndex device) {
  std::lock_guard const lock(mutex_);
  state(device).reset_peaks();
}

double CuvmmAllocator::getMemoryFraction(c10::DeviceIndex device) {
  std::lock_guard const lock(mutex_);
  return state(device).memory_fraction();
}

void CuvmmAllocator::setMemoryFraction(double fraction, c10::DeviceIndex device) {
  std::lock_guard const lock(mutex_);
  state(device).set_memory_fraction(fraction);
}

std::vector<c10::cuda::CUDACachingAllocator::StreamSegmentSize> CuvmmAllocator::getExpandableSegmentSizes(
    c10::DeviceIndex /*device*/) {
  return {};  // no expandable segments: the Arena grows by pages
}

void CuvmmAllocator::enable(bool value) { enabled_ = value; }
bool CuvmmAllocator::isEnabled() const { return enabled_; }

void CuvmmAllocator::cacheInfo(c10::DeviceIndex device, size_t* largestBlock) {
  std::lock_guard const lock(mutex_);
  *largestBlock = state(device).largest_cached_block();
}

void* CuvmmAllocator::getBaseAllocation(void* ptr, size_t* size) {
  std::lock_guard const lock(mutex_);
  auto const it = live_.find(ptr);
  TORCH_CHECK(it != live_.end(), "cuvmm_torch: getBaseAllocation: ", ptr,
              " is not the start of a live cuvmm allocation (interior pointers are not tracked)");
  if (size != nullptr) *size = it->second.size;
  return ptr;
}

void CuvmmAllocator::recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) {
  // Not ours (from_blob, another allocator): nothing to do, as with PyTorch's allocator.
  if (ptr.get() == nullptr || ptr.get_deleter() != &delete_pointer) return;
  std::lock_guard const lock(mutex_);
  auto const it = live_.find(ptr.get());
  TORCH_CHECK(it != live_.end(), "cuvmm_torch: recordStream: ", ptr.get(), " is not a live cuvmm allocation");
  states_[static_cast<std::size_t>(it->second.device)]->record_stream(it->second, stream.stream());
}

CuvmmAllocator::SnapshotInfo CuvmmAllocator::snapshot(MempoolId_t mempool_id, bool include_traces) {
  std::function<c10::time_t(c10::approx_time_t)> const to_unix_ns = clock_converter_.makeConverter();
  std::lock_guard const lock(mutex_);
  SnapshotInfo info{};
  for (auto const& s : states_) {
    // The trace before describing: describe traces this snapshot, which the next snapshot shows.
    std::vector<TraceEntry> trace = include_traces ? s->history().entries() : std::vector<TraceEntry>{};
    for (TraceEntry& e : trace) e.time_.t_ = to_unix_ns(e.time_.approx_t_) / 1000;  // microseconds
    info.device_traces.push_back(std::move(trace));
    s->describe(info.segments, mempool_id, live_);
  }
  info.config_metadata.last_allocator_settings = "cuvmm";
  return info;
}

void CuvmmAllocator::beginAllocateToPool(c10::DeviceIndex device, MempoolId_t mempool_id,
                                         std::function<bool(cudaStream_t)> filter) {
  std::lock_guard const lock(mutex_);
  state(device).begin_allocate_to_pool(mempool_id, std::move(filter));
}

void CuvmmAllocator::endAllocateToPool(c10::DeviceIndex device, MempoolId_t mempool_id) {
  std::lock_guard const lock(mutex_);
  state(device).end_allocate_to_pool(mempool_id);
}

void CuvmmAllocator::releasePool(c10::DeviceIndex device, MempoolId_t mempool_id) {
  std::lock_guard const lock(mutex_);
  state(device).release_pool(mempool_id);
}

int CuvmmAllocator::getPoolUseCount(c10::DeviceIndex device, MempoolId_t mempool_id) {
  std::lock_guard const lock(mutex_);
  return state(device).pool_use_count(mempool_id);
}

void CuvmmAllocator::createOrIncrefPool(c10::DeviceIndex device, MempoolId_t mempool_id,
                                        std::shared_ptr<CUDAAllocator> allocator) {
  TORCH_CHECK(allocator == nullptr || allocator.get() == this,
              "cuvmm_torch: a torch.cuda.MemPool with its own allocator is not supported while cuvmm is PyTorch's "
              "allocator (pool ", pool_text(mempool_id), ")");
  std::lock_guard const lock(mutex_);
  state(device).create_or_incref_pool(mempool_id);
}

void CuvmmAllocator::setUseOnOOM(c10::DeviceIndex /*device*/, MempoolId_t mempool_id, bool use_on_oom) {
  TORCH_CHECK(!use_on_oom, "cuvmm_torch: torch.cuda.MemPool(use_on_oom=True) is not supported (pool ",
              pool_text(mempool_id), "): cuvmm never serves an ordinary request from a private pool");
}

void CuvmmAllocator::setNoSplit(c10::DeviceIndex /*device*/, MempoolId_t /*mempool_id*/) {
  // cuvmm never splits a pool's blocks: every allocation is a block of its own.
}

bool CuvmmAllocator::checkPoolLiveAllocations(c10::DeviceIndex device, MempoolId_t mempool_id,
                                              const std::unordered_set<void*>& expected_live_allocations) {
  std::lock_guard const lock(mutex_);
  return state(device).pool_live_allocations_are(mempool_id, expected_live_allocations);
}

c10::cuda::CUDACachingAllocator::ShareableHandle CuvmmAllocator::shareIpcHandle(void* ptr) {
  TORCH_CHECK(false, "cuvmm_torch: sharing CUDA tensors between processes (IPC handle of ", ptr,
              ") is not supported while cuvmm is PyTorch's allocator");
}

std::shared_ptr<void> CuvmmAllocator::getIpcDevPtr(std::string /*handle*/) {
  TORCH_CHECK(false, "cuvmm_torch: opening a CUDA IPC handle is not supported while cuvmm is PyTorch's allocator");
}

bool CuvmmAllocator::isHistoryEnabled() {
  std::lock_guard const lock(mutex_);
  return history_.enabled;
}

void CuvmmAllocator::recordHistory(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_recorder,
                                   size_t alloc_trace_max_entries, RecordContext when, bool clearHistory,
                                   const std::vector<std::string>& skip_actions) {
  TORCH_CHECK(when == RecordContext::NEVER || context_recorder != nullptr,
              "cuvmm_torch: recordHistory: recording contexts needs a context recorder");
  HistorySettings settings;
  settings.enabled = enabled;
  settings.when = enabled ? when : RecordContext::NEVER;
  settings.max_entries = alloc_trace_max_entries;
  settings.skipped = parse_skip_actions(skip_actions);
  std::lock_guard const lock(mutex_);
  history_ = std::move(settings);
  for (auto& s : states_) s->history().configure(history_, clearHistory);
  context_recorder_.store(enabled ? context_recorder : nullptr);
  record_context_.store(history_.when);
}

void CuvmmAllocator::pushCompileContext(std::string& md) { push_compile_context(md); }
void CuvmmAllocator::popCompileContext() { pop_compile_context(); }
void CuvmmAllocator::setUserMetadata(const std::string& metadata) { set_user_metadata(metadata); }
std::string CuvmmAllocator::getUserMetadata() { return user_metadata(); }

void CuvmmAllocator::attachOutOfMemoryObserver(c10::cuda::CUDACachingAllocator::OutOfMemoryObserver observer) {
  std::lock_guard const lock(mutex_);
  oom_observers_.push_back(std::move(observer));
}

void CuvmmAllocator::attachAllocatorTraceTracker(c10::CachingDeviceAllocator::AllocatorTraceTracker /*tracker*/) {
  TORCH_CHECK(false, "cuvmm_torch: allocator trace trackers are not supported while cuvmm is PyTorch's allocator");
}

void CuvmmAllocator::enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) {
  TORCH_CHECK(dev == dev_to_access, "cuvmm_torch: peer access from device ", static_cast<int>(dev), " to device ",
              static_cast<int>(dev_to_access), " is not supported while cuvmm is PyTorch's allocator");
}

cudaError_t CuvmmAllocator::memcpyAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                        cudaStream_t stream, bool /*p2p_enabled*/) {
  if (dstDevice == srcDevice) return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
  return cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, stream);
}

std::shared_ptr<CuvmmAllocator::AllocatorState> CuvmmAllocator::getCheckpointState(c10::DeviceIndex device,
                                                                                   MempoolId_t id) {
  std::lock_guard const lock(mutex_);
  return state(device).checkpoint(id, live_);
}

CuvmmAllocator::CheckpointDelta CuvmmAllocator::setCheckpointPoolState(c10::DeviceIndex device,
                                                                       std::shared_ptr<AllocatorState> pps) {
  auto const checkpoint = std::dynamic_pointer_cast<PoolCheckpoint>(pps);
  TORCH_CHECK(checkpoint != nullptr, "cuvmm_torch: setCheckpointPoolState: the state was not made by cuvmm");
  TORCH_CHECK(checkpoint->device == device, "cuvmm_torch: setCheckpointPoolState: the state is of device ",
              checkpoint->device, ", not ", static_cast<int>(device));
  std::vector<Block> allocated;
  CheckpointDelta delta;
  {
    std::lock_guard const lock(mutex_);
    state(device).restore(*checkpoint, live_, delta.ptrs_freed, allocated);
  }
  for (Block const& b : allocated) {
    delta.dataptrs_allocd.emplace_back(b.ptr, b.ptr, &delete_pointer, c10::Device(c10::DeviceType::CUDA, device));
  }
  return delta;
}

std::string CuvmmAllocator::name() { return "cuvmm"; }

bool CuvmmAllocator::arena_stats(int device, cuvmm::ArenaStats& out) {
  std::lock_guard const lock(mutex_);
  if (!initialized_ || device < 0 || static_cast<std::size_t>(device) >= states_.size()) return false;
  cuvmm::Arena* const arena = states_[static_cast<std::size_t>(device)]->arena_if_made();
  if (arena == nullptr) return false;
  out = arena->stats();
  return true;
}

std::size_t CuvmmAllocator::trim(int device) {
  std::lock_guard const lock(mutex_);
  if (!initialized_ || device < 0 || static_cast<std::size_t>(device) >= states_.size()) return 0;
  return states_[static_cast<std::size_t>(device)]->empty_cache(nullptr);
}

}  // namespace cuvmm_torch
