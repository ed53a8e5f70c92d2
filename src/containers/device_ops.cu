// Data movement for device-memory containers: copies and pattern fills ordered on a stream.
//
// Lives in the library (built by nvcc for sm_90 plus PTX) so that the container headers carry no
// device code and compile with any C++20 compiler. These are runtime-API calls on memory the
// containers own; the VMM driver calls stay in src/driver/.
//  - copy: cudaMemcpyAsync with cudaMemcpyDefault (unified addressing tells host from device).
//  - fill: cudaMemsetAsync when every byte of the pattern is the same; otherwise a grid-stride
//    kernel with the widest stores the pattern and alignment allow; patterns over 256 bytes are
//    written once and then doubled with device-to-device copies.
#include <cuvmm/detail/memory_spaces.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <cuvmm/error.hpp>

#include "errors/runtime_check.hpp"

namespace cuvmm::detail {
namespace {

constexpr std::size_t max_kernel_pattern = 256;
constexpr unsigned fill_block = 256;
constexpr std::size_t max_fill_blocks = 8192;

struct alignas(16) Pattern {
  unsigned char bytes[max_kernel_pattern];
};

template <class Word>
__global__ void fill_words(Word* dst, std::size_t words, Pattern pattern, unsigned words_per_pattern) {
  const Word* source = reinterpret_cast<const Word*>(pattern.bytes);
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    dst[i] = source[i % words_per_pattern];
  }
}

template <class Word>
void launch_fill(void* dst, std::size_t bytes, const Pattern& pattern, std::size_t pattern_bytes, Stream stream) {
  std::size_t const words = bytes / sizeof(Word);
  if (words == 0) return;
  std::size_t const blocks = std::min<std::size_t>((words + fill_block - 1) / fill_block, max_fill_blocks);
  fill_words<Word><<<static_cast<unsigned>(blocks), fill_block, 0, stream>>>(
      static_cast<Word*>(dst), words, pattern, static_cast<unsigned>(pattern_bytes / sizeof(Word)));
  check_runtime(cudaGetLastError(), "fill kernel launch", std::to_string(bytes) + " bytes");
}

/// Widest power-of-two word (<= 16 bytes) dividing both the pattern size and the address.
std::size_t word_size(std::size_t pattern_bytes, const void* dst) {
  auto const address = reinterpret_cast<std::uintptr_t>(dst);
  std::size_t w = 16;
  while (w > 1 && (pattern_bytes % w != 0 || address % w != 0)) w /= 2;
  return w;
}

void fill_with_kernel(void* dst, std::size_t bytes, const Pattern& pattern, std::size_t pattern_bytes,
                      Stream stream) {
  switch (word_size(pattern_bytes, dst)) {
    case 16: return launch_fill<uint4>(dst, bytes, pattern, pattern_bytes, stream);
    case 8: return launch_fill<unsigned long long>(dst, bytes, pattern, pattern_bytes, stream);
    case 4: return launch_fill<unsigned>(dst, bytes, pattern, pattern_bytes, stream);
    case 2: return launch_fill<unsigned short>(dst, bytes, pattern, pattern_bytes, stream);
    default: return launch_fill<unsigned char>(dst, bytes, pattern, pattern_bytes, stream);
  }
}

}  // namespace

void device_copy(void* dst, const void* src, std::size_t bytes, Stream stream) {
  if (bytes == 0) return;
  check_runtime(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync",
        std::to_string(bytes) + " bytes");
}

void device_fill(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count, Stream stream) {
  if (count == 0 || pattern_bytes == 0) return;
  auto const* p = static_cast<const unsigned char*>(pattern);
  std::size_t const bytes = pattern_bytes * count;
  if (std::all_of(p, p + pattern_bytes, [&](unsigned char b) { return b == p[0]; })) {
    check_runtime(cudaMemsetAsync(dst, p[0], bytes, stream), "cudaMemsetAsync", std::to_string(bytes) + " bytes");
    return;
  }
  if (pattern_bytes > max_kernel_pattern) {
    // Write one element, then double the written prefix until all `count` are there.
    device_copy(dst, pattern, pattern_bytes, stream);
    auto* out = static_cast<unsigned char*>(dst);
    for (std::size_t done = 1; done < count;) {
      std::size_t const n = std::min(done, count - done);
      device_copy(out + done * pattern_bytes, out, n * pattern_bytes, stream);
      done += n;
    }
    return;
  }
  Pattern replicated{};
  std::size_t unit = pattern_bytes;
  std::memcpy(replicated.bytes, p, pattern_bytes);
  if (16 % pattern_bytes == 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 == 0) {
    // Patterns of 1, 2, 4 or 8 bytes repeat within 16 bytes: fill 16-byte words, then the tail.
    for (std::size_t i = pattern_bytes; i < 16; ++i) replicated.bytes[i] = p[i % pattern_bytes];
    unit = 16;
  }
  std::size_t const body = bytes / unit * unit;
  fill_with_kernel(dst, body, replicated, unit, stream);
  if (body < bytes) {  // the tail starts on a whole pattern: plain bytes of the original
    fill_with_kernel(static_cast<unsigned char*>(dst) + body, bytes - body, replicated, pattern_bytes, stream);
  }
}

void device_wait(Stream stream) { check_runtime(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

void device_wait_no_throw(Stream stream) noexcept {
  if (cudaStreamSynchronize(stream) != cudaSuccess) (void)cudaGetLastError();  // clear a sticky-free error
}

}  // namespace cuvmm::detail
