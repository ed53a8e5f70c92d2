// What registrations that follow growth cost: per chunk size, the median host time of
//   - one growth step of a device buffer that maps one chunk, with no observer, with an
//     NcclObserver (one-rank communicator) and with a DmabufObserver attached;
//   - the registration calls alone: ncclCommRegister + ncclCommDeregister, and a dmabuf export
//     (cuMemGetHandleForAddressRange) + close, on a chunk mapped already.
// A plain program (no Google Benchmark) printing one table; docs/nccl-rdma.md shows its output for
// a GPU. Exits 77 without a CUDA device. Columns of a capability the device or build lacks read "-".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/dmabuf.hpp>
#include <cuvmm/growable_buffer.hpp>

#if defined(CUVMM_BENCH_NCCL)
#include <nccl.h>

#include <cuvmm/nccl_observer.hpp>
#endif

using namespace cuvmm;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int repetitions = 15;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double microseconds(F&& f) {
  auto const start = Clock::now();
  f();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

/// Median time of the one growth step that maps a chunk of `bytes`, with `observer` attached (or none).
double growth_step(CudaBackend& cuda, std::size_t bytes, const std::shared_ptr<GrowthObserver>& observer) {
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    GrowableOptions o;
    o.max_capacity_bytes = 2 * bytes;
    o.max_chunk_bytes = bytes;
    o.hide_bytes = bytes;
    o.map_ahead = MapAhead::off;
    GrowableBuffer<std::byte> buffer(cuda, o);
    if (observer) buffer.add_observer(observer);
    times.push_back(microseconds([&] { buffer.reserve(bytes); }));
  }
  return median(times);
}

void print_cell(std::optional<double> v) {
  if (v) {
    std::printf(" %12.1f", *v);
  } else {
    std::printf(" %12s", "-");
  }
}

}  // namespace

int main() {
  if (!driver_status().available || device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  CudaBackend& cuda = cuda_backend(0);
  DeviceCaps const caps = device_caps(0);
  std::printf("device 0: %s, dmabuf %s\n", caps.name.c_str(), caps.dma_buf ? "yes" : "no");
#if defined(CUVMM_BENCH_NCCL)
  ncclComm_t comm = nullptr;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    std::printf("ncclCommInitRank failed\n");
    return 1;
  }
  std::printf("NCCL %d.%d.%d, one rank\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
  std::printf("built without NCCL: the NCCL columns read -\n");
#endif
  std::printf("median host microseconds of %d repetitions\n", repetitions);
  std::printf("%10s %12s %12s %12s %12s %12s\n", "chunk MiB", "step", "step+nccl", "step+dmabuf", "nccl reg", "dmabuf exp");
  for (std::size_t mib : {2, 64, 512, 2048}) {
    std::size_t const bytes = mib * MiB;
    std::optional<double> nccl_step, dmabuf_step, nccl_reg, dmabuf_exp;
    double const plain = growth_step(cuda, bytes, nullptr);
#if defined(CUVMM_BENCH_NCCL)
    nccl_step = growth_step(cuda, bytes, std::make_shared<NcclObserver>(comm));
#endif
    if (caps.dma_buf) dmabuf_step = growth_step(cuda, bytes, std::make_shared<DmabufObserver>());
    {
      GrowableOptions o;
      o.max_capacity_bytes = bytes;
      o.max_chunk_bytes = bytes;
      o.map_ahead = MapAhead::off;
      GrowableBuffer<std::byte> buffer(cuda, o);
      buffer.reserve(bytes);
      std::vector<double> reg, exp;
      for (int r = 0; r < repetitions; ++r) {
#if defined(CUVMM_BENCH_NCCL)
        reg.push_back(microseconds([&] {
          void* handle = nullptr;
          if (ncclCommRegister(comm, buffer.data(), bytes, &handle) == ncclSuccess) (void)ncclCommDeregister(comm, handle);
        }));
#endif
        if (caps.dma_buf) {
          exp.push_back(microseconds([&] { UniqueFd const fd = export_dmabuf(buffer.storage().data(), bytes, 0); }));
        }
      }
      if (!reg.empty()) nccl_reg = median(reg);
      if (!exp.empty()) dmabuf_exp = median(exp);
    }
    std::printf("%10zu %12.1f", mib, plain);
    print_cell(nccl_step);
    print_cell(dmabuf_step);
    print_cell(nccl_reg);
    print_cell(dmabuf_exp);
    std::printf("\n");
  }
#if defined(CUVMM_BENCH_NCCL)
  (void)ncclCommDestroy(comm);
#endif
  return 0;
}
