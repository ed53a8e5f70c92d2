// Bandwidth of compressible vs ordinary device memory, side by side in one run, on data that
// compresses (all zeros; sparse: one non-zero 16-byte word in 16) and on data that does not
// (random). For each memory kind and data kind:
//  - write: a kernel writes the data over the whole buffer (compression happens as lines are
//    written back, so this window includes it);
//  - read: the buffer is written first (outside the window), then a kernel reads every byte.
// Each iteration is timed with CUDA events around one kernel (manual time); the counter "GB/s" is
// bytes / time. The ratio compressible / ordinary of a data kind is computable from the JSON:
// benchmarks are named "<read|write>/<compressible|ordinary>/<zeros|sparse|random>" and carry the
// counters "compressible" (1 or 0) and "GB/s". A device that does not grant compression reports
// the compressible cases as errors (SkipWithError), never as ordinary memory measured twice.
//
// Memory comes from cuvmm's handles on device 0 (one chunk, one mapping): the same path a
// GrowableBuffer with Compression::required takes.
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "bench_support.hpp"

namespace {

using cuvmm::plan::check_cuda;

constexpr std::size_t buffer_bytes = std::size_t{2} << 30;  // 2 GiB: far past the L2 cache
constexpr unsigned block = 256;

enum class Memory { ordinary, compressible };
enum class Data { zeros, sparse, random };

__host__ __device__ std::uint32_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(x ^ (x >> 31));
}

__device__ uint4 word_at(std::size_t i, Data data) {
  switch (data) {
    case Data::zeros: return make_uint4(0, 0, 0, 0);
    case Data::sparse:
      if (i % 16 != 0) return make_uint4(0, 0, 0, 0);
      [[fallthrough]];
    case Data::random: return make_uint4(mix(4 * i), mix(4 * i + 1), mix(4 * i + 2), mix(4 * i + 3));
  }
  return make_uint4(0, 0, 0, 0);
}

__global__ void write_kernel(uint4* out, std::size_t words, Data data) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = word_at(i, data);
}

/// Reads every word; stores a value only if the xor of everything read is a magic number, so the
/// loads cannot be dropped and almost nothing is written.
__global__ void read_kernel(const uint4* in, std::size_t words, unsigned* sink) {
  unsigned folded = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x) {
    uint4 const w = in[i];
    folded ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (folded == 0x9E3779B9u) *sink = folded;
}

unsigned grid_for(std::size_t words) {
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  return static_cast<unsigned>(std::min<std::size_t>((words + block - 1) / block, static_cast<std::size_t>(sms) * 16));
}

/// One chunk of device memory, mapped read-write; compressible on request.
struct DeviceBuffer {
  cuvmm::AddressRange range;
  cuvmm::PhysicalChunk chunk;
  cuvmm::Mapping mapping;
  uint4* words() const { return reinterpret_cast<uint4*>(mapping.address()); }
};

std::unique_ptr<DeviceBuffer> make_buffer(Memory memory) {
  cuvmm::CudaBackend& cuda = cuvmm::cuda_backend(0);
  cuvmm::ChunkProperties const props{.device = 0, .compression = memory == Memory::compressible};
  std::size_t const bytes = cuvmm::round_up(buffer_bytes, cuda.granularity(props, cuvmm::GranularityKind::minimum));
  auto buffer = std::make_unique<DeviceBuffer>();
  buffer->range = cuvmm::AddressRange(cuda, bytes);
  buffer->chunk = cuvmm::PhysicalChunk(cuda, bytes, props);
  cuvmm::AccessGrant const read_write{.device = 0, .access = cuvmm::Access::read_write};
  buffer->mapping = cuvmm::Mapping(buffer->range, 0, buffer->chunk, {&read_write, 1});
  return buffer;
}

/// Events around one kernel launch: its time in seconds.
template <class Launch>
double kernel_seconds(Launch&& launch) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start), "cudaEventRecord");
  launch();
  check_cuda(cudaGetLastError(), "kernel launch");
  check_cuda(cudaEventRecord(stop), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check_cuda(cudaEventDestroy(start), "cudaEventDestroy");
  check_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
  return ms / 1e3;
}

void BM_Bandwidth(benchmark::State& state, bool write, Memory memory, Data data) {
  std::unique_ptr<DeviceBuffer> buffer;
  try {
    buffer = make_buffer(memory);
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
    return;
  }
  if (memory == Memory::compressible && !buffer->chunk.compression_granted()) {
    state.SkipWithError("device 0 did not grant generic compression");
    return;
  }
  std::size_t const words = buffer->chunk.size() / sizeof(uint4);
  unsigned const grid = grid_for(words);
  unsigned* sink = nullptr;
  check_cuda(cudaMalloc(&sink, sizeof *sink), "cudaMalloc");
  // Written once before timing: the read case reads this data; the write case overwrites it.
  write_kernel<<<grid, block>>>(buffer->words(), words, data);
  check_cuda(cudaDeviceSynchronize(), "first fill");
  double timed_seconds = 0;  // the kernels' own time (the rate counter must not use CPU time)
  for (auto _ : state) {
    double const seconds = write ? kernel_seconds([&] { write_kernel<<<grid, block>>>(buffer->words(), words, data); })
                                 : kernel_seconds([&] { read_kernel<<<grid, block>>>(buffer->words(), words, sink); });
    state.SetIterationTime(seconds);
    timed_seconds += seconds;
  }
  check_cuda(cudaFree(sink), "cudaFree");
  double const bytes = static_cast<double>(buffer->chunk.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["GB/s"] = timed_seconds > 0 ? bytes * static_cast<double>(state.iterations()) / timed_seconds / 1e9 : 0;
  state.counters["compressible"] = memory == Memory::compressible ? 1 : 0;
  state.counters["granted"] = buffer->chunk.compression_granted() ? 1 : 0;
}

void register_all() {
  for (bool const write : {false, true}) {
    for (Data const data : {Data::zeros, Data::sparse, Data::random}) {
      for (Memory const memory : {Memory::ordinary, Memory::compressible}) {
        std::string const name = std::string(write ? "write" : "read") + "/" +
                                 (memory == Memory::compressible ? "compressible" : "ordinary") + "/" +
                                 (data == Data::zeros ? "zeros" : data == Data::sparse ? "sparse" : "random");
        benchmark::RegisterBenchmark(name.c_str(), BM_Bandwidth, write, memory, data)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Iterations(20);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
