// NCCL registrations that follow growth, on one GPU with a communicator of one rank: all-reduces on
// buffers that grow between them (device default: mapping ahead on), one ncclCommRegister per chunk
// matched to the chunks after every growth, deregistration of exactly the released chunks before
// a shrink unmaps them, and NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,REG) reported.
// Built only where NCCL was found (-Dnccl); skips without a GPU.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cuvmm/arena.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/nccl_observer.hpp>

#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using namespace cuvmm;

#define CUVMM_NCCL_REQUIRE(call)                                        \
  do {                                                                  \
    ncclResult_t const cuvmm_nccl_result_ = (call);                     \
    INFO(#call << ": " << ncclGetErrorString(cuvmm_nccl_result_));      \
    REQUIRE(cuvmm_nccl_result_ == ncclSuccess);                         \
  } while (false)

namespace {

/// NCCL's log of this process, set before NCCL's first call reads the environment.
std::filesystem::path nccl_log_path() {
  static std::filesystem::path const path = [] {
    std::filesystem::path const p =
        std::filesystem::temp_directory_path() / ("cuvmm_nccl_" + std::to_string(::getpid()) + ".log");
    ::setenv("NCCL_DEBUG", "INFO", 0);
    ::setenv("NCCL_DEBUG_SUBSYS", "INIT,REG", 0);
    ::setenv("NCCL_DEBUG_FILE", p.c_str(), 0);
    return p;
  }();
  return path;
}

/// A communicator of one rank on device 0.
class OneRank {
 public:
  OneRank() {
    (void)nccl_log_path();
    ncclUniqueId id;
    CUVMM_NCCL_REQUIRE(ncclGetUniqueId(&id));
    CUVMM_NCCL_REQUIRE(ncclCommInitRank(&comm_, 1, id, 0));
  }
  OneRank(const OneRank&) = delete;
  OneRank& operator=(const OneRank&) = delete;
  ~OneRank() { (void)ncclCommDestroy(comm_); }
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

GrowableOptions for_nccl() {
  DeviceCaps const caps = device_caps(0);
  GrowableOptions o;
  o.max_capacity_bytes = 16 * GiB;
  o.hide_bytes = 64 * MiB;
  if (caps.posix_fd_handles) o.shareable = HandleType::posix_fd;
  o.gpu_direct_rdma = caps.gpu_direct_rdma_with_vmm;
  o.granularity = GranularityKind::recommended;
  return o;  // map_ahead automatic: on for device memory
}

/// Every chunk of `buffers` is registered once, and nothing else is.
template <class... Buffers>
bool registrations_match(const NcclObserver& observer, const Buffers&... buffers) {
  std::vector<NcclObserver::Registration> const held = observer.registrations();
  std::size_t chunks = 0;
  bool all = true;
  auto check = [&](const GrowableStorage& s) {
    chunks += s.chunk_count();
    for (std::size_t i = 0; i < s.chunk_count(); ++i) {
      BackedRange const r = s.backed_range(i);
      std::size_t found = 0;
      for (const auto& h : held) found += h.range == r ? 1 : 0;
      all = all && found == 1;
    }
  };
  (check(buffers.storage()), ...);
  return all && held.size() == chunks;
}

}  // namespace

TEST_CASE("all-reduces on buffers that grow between them find every chunk registered, and shrinking deregisters first",
          "[gpu][nccl]") {
  test::require_gpu();
  test::init_runtime();
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    OneRank const comm;
    test::Stream const stream;
    auto observer = std::make_shared<NcclObserver>(comm.get());
    // Mapping ahead off: a step prepared on the mapping thread is created whenever that thread gets
    // to it, so the chunk counts below would race with it (unit_growth_observers covers prepared
    // steps exactly on the host backend).
    GrowableOptions options = for_nccl();
    options.map_ahead = MapAhead::off;
    GrowableBuffer<float> send(cuda, options, stream.get());
    GrowableBuffer<float> recv(cuda, options, stream.get());
    send.add_observer(observer);
    recv.add_observer(observer);

    std::size_t chunks_seen = 0;
    for (std::size_t mib : {1, 8, 40, 200, 600}) {
      CAPTURE(mib);
      std::size_t const n = mib * MiB / sizeof(float);
      std::size_t const old = send.size();
      std::vector<float> values(n - old);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((old + i) % 4093) - 2046.0f;
      send.append(values);
      recv.resize(n, -1.0f);  // poison: the all-reduce must overwrite every element
      REQUIRE(registrations_match(*observer, send, recv));
      chunks_seen = send.storage().stats().chunks_created + recv.storage().stats().chunks_created;
      CUVMM_NCCL_REQUIRE(ncclAllReduce(send.data(), recv.data(), n, ncclFloat, ncclSum, comm.get(), stream.get()));
      std::vector<float> out(n);
      recv.copy_to(out, stream.get());
      std::vector<float> expected(n);
      for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<float>(i % 4093) - 2046.0f;
      CHECK(out == expected);
    }
    // Every chunk created was registered.
    CHECK(observer->registered_total() == chunks_seen);
    CHECK(observer->deregistered_total() == 0);

    // Shrinking deregisters exactly the chunks it releases, before they are unmapped.
    std::size_t const before = send.storage().chunk_count();
    send.resize(1 * MiB / sizeof(float));
    send.shrink_to_fit();
    CHECK(observer->deregistered_total() == before - send.storage().chunk_count());
    CHECK(registrations_match(*observer, send, recv));
    CUVMM_NCCL_REQUIRE(ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat, ncclSum, comm.get(), stream.get()));
    stream.synchronize();
    CHECK(recv.element(send.size() - 1) == static_cast<float>((send.size() - 1) % 4093) - 2046.0f);
    CHECK(send.remove_observer(*observer));
    CHECK(recv.remove_observer(*observer));
    CHECK(observer->registrations().empty());
    CHECK(observer->registered_total() == observer->deregistered_total());
  }
  leaks.verify();

  // NCCL's log: it exists and has NCCL's INFO lines; the registration lines it printed are reported.
  std::ifstream log(nccl_log_path());
  REQUIRE(log.good());
  std::size_t info_lines = 0;
  std::vector<std::string> registration_lines;
  for (std::string line; std::getline(log, line);) {
    info_lines += line.find("NCCL INFO") != std::string::npos ? 1 : 0;
    if (line.find("egister") != std::string::npos || line.find("REG") != std::string::npos) {
      if (registration_lines.size() < 8) registration_lines.push_back(line);
    }
  }
  CHECK(info_lines > 0);
  std::string shown;
  for (const std::string& l : registration_lines) shown += "\n  " + l;
  WARN("NCCL log " << nccl_log_path().string() << ": " << info_lines << " INFO lines; lines about registration"
                   << (registration_lines.empty() ? std::string(": none printed") : shown));
}

