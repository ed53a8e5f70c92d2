// device_runtime.cpp: the CUDA runtime baselines of cuvmm-plan (see device_runtime.hpp). These are
// the strategies cuvmm is compared with, written plainly as users write them; cuvmm's own memory
// never goes through here.
#include "device_runtime.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <new>
#include <stdexcept>
#include <string>

namespace cuvmm::plan {
namespace {

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(status));
}

/// cudaMalloc that reports exhaustion as std::bad_alloc (and clears the sticky-free error state).
void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  cudaError_t const status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  check(status, "cudaMalloc");
  return p;
}

std::size_t device_memory_in_use() {
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return total - free;
}

class StreamFills final : public MemoryOps {
 public:
  explicit StreamFills(cudaStream_t stream) : stream_(stream) {}
  void fill(void* data, std::size_t bytes) override { check(cudaMemsetAsync(data, 0x5A, bytes, stream_), "cudaMemsetAsync"); }
  void finish() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  std::optional<std::size_t> memory_in_use() override { return device_memory_in_use(); }

 private:
  cudaStream_t stream_;
};

class CopyAndGrow final : public GrowthStrategy {
 public:
  CopyAndGrow(cudaStream_t stream, double factor) : stream_(stream), factor_(factor) {}
  CopyAndGrow(const CopyAndGrow&) = delete;
  CopyAndGrow& operator=(const CopyAndGrow&) = delete;
  ~CopyAndGrow() override {
    cudaStreamSynchronize(stream_);
    cudaFree(data_);
  }
  void* append(std::size_t bytes) override {
    if (size_ + bytes > capacity_) grow(size_ + bytes);
    void* const out = data_ + size_;
    size_ += bytes;
    return out;
  }
  std::size_t peak_bytes() const override { return peak_; }
  std::size_t bytes_copied() const override { return copied_; }
  std::size_t chunks() const override { return allocations_; }
  double growth_seconds() const override { return growth_seconds_; }
  void set_copy_hook(std::function<void()> hook) override { copy_hook_ = std::move(hook); }

 private:
  void grow(std::size_t needed) {
    auto const start = std::chrono::steady_clock::now();
    auto const scaled = static_cast<std::size_t>(std::ceil(static_cast<double>(capacity_) * factor_));
    std::size_t const new_capacity = std::max(needed, scaled);
    auto* const fresh = static_cast<std::byte*>(device_malloc(new_capacity));
    peak_ = std::max(peak_, capacity_ + new_capacity);  // old and new held while copying
    if (copy_hook_) copy_hook_();
    if (size_ != 0) check(cudaMemcpyAsync(fresh, data_, size_, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // the copy is done before the old buffer goes
    check(cudaFree(data_), "cudaFree");
    data_ = fresh;
    capacity_ = new_capacity;
    copied_ += size_;
    ++allocations_;
    growth_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  cudaStream_t stream_;
  double factor_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::size_t peak_ = 0;
  std::size_t copied_ = 0;
  std::size_t allocations_ = 0;
  double growth_seconds_ = 0;
  std::function<void()> copy_hook_;
};

class Preallocated final : public GrowthStrategy {
 public:
  explicit Preallocated(std::size_t capacity)
      : data_(static_cast<std::byte*>(device_malloc(capacity))), capacity_(capacity) {}
  Preallocated(const Preallocated&) = delete;
  Preallocated& operator=(const Preallocated&) = delete;
  ~Preallocated() override {
    cudaDeviceSynchronize();
    cudaFree(data_);
  }
  void* append(std::size_t bytes) override {
    if (bytes > capacity_ - size_) throw std::bad_alloc();
    void* const out = data_ + size_;
    size_ += bytes;
    return out;
  }
  std::size_t peak_bytes() const override { return capacity_; }
  std::size_t chunks() const override { return 1; }

 private:
  std::byte* data_;
  std::size_t capacity_;
  std::size_t size_ = 0;
};

class MallocAsyncAllocator final : public TraceAllocator {
 public:
  explicit MallocAsyncAllocator(cudaStream_t stream) : stream_(stream) {
    check(cudaDeviceGetDefaultMemPool(&pool_, 0), "cudaDeviceGetDefaultMemPool");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
    std::uint64_t zero = 0;
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero), "cudaMemPoolSetAttribute");
  }
  MallocAsyncAllocator(const MallocAsyncAllocator&) = delete;
  MallocAsyncAllocator& operator=(const MallocAsyncAllocator&) = delete;
  /// Gives the pool's memory back, so that what is measured next starts from a clean device.
  ~MallocAsyncAllocator() override {
    cudaStreamSynchronize(stream_);
    cudaMemPoolTrimTo(pool_, 0);
  }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    cudaError_t const status = cudaMallocAsync(&p, bytes, stream_);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    check(status, "cudaMallocAsync");
    return p;
  }
  void deallocate(void* p, std::size_t) override { check(cudaFreeAsync(p, stream_), "cudaFreeAsync"); }
  std::size_t held_bytes() override { return attribute(cudaMemPoolAttrReservedMemCurrent); }
  std::optional<std::size_t> exact_peak_held_bytes() override { return attribute(cudaMemPoolAttrReservedMemHigh); }
  void finish() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  std::size_t attribute(cudaMemPoolAttr which) const {
    std::uint64_t value = 0;
    check(cudaMemPoolGetAttribute(pool_, which, &value), "cudaMemPoolGetAttribute");
    return static_cast<std::size_t>(value);
  }
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
};

