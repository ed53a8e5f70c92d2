// device_runtime.cu: the CUDA runtime baselines of cuvmm-plan and bench_growth (see
// device_runtime.hpp). These are the strategies cuvmm is compared with, written plainly as users
// write them; cuvmm's own memory never goes through here. A .cu file for thrust::device_vector.
#include "device_runtime.hpp"

#include "cuda_check.hpp"

#include <cuda_runtime_api.h>
#include <thrust/device_allocator.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace cuvmm::plan {
namespace {


/// cudaMalloc that reports exhaustion as std::bad_alloc (and clears the sticky-free error state).
void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  cudaError_t const status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  check_cuda(status, "cudaMalloc");
  return p;
}

/// cudaMallocAsync on `stream`, with exhaustion as std::bad_alloc.
void* device_malloc_async(std::size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  cudaError_t const status = cudaMallocAsync(&p, bytes, stream);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw std::bad_alloc();
  }
  check_cuda(status, "cudaMallocAsync");
  return p;
}

/// Gives the device's default cudaMallocAsync pool's unused memory back to the device.
void trim_default_pool() {
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
}

std::size_t device_memory_in_use() {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return total - free;
}

class StreamFills final : public MemoryOps {
 public:
  explicit StreamFills(cudaStream_t stream) : stream_(stream) {}
  void fill(void* data, std::size_t bytes) override { check_cuda(cudaMemsetAsync(data, 0x5A, bytes, stream_), "cudaMemsetAsync"); }
  void finish() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  std::optional<std::size_t> memory_in_use() override { return device_memory_in_use(); }

 private:
  cudaStream_t stream_;
};

