// Helpers of the gpu suite: the runtime set up once, streams, pattern checks of every element, and
// leak checks on the real observables (the backend's live objects and the device's free memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include <catch2/catch_test_macros.hpp>
#include <catch2/catch_tostring.hpp>

#include <cuvmm/backend.hpp>

template <>
struct Catch::StringMaker<cuvmm::LiveCounts> {
  static std::string convert(const cuvmm::LiveCounts& c) {
    return "{ranges " + std::to_string(c.ranges) + ", chunks " + std::to_string(c.chunks) + ", mappings " +
           std::to_string(c.mappings) + ", bytes reserved " + std::to_string(c.bytes_reserved) +
           ", physical " + std::to_string(c.bytes_physical) + ", mapped " + std::to_string(c.bytes_mapped) + "}";
  }
};

/// REQUIREs that a CUDA runtime call succeeded, naming the call and its error.
#define CUVMM_CUDA_REQUIRE(expression)                                                              \
  do {                                                                                              \
    cudaError_t const cuvmm_cuda_result_ = (expression);                                            \
    INFO(#expression << " returned " << cudaGetErrorName(cuvmm_cuda_result_) << ": "                \
                     << cudaGetErrorString(cuvmm_cuda_result_));                                    \
    REQUIRE(cuvmm_cuda_result_ == cudaSuccess);                                                     \
  } while (false)

namespace cuvmm::test {

/// Makes device 0 current in the runtime, creates its context, allocates the checkers' counters
/// and loads every test kernel, once per process, so that free-memory readings taken afterwards
/// move only with what a test does.
void init_runtime();

/// A non-blocking CUDA stream, destroyed with its owner.
class Stream {
 public:
  Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

template <class T>
T* device_pointer(Address address) noexcept {
  return reinterpret_cast<T*>(address);
}

/// A seed for one use in a test: Catch2's run seed (printed at start, set with --rng-seed) mixed
/// with `salt`, so every run checks other random data and a failing run can be repeated.
std::uint64_t test_seed(std::uint64_t salt);

/// What a check of every element against the pattern found (on the device, after the stream's work).
struct PatternCheck {
  unsigned long long mismatches = 0;
  unsigned long long first_mismatch = 0;  ///< ULLONG_MAX when there is none
};
PatternCheck check_pattern(const std::uint32_t* data, std::size_t count, std::uint64_t seed, cudaStream_t stream);

/// Copies `count` elements to the host (synchronously) and counts those that differ from the pattern.
std::size_t host_mismatches(const std::uint32_t* data, std::size_t count, std::uint64_t seed);

/// Elements among the first `count` whose pattern value happens to equal `value`: how many of a
/// buffer poisoned with `value` already match, so the poisoned check's expectation is exact.
std::size_t pattern_hits(std::uint64_t seed, std::size_t count, std::uint32_t value);

/// The poison written before data is checked: never only zeros.
inline constexpr std::uint32_t poison = 0xA5C3E10Fu;

/// Records the real observables now; verify() checks they came back.
///
/// The observable that decides: the backend's live objects (exactly what cuvmm holds: ranges,
/// chunks, mappings and their bytes), which no other process can move. The device's free memory
/// (which would also show a chunk the backend forgot in its books) is compared only where the
/// GPU is this process's alone, said by CUVMM_TEST_GPU_ALONE=1: on a shared GPU another process's
/// allocations move it. Free memory also moves with what the CUDA runtime takes for itself and keeps: since CUDA
/// 12.2 modules are loaded lazily, at the first launch of one of their kernels (CUDA_MODULE_LOADING
/// unset or LAZY), and that memory is never given back. So a baseline is valid only after every
/// kernel the measured code launches has run once. init_runtime() runs the kernels of kernels.cu;
/// code that launches any other kernel (its own, Thrust's, CUB's: they pick kernels by input size)
/// is measured with leak_checked(), which runs it once before the baseline.
class LeakCheck {
 public:
  explicit LeakCheck(const Backend& backend, int device = 0);
  /// The backend's live objects equal the baseline; with CUVMM_TEST_GPU_ALONE=1, the device's
  /// free memory is within one granularity of it too.
  void verify() const;

 private:
  const Backend* backend_;
  int device_;
  LiveCounts counts_;
  std::size_t free_bytes_;
  std::size_t granularity_;
};

/// Runs `body()` twice: once to warm up (it loads every module its kernels live in and sizes what
/// the runtime keeps, at the very sizes it uses), then under a LeakCheck on `backend`. Valid with
/// lazy or eager module loading alike. `body` must be repeatable: it makes and releases its own
/// objects and streams.
template <class Body>
void leak_checked(const Backend& backend, Body&& body, int device = 0) {
  body();
  LeakCheck const leaks(backend, device);
  body();
  leaks.verify();
}

}  // namespace cuvmm::test
