// Probe: where an Arena trace replay's time goes on the GPU (driver calls by kind vs the rest).
#include <cuvmm/arena.hpp>
#include <cuvmm/counting_backend.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuda_runtime.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include "../tools/cuvmm-plan/trace.hpp"
using clk = std::chrono::steady_clock;
static double us(clk::time_point t) { return std::chrono::duration<double, std::micro>(clk::now() - t).count(); }
struct Timing final : cuvmm::CountingBackend {
  using CountingBackend::CountingBackend;
  std::array<double, 5> t{};  // create release map unmap access
  std::array<std::size_t, 5> bytes{};
  cuvmm::ChunkHandle create_chunk(std::size_t size, const cuvmm::ChunkProperties& p) override { auto s = clk::now(); auto h = CountingBackend::create_chunk(size, p); t[0] += us(s); bytes[0] += size; return h; }
  void release_chunk(cuvmm::ChunkHandle c) noexcept override { auto s = clk::now(); CountingBackend::release_chunk(c); t[1] += us(s); }
  void map(cuvmm::Address a, std::size_t n, cuvmm::ChunkHandle c) override { auto s = clk::now(); CountingBackend::map(a, n, c); t[2] += us(s); bytes[2] += n; }
  void unmap(cuvmm::Address a, std::size_t n) noexcept override { auto s = clk::now(); CountingBackend::unmap(a, n); t[3] += us(s); bytes[3] += n; }
  void set_access(cuvmm::Address a, std::size_t n, std::span<const cuvmm::AccessGrant> g) override { auto s = clk::now(); CountingBackend::set_access(a, n, g); t[4] += us(s); bytes[4] += n; }
};
int main(int argc, char** argv) {
  std::size_t allocs = std::strtoull(argv[1], nullptr, 0), live_gib = std::strtoull(argv[2], nullptr, 0);
  std::size_t large_mib = argc > 3 ? std::strtoull(argv[3], nullptr, 0) : 0;
  auto ops = cuvmm::plan::make_trace(allocs, live_gib << 30, 1234);
  cudaSetDevice(0); cudaFree(nullptr);
  {  // cudaMallocAsync
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMemPool_t pool; cudaDeviceGetDefaultMemPool(&pool, 0); cudaMemPoolTrimTo(pool, 0);
    std::unordered_map<std::size_t, void*> live; double total = 0;
    for (auto& op : ops) {
      if (op.allocate) { void* p; auto t = clk::now(); cudaMallocAsync(&p, op.bytes, s); total += us(t); live[op.id] = p; }
      else { auto t = clk::now(); cudaFreeAsync(live[op.id], s); total += us(t); live.erase(op.id); }
    }
    for (auto& [id, p] : live) cudaFreeAsync(p, s);
    cudaStreamSynchronize(s); cudaMemPoolTrimTo(pool, 0);
    std::printf("cudaMallocAsync replay %.1f ms\n", total / 1e3);
  }
  cuvmm::CudaBackend cuda(0);
  Timing timing(cuda);
  cuvmm::ArenaOptions opt;
  if (large_mib) opt.large_page_bytes = large_mib << 20;
  if (std::getenv("SMALL_TAILS")) opt.share_large_page_tails = false;
  double total = 0, alloc_t = 0, free_t = 0;
  {
    cuvmm::Arena arena(timing, opt);
    std::unordered_map<std::size_t, void*> live; std::unordered_map<std::size_t, std::size_t> sizes;
    for (auto& op : ops) {
      if (op.bytes == 0) continue;
      sizes[op.id] = op.bytes;
      if (op.allocate) { auto t = clk::now(); void* p = arena.allocate(op.bytes); double d = us(t); alloc_t += d; total += d; live[op.id] = p; }
      else { auto t = clk::now(); arena.deallocate(live[op.id], op.bytes); double d = us(t); free_t += d; total += d; live.erase(op.id); }
    }
    auto st = arena.stats();
    double drv = 0; for (double x : timing.t) drv += x;
    std::printf("arena replay %.1f ms (allocate %.1f, deallocate %.1f); driver %.1f ms: create %.1f (%zu, %.0f MiB) release %.1f (%zu) map %.1f (%zu) unmap %.1f (%zu) access %.1f (%zu, %.0f MiB); other %.1f ms; moved %zu util-peak %.3f\n",
                total / 1e3, alloc_t / 1e3, free_t / 1e3, drv / 1e3, timing.t[0] / 1e3, timing.calls(cuvmm::BackendOp::create_chunk), timing.bytes[0] / 1048576.0,
                timing.t[1] / 1e3, timing.calls(cuvmm::BackendOp::release_chunk), timing.t[2] / 1e3, timing.calls(cuvmm::BackendOp::map),
                timing.t[3] / 1e3, timing.calls(cuvmm::BackendOp::unmap), timing.t[4] / 1e3, timing.calls(cuvmm::BackendOp::set_access), timing.bytes[4] / 1048576.0,
                (total - drv) / 1e3, st.pages_moved, double(st.bytes_requested.peak) / double(st.bytes_physical.peak));
    for (auto& [id, p] : live) arena.deallocate(p, sizes[id]);
  }
}