class MallocAllocator final : public TraceAllocator {
 public:
  MallocAllocator() : baseline_(device_memory_in_use()) {}
  void* allocate(std::size_t bytes) override {
    try {
      return device_malloc(bytes);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
  void deallocate(void* p, std::size_t) override { check(cudaFree(p), "cudaFree"); }
  std::size_t held_bytes() override {
    std::size_t const in_use = device_memory_in_use();
    return in_use > baseline_ ? in_use - baseline_ : 0;
  }

 private:
  std::size_t baseline_;
};

}  // namespace

struct DeviceRuntimeSession::State {
  cudaStream_t stream = nullptr;
  std::unique_ptr<StreamFills> fills;
};

DeviceRuntimeSession::DeviceRuntimeSession() : state_(std::make_unique<State>()) {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  state_->fills = std::make_unique<StreamFills>(state_->stream);
  // Warm-up, so that no measurement pays for the runtime's first allocation, copy or memset.
  void* warm = device_malloc(2 << 20);
  state_->fills->fill(warm, 2 << 20);
  check(cudaMemcpyAsync(warm, static_cast<std::byte*>(warm) + (1 << 20), 1 << 20, cudaMemcpyDeviceToDevice,
                        state_->stream),
        "cudaMemcpyAsync");
  state_->fills->finish();
  check(cudaFree(warm), "cudaFree");
}

DeviceRuntimeSession::~DeviceRuntimeSession() {
  cudaStreamSynchronize(state_->stream);
  cudaStreamDestroy(state_->stream);
}

MemoryOps& DeviceRuntimeSession::memory_ops() { return *state_->fills; }

std::unique_ptr<GrowthStrategy> DeviceRuntimeSession::copy_and_grow(double factor) {
  return std::make_unique<CopyAndGrow>(state_->stream, factor);
}

std::unique_ptr<GrowthStrategy> DeviceRuntimeSession::preallocated(std::size_t capacity) {
  return std::make_unique<Preallocated>(capacity);
}

std::unique_ptr<TraceAllocator> DeviceRuntimeSession::cuda_malloc_async() {
  return std::make_unique<MallocAsyncAllocator>(state_->stream);
}

std::unique_ptr<TraceAllocator> DeviceRuntimeSession::cuda_malloc() { return std::make_unique<MallocAllocator>(); }

void DeviceRuntimeSession::synchronize_device() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

}  // namespace cuvmm::plan