TEST_CASE("windows: each chunk also gets an NCCL window, or NCCL's refusal undoes the growth", "[gpu][nccl]") {
  test::require_gpu();
  test::init_runtime();
  CHECK_THROWS_AS(NcclObserver(nullptr), Error);
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    OneRank const comm;
    if (!NcclObserver::has_windows()) {
      CHECK_THROWS_AS(NcclObserver(comm.get(), {.windows = true}), Unsupported);
      SKIP("the NCCL this library was built against has no windows (before 2.27)");
    }
    GrowableBuffer<float> buffer(cuda, for_nccl());
    auto observer = std::make_shared<NcclObserver>(comm.get(), NcclObserverOptions{.windows = true});
    buffer.add_observer(observer);
    try {
      buffer.resize(8 * MiB / sizeof(float), 1.0f);
      buffer.resize(100 * MiB / sizeof(float), 1.0f);
      REQUIRE(registrations_match(*observer, buffer));
      for (const auto& r : observer->registrations()) CHECK(r.window != nullptr);
    } catch (const Error& e) {
      REQUIRE(e.domain() == ErrorDomain::nccl);
      CHECK(observer->registrations().size() == buffer.storage().chunk_count());  // nothing half-registered
      CHECK(registrations_match(*observer, buffer));
      WARN("NCCL refused a window on cuvmm memory (the growth was undone): " << e.what());
    }
    buffer.resize(0);
    buffer.shrink_to_fit();
    CHECK(observer->registrations().size() == buffer.storage().chunk_count());
  }
  leaks.verify();
}

TEST_CASE("an arena's pages are registered as it maps them and deregistered before they leave their addresses",
          "[gpu][nccl][arena]") {
  test::require_gpu();
  test::init_runtime();
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    OneRank const comm;
    test::Stream const stream;
    DeviceCaps const caps = device_caps(0);
    ArenaOptions options;
    options.address_space_bytes = 16 * GiB;
    if (caps.posix_fd_handles) options.shareable = HandleType::posix_fd;
    options.gpu_direct_rdma = caps.gpu_direct_rdma_with_vmm;
    Arena arena(cuda, options);
    auto observer = std::make_shared<NcclObserver>(comm.get());
    arena.add_observer(observer);
    for (std::size_t mib : {4, 100, 300}) {
      CAPTURE(mib);
      std::size_t const n = mib * MiB / sizeof(float);
      auto* send = static_cast<float*>(arena.allocate(n * sizeof(float), stream.get()));
      auto* recv = static_cast<float*>(arena.allocate(n * sizeof(float), stream.get()));
      // Every page the arena maps now is registered once, and nothing else.
      std::size_t registered_bytes = 0;
      for (const auto& r : observer->registrations()) registered_bytes += r.range.bytes;
      CHECK(registered_bytes == arena.stats().bytes_mapped.current);
      std::vector<float> values(n);
      for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1021);
      CUVMM_CUDA_REQUIRE(cudaMemcpyAsync(send, values.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream.get()));
      CUVMM_CUDA_REQUIRE(cudaMemsetAsync(recv, 0xA5, n * sizeof(float), stream.get()));
      CUVMM_NCCL_REQUIRE(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm.get(), stream.get()));
      std::vector<float> out(n);
      CUVMM_CUDA_REQUIRE(cudaMemcpyAsync(out.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost, stream.get()));
      stream.synchronize();
      CHECK(out == values);
      arena.deallocate(send, n * sizeof(float), stream.get());
      arena.deallocate(recv, n * sizeof(float), stream.get());
    }
    arena.trim();  // unmaps everything cached: every registration goes first
    CHECK(observer->registrations().empty());
    CHECK(observer->registered_total() == observer->deregistered_total());
    CHECK(observer->registered_total() > 0);
    arena.release_stream(stream.get());
  }
  leaks.verify();
}
