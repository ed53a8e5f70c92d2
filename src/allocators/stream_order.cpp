// Stream ordering for the Arena: CUDA events on the device, nothing on the host (see the header).
#include "allocators/stream_order.hpp"

#include <cuda_runtime_api.h>

#include <cuvmm/source_location.hpp>

#include "errors/runtime_check.hpp"

namespace cuvmm::detail {
namespace {

void check(cudaError_t status, const char* call, cuvmm::source_location where = cuvmm::source_location::current()) {
  check_runtime(status, call, "ordering arena memory between streams", where);
}

/// Makes `device` current for the scope and restores the caller's device after.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~CurrentDevice() { (void)cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

/// Lets the calling thread wait for or query an event recorded outside any capture while a stream
/// captures a CUDA graph: in the global and thread-local capture modes (PyTorch's default is
/// global) such calls are refused, and the capture invalidated, unless the thread's mode is relaxed
/// for them. Restores the thread's mode after.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { check(cudaThreadExchangeStreamCaptureMode(&previous_), "cudaThreadExchangeStreamCaptureMode"); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

class DeviceStreamOrder final : public StreamOrder {
 public:
  explicit DeviceStreamOrder(int device) : device_(device) {}
  Marker create_marker() override {
    CurrentDevice const on(device_);
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return event;
  }
  void destroy_marker(Marker marker) noexcept override {
    if (marker != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(marker));
  }
  void mark(Marker marker, Stream stream) override {
    check(cudaEventRecord(static_cast<cudaEvent_t>(marker), stream), "cudaEventRecord");
  }
  void order_after(Stream waiter, Marker marker) override {
    check(cudaStreamWaitEvent(waiter, static_cast<cudaEvent_t>(marker), 0), "cudaStreamWaitEvent");
  }
  void wait(Marker marker) override {
    RelaxedCaptureMode const relaxed;
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(marker)), "cudaEventSynchronize");
  }
  bool done(Marker marker) override {
    cudaError_t status = cudaSuccess;
    {
      RelaxedCaptureMode const relaxed;
      status = cudaEventQuery(static_cast<cudaEvent_t>(marker));
    }
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: the query's own status, not the caller's
      return false;
    }
    check(status, "cudaEventQuery");
    return true;
  }
  bool can_mark(Stream stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
      (void)cudaGetLastError();  // the query's own error, not the caller's
      return false;
    }
    return status == cudaStreamCaptureStatusNone;
  }

 private:
  int device_;
};

class HostStreamOrder final : public StreamOrder {
 public:
  Marker create_marker() override { return nullptr; }
  void destroy_marker(Marker) noexcept override {}
  void mark(Marker, Stream) override {}
  void order_after(Stream, Marker) override {}
  void wait(Marker) override {}
  bool done(Marker) override { return true; }
  bool can_mark(Stream) override { return true; }
};

}  // namespace

std::unique_ptr<StreamOrder> make_stream_order(MemorySpace space, int device) {
  if (space == MemorySpace::device) return std::make_unique<DeviceStreamOrder>(device);
  return std::make_unique<HostStreamOrder>();
}

}  // namespace cuvmm::detail
