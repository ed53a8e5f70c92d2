// Probe: where the time of growing a GrowableStorage goes (host steps vs GPU idle vs fill speed).
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
using clk = std::chrono::steady_clock;
static double since(clk::time_point t) { return std::chrono::duration<double, std::micro>(clk::now() - t).count(); }
int main(int argc, char** argv) {
  std::string mode = argv[1];
  size_t target = std::strtoull(argv[2], nullptr, 0) << 20, app = std::strtoull(argv[3], nullptr, 0) << 20;
  size_t n = target / app;
  cudaSetDevice(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* warm; cudaMalloc(&warm, 2 << 20); cudaMemsetAsync(warm, 1, 2 << 20, s); cudaStreamSynchronize(s); cudaFree(warm);
  std::vector<cudaEvent_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) { cudaEventCreate(&a[i]); cudaEventCreate(&b[i]); }
  cuvmm::CudaBackend backend(0);
  cuvmm::GrowableOptions opt;
  if (const char* h = std::getenv("HIDE_MIB")) opt.hide_bytes = std::strtoull(h, nullptr, 0) << 20;
  cuvmm::GrowableStorage st(backend, opt);
  std::byte* pre = nullptr;
  if (mode == "prealloc") cudaMalloc(&pre, target);
  if (mode == "reserved") st.reserve(target);
  std::vector<double> host(n), step(n);
  size_t size = 0; int steps = 0;
  auto t0 = clk::now();
  for (size_t i = 0; i < n; ++i) {
    auto t = clk::now();
    std::byte* p;
    if (mode == "prealloc") p = pre + size;
    else {
      size_t want = size + app;
      if (st.capacity() < want) {
        ++steps;
        if (mode == "first2x" && st.capacity() == 0) want = 2 * want;
        if (mode == "twot" && st.capacity() < opt.hide_bytes + 1 && st.capacity() != 0) want = std::max(2 * want, 2 * st.capacity());
        if (mode == "twot" && st.capacity() == 0) want = 2 * want;
      }
      auto ts = clk::now();
      st.reserve(want);
      step[i] = since(ts);
      p = reinterpret_cast<std::byte*>(st.data()) + size;
    }
    cudaEventRecord(a[i], s);
    cudaMemsetAsync(p, 0x5A, app, s);
    cudaEventRecord(b[i], s);
    size += app;
    host[i] = since(t);
  }
  cudaStreamSynchronize(s);
  double total = since(t0);
  double idle = 0, fill = 0, first_gap;
  cudaEventElapsedTime(reinterpret_cast<float*>(&first_gap), a[0], a[0]);
  for (size_t i = 0; i < n; ++i) {
    float f; cudaEventElapsedTime(&f, a[i], b[i]); fill += f * 1e3;
    if (i) { float g; cudaEventElapsedTime(&g, b[i - 1], a[i]); idle += g * 1e3; }
  }
  double steps_us = 0; for (double x : step) steps_us += x;
  std::printf("%-9s %6zu MiB/%zu MiB total %8.1f us  gpu fill %8.1f  gpu idle between %7.1f  host steps %7.1f (%d steps, stats %zu chunks)  capacity %zu MiB\n",
              mode.c_str(), target >> 20, app >> 20, total, fill, idle, steps_us, steps, st.stats().chunks_created, st.capacity() >> 20);
  if (std::getenv("DETAIL")) for (size_t i = 0; i < n; ++i) { float g = 0, f; if (i) cudaEventElapsedTime(&g, b[i-1], a[i]); cudaEventElapsedTime(&f, a[i], b[i]); if (step[i] > 0.5 || g > 2) std::printf("  append %zu: step %.1f us host %.1f, gpu idle before %.1f, fill %.1f\n", i, step[i], host[i], g*1e3, f*1e3); }
  if (pre) cudaFree(pre);
}