/// Copy-and-grow: when full, allocate `factor` times the capacity, copy, free the old buffer.
/// With cudaMalloc the old buffer is freed after a host wait for the copy (cudaFree does not order
/// against the stream); with cudaMallocAsync everything is ordered on the stream, with no host wait.
class CopyAndGrow final : public GrowthStrategy {
 public:
  CopyAndGrow(cudaStream_t stream, double factor, DeviceAllocation allocation)
      : stream_(stream), factor_(factor), allocation_(allocation) {}
  CopyAndGrow(const CopyAndGrow&) = delete;
  CopyAndGrow& operator=(const CopyAndGrow&) = delete;
  ~CopyAndGrow() override {
    if (allocation_ == DeviceAllocation::malloc_async) {
      if (data_ != nullptr) cudaFreeAsync(data_, stream_);
      cudaStreamSynchronize(stream_);
      trim_default_pool();
    } else {
      cudaStreamSynchronize(stream_);
      cudaFree(data_);
    }
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
    bool const async = allocation_ == DeviceAllocation::malloc_async;
    auto* const fresh = static_cast<std::byte*>(async ? device_malloc_async(new_capacity, stream_)
                                                      : device_malloc(new_capacity));
    peak_ = std::max(peak_, capacity_ + new_capacity);  // old and new held while copying
    if (copy_hook_) copy_hook_();
    if (size_ != 0) check_cuda(cudaMemcpyAsync(fresh, data_, size_, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
    if (async) {
      if (data_ != nullptr) check_cuda(cudaFreeAsync(data_, stream_), "cudaFreeAsync");  // ordered after the copy
    } else {
      check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // the copy is done before the old buffer goes
      check_cuda(cudaFree(data_), "cudaFree");
    }
    data_ = fresh;
    capacity_ = new_capacity;
    copied_ += size_;
    ++allocations_;
    growth_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  cudaStream_t stream_;
  double factor_;
  DeviceAllocation allocation_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::size_t peak_ = 0;
  std::size_t copied_ = 0;
  std::size_t allocations_ = 0;
  double growth_seconds_ = 0;
  std::function<void()> copy_hook_;
};

/// What a thrust::device_vector allocated, kept by its allocator (copies of which share one).
struct AllocationBooks {
  std::size_t held = 0;
  std::size_t peak = 0;
  std::size_t allocations = 0;
  std::function<void()> hook;  ///< called after each allocation, while the old storage is still held
};

/// cudaMalloc/cudaFree for thrust::device_vector, counted in AllocationBooks; exhaustion is
/// std::bad_alloc, as for the other strategies.
template <class T>
class CountingAllocator : public thrust::device_allocator<T> {
 public:
  using base = thrust::device_allocator<T>;
  template <class U>
  struct rebind {
    using other = CountingAllocator<U>;
  };
  explicit CountingAllocator(AllocationBooks* books = nullptr) : books_(books) {}
  template <class U>
  CountingAllocator(const CountingAllocator<U>& other) : books_(other.books()) {}
  typename base::pointer allocate(std::size_t n) {
    auto* const p = static_cast<T*>(device_malloc(n * sizeof(T)));
    if (books_ != nullptr) {
      books_->held += n * sizeof(T);
      books_->peak = std::max(books_->peak, books_->held);
      ++books_->allocations;
      if (books_->hook) books_->hook();
    }
    return typename base::pointer(p);
  }
  void deallocate(typename base::pointer p, std::size_t n) {
    check_cuda(cudaFree(thrust::raw_pointer_cast(p)), "cudaFree");
    if (books_ != nullptr) books_->held -= n * sizeof(T);
  }
  [[nodiscard]] AllocationBooks* books() const { return books_; }

 private:
  AllocationBooks* books_;
};

/// thrust::device_vector<uint8_t>::resize, as users grow one: its own growth (at least doubling),
/// copies, and value-initialization of the new elements, all synchronous on the default stream.
class ThrustVector final : public GrowthStrategy {
 public:
  explicit ThrustVector(cudaStream_t stream) : stream_(stream), vector_(CountingAllocator<std::uint8_t>(&books_)) {}
  void* append(std::size_t bytes) override {
    std::size_t const old = vector_.size();
    if (old + bytes > vector_.capacity()) {
      // Thrust copies on its own stream: the fills queued on ours must be done first.
      check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      auto const start = std::chrono::steady_clock::now();
      vector_.resize(old + bytes);
      growth_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      copied_ += old;
    } else {
      vector_.resize(old + bytes);
    }
    return thrust::raw_pointer_cast(vector_.data()) + old;
  }
  std::size_t peak_bytes() const override { return books_.peak; }
  std::size_t bytes_copied() const override { return copied_; }
  std::size_t chunks() const override { return books_.allocations; }
  double growth_seconds() const override { return growth_seconds_; }
  void set_copy_hook(std::function<void()> hook) override { books_.hook = std::move(hook); }

 private:
  cudaStream_t stream_;
  AllocationBooks books_;  // before vector_: the vector's allocator points here until it is gone
  thrust::device_vector<std::uint8_t, CountingAllocator<std::uint8_t>> vector_;
  std::size_t copied_ = 0;
  double growth_seconds_ = 0;
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
    check_cuda(cudaDeviceGetDefaultMemPool(&pool_, 0), "cudaDeviceGetDefaultMemPool");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check_cuda(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
    std::uint64_t zero = 0;
    check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero), "cudaMemPoolSetAttribute");
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
    check_cuda(status, "cudaMallocAsync");
    return p;
  }
  void deallocate(void* p, std::size_t) override { check_cuda(cudaFreeAsync(p, stream_), "cudaFreeAsync"); }
  std::size_t held_bytes() override { return attribute(cudaMemPoolAttrReservedMemCurrent); }
  std::optional<std::size_t> exact_peak_held_bytes() override { return attribute(cudaMemPoolAttrReservedMemHigh); }
  void finish() override { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  std::size_t attribute(cudaMemPoolAttr which) const {
    std::uint64_t value = 0;
    check_cuda(cudaMemPoolGetAttribute(pool_, which, &value), "cudaMemPoolGetAttribute");
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
  void deallocate(void* p, std::size_t) override { check_cuda(cudaFree(p), "cudaFree"); }
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
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  state_->fills = std::make_unique<StreamFills>(state_->stream);
  // Warm-up, so that no measurement pays for the runtime's first allocation, copy or memset.
  void* warm = device_malloc(2 << 20);
  state_->fills->fill(warm, 2 << 20);
  check_cuda(cudaMemcpyAsync(warm, static_cast<std::byte*>(warm) + (1 << 20), 1 << 20, cudaMemcpyDeviceToDevice,
                        state_->stream),
        "cudaMemcpyAsync");
  state_->fills->finish();
  check_cuda(cudaFree(warm), "cudaFree");
}

DeviceRuntimeSession::~DeviceRuntimeSession() {
  cudaStreamSynchronize(state_->stream);
  cudaStreamDestroy(state_->stream);
}

MemoryOps& DeviceRuntimeSession::memory_ops() { return *state_->fills; }

Stream DeviceRuntimeSession::stream() const { return state_->stream; }

std::unique_ptr<GrowthStrategy> DeviceRuntimeSession::copy_and_grow(double factor, DeviceAllocation allocation) {
  return std::make_unique<CopyAndGrow>(state_->stream, factor, allocation);
}

std::unique_ptr<GrowthStrategy> DeviceRuntimeSession::thrust_vector() {
  return std::make_unique<ThrustVector>(state_->stream);
}

std::unique_ptr<GrowthStrategy> DeviceRuntimeSession::preallocated(std::size_t capacity) {
  return std::make_unique<Preallocated>(capacity);
}

std::unique_ptr<TraceAllocator> DeviceRuntimeSession::cuda_malloc_async() {
  return std::make_unique<MallocAsyncAllocator>(state_->stream);
}

std::unique_ptr<TraceAllocator> DeviceRuntimeSession::cuda_malloc() { return std::make_unique<MallocAllocator>(); }

void DeviceRuntimeSession::synchronize_device() { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }


int cuda_runtime_version() {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess) return 0;
  return version;
}

std::vector<std::string> growth_strategy_names(bool device) {
  std::vector<std::string> names{growable_policy_name, growable_fixed_name};
  if (device) {
    names.insert(names.end(), {copy_grow_2x_name, copy_grow_1_5x_name, async_copy_grow_2x_name, thrust_vector_name,
                               preallocated_name});
  }
  return names;
}

std::unique_ptr<GrowthStrategy> make_growth_strategy(std::string_view name, Backend& backend,
                                                     DeviceRuntimeSession* device, std::size_t target_bytes) {
  if (name == growable_policy_name) return make_growable_strategy(backend);
  if (name.starts_with(growable_hide_prefix)) {  // an experiment: the real policy with another hide size
    std::string_view const digits = name.substr(std::string_view(growable_hide_prefix).size());
    std::size_t mib = 0;
    auto const [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), mib);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size() || mib == 0 ||
        mib > SIZE_MAX / MiB) {
      throw std::invalid_argument("growth strategy '" + std::string(name) + "': wants " + growable_hide_prefix +
                                  "MIB, a positive whole number of MiB");
    }
    GrowableOptions options;
    options.hide_bytes = mib * MiB;
    return make_growable_strategy(backend, options);
  }
  if (name == growable_fixed_name) {
    GrowableOptions fixed;
    fixed.max_chunk_bytes = backend.granularity({}, GranularityKind::minimum);  // every chunk one granule
    return make_growable_strategy(backend, fixed);
  }
  if (device != nullptr) {
    if (name == copy_grow_2x_name) return device->copy_and_grow(2.0);
    if (name == copy_grow_1_5x_name) return device->copy_and_grow(1.5);
    if (name == async_copy_grow_2x_name) return device->copy_and_grow(2.0, DeviceAllocation::malloc_async);
    if (name == thrust_vector_name) return device->thrust_vector();
    if (name == preallocated_name) return device->preallocated(target_bytes);
  }
  throw std::invalid_argument("no growth strategy '" + std::string(name) + "'" +
                              (device == nullptr ? " without a GPU" : ""));
}

}  // namespace cuvmm::plan
